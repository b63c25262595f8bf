"""When a request that only appends messages to the stream's last request gets the same
decisions: the pure half of the incremental request path (``core._probe``).

The incremental path reuses the last request's output for its messages and head, and sends
the appended messages as they came, only where the full path would do exactly that. It
requires the same head bytes, the same context, the journal the last request ran on and
left unchanged (so no rule decided anything new on it), no clock read, and the last
request's messages as a byte-for-byte prefix (``core``). Then every rule's output on the
earlier messages is the same, provided the appended messages are *inert* for every rule
that reads the body. Rule by rule:

- the rules that rewrite or read mid-conversation system/developer messages (install
  paths, section patches and their section order, ``mid_system``, the converted messages
  ``place_notes`` folds): none is appended, so each sees the same messages at the same
  positions. A patch's run is the user message right after it (``patches.run_owner``):
  the last request may not end in a system message, so that lookup stays inside it.
- notes (``place_notes``, ``fold``): a note sits after its anchor and folds into that
  message or the next one; no note may be anchored at the last request's final message
  (its next message is an appended one). Anchors before it hold (same messages).
- new notes go after the tail (``notes.tail_anchor``): the rules that add one leave the
  journal unchanged where there is no tail yet, so the last request must have had a message.
- ``head_pin`` reads whether the run of the last message is a notification run: it must be
  the same for both requests (``notification``, recorded with the last request).
- ``volatile``'s first-user-message context: the first user message must be in the last
  request already (or the setting off).
- drift (``record_head``) reads the body's size only when the head changed against the
  journal, which would have changed the journal: never here.
- transient parts (``rules/transient``): an appended user message that carries one would be
  recorded in the journal, so it is not inert; earlier messages are the last request's.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .context import Context
from .journal import Journal
from .rules.patches import run_is_notification
from .rules.transient import without_transient
from .rules.volatile import first_user
from .view import SYSTEM_ROLES


def _system_role(item: Any) -> bool:
    return (type(item) is dict or isinstance(item, Mapping)) and item.get("role") in SYSTEM_ROLES


def extensible(body: Sequence[Any], journal: Journal, ctx: Context) -> bool | None:
    """For a request the rules ran on (``body``, the journal they left unchanged): whether the run
    of its last message is a notification run, where a request that appends to it may reuse
    its decisions; None where it may not."""
    count = len(body)
    if count == 0 or _system_role(body[-1]):
        return None
    if any(note.index >= count - 1 for note in journal.notes):
        return None
    if ctx.settings.first_user_context and first_user(body) is None:
        return None
    return run_is_notification(body, -1, ctx)


def extends(notification: bool | None, appended: Sequence[Any], body: Sequence[Any], ctx: Context) -> bool:
    """Whether ``appended`` (the messages ``body`` adds to a request ``extensible`` judged) changes
    no rule's decision; ``body`` is the whole new body."""
    if notification is None or not appended:
        return False
    if any(_system_role(item) for item in appended):
        return False
    patterns = ctx.settings.transient_parts_res
    if patterns and any(without_transient(item, patterns) is not item for item in appended):
        return False
    return run_is_notification(body, -1, ctx) == notification
