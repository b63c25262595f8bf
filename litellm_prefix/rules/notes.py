"""Injected notes: re-seeding when their anchors are gone, and placing them in the body.

A note sits right after the client's body message it was anchored to (index and content
hash), on the request where it was first sent and on every later one, so turn N's
output stays a prefix of turn N+1's. Its role follows the target: a system (developer)
message where mid-conversation system messages stay in place, else a user message that
says it is an operator note.
"""
from __future__ import annotations

from typing import Any

from ..context import Context, Event
from ..journal import Journal, Note, content_hash
from ..sections import memo
from ..view import View
from .mid_system import as_system_update, target_keeps_mid_system

DROPPED = object()  # placeholder for a body message a rule removed; keeps client indices stable


def tail_anchor(ctx: Context) -> tuple[int, str] | None:
    """The last client message: where a new note goes."""
    if not ctx.client_body:
        return None
    index = len(ctx.client_body) - 1
    return index, message_hash(ctx, index)


def message_hash(ctx: Context, index: int) -> str:
    """``content_hash`` of client message ``index``, once per request however many rules ask
    (note anchors, and the keys of dropped section patches)."""
    key = ("message hash", index)
    found = ctx.memo.get(key)
    if found is None or found[0] is not ctx.client_body[index]:
        found = ctx.memo[key] = (ctx.client_body[index], message_digest(ctx.client_body[index]))
    return found[1]


def message_digest(item: Any) -> str:
    """``content_hash(item)``; for a message of strings only (``{"role", "content"}``, ``tool_call_id``...)
    with a long content, remembered with the content's text (``sections.memo``): an anchor or a
    patch is the same message request after request, and finding a known text costs a
    comparison, not an encoding and a hash of it. Same value: the message's JSON (sorted keys)
    is a function of its content and its other fields, which are part of the memo's key."""
    if type(item) is dict:
        content = item.get("content")
        if type(content) is str and len(content) > 64 and all(type(v) is str for v in item.values()):
            rest = tuple(sorted((k, v) for k, v in item.items() if k != "content"))
            return memo(content, ("content_hash", rest), lambda text: content_hash({**dict(rest), "content": text}))
    return content_hash(item)


def _anchor_holds(ctx: Context, index: int, anchor: str) -> bool:
    return 0 <= index < len(ctx.client_body) and message_hash(ctx, index) == anchor


def reseed(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    """Drop the notes whose anchors are gone, and re-seed the state each of them carried."""
    gone_kinds = {note.kind for note in journal.notes if not _anchor_holds(ctx, note.index, note.anchor)}
    dropped = frozenset(k for k in journal.dropped if _dropped_key_holds(ctx, k))
    if not gone_kinds and dropped == journal.dropped:
        return view, journal, []
    notes = tuple(n for n in journal.notes if n.kind not in gone_kinds)
    updated = journal.replace(notes=notes, dropped=dropped)
    if "memory" in gone_kinds:
        updated = updated.replace(memory=None)
    if "sections" in gone_kinds:
        updated = updated.replace(pinned=None, told=None)
    names = {kind.split(":", 1)[1] for kind in gone_kinds if kind.startswith("volatile:")}
    if names:
        updated = updated.replace(volatile=tuple(v for v in updated.volatile if v[0] not in names))
    event = Event("reseed", {"parts": sorted(gone_kinds), "dropped_keys": len(journal.dropped) - len(dropped)})
    return view, updated, [event]


def _dropped_key_holds(ctx: Context, key: str) -> bool:
    index, anchor, _ = key.split(":", 2)
    return _anchor_holds(ctx, int(index), anchor)


def note_message(view: View, ctx: Context, text: str) -> dict[str, Any]:
    keeps = view.shape != "anthropic" and target_keeps_mid_system(
        ctx.target, ctx.settings.supports_mid_conversation_system
    )
    role = "developer" if view.shape == "responses" else "system"
    return {"role": role, "content": text} if keeps else as_system_update({"content": text}, view.text_part)


def place_notes(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    """Insert every journal note after its anchor; remove placeholders of dropped messages."""
    if not journal.notes and not any(item is DROPPED for item in view.body):
        return view, journal, []
    after: dict[int, list[Note]] = {}
    for note in journal.notes:
        after.setdefault(note.index, []).append(note)
    body: list[Any] = []
    for index, item in enumerate(view.body):
        if item is not DROPPED:
            body.append(item)
        for note in after.get(index, ()):
            body.append(note_message(view, ctx, note.text))
    return view.replace(body=tuple(body)), journal, []
