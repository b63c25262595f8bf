"""Injected notes: re-seeding when their anchors are gone, and placing them in the body.

A note sits right after the client's body message it was anchored to (index and content
hash), on the request where it was first sent and on every later one, so turn N's
output stays a prefix of turn N+1's. Its form follows the target's role rules
(``mid_system.role_rules``):

- ``"system"`` (the target keeps mid-conversation system messages: OpenAI, Azure,
  Anthropic, Bedrock, a deployment declaring ``true``): its own message, a system
  (Responses: developer) message; on ``/v1/messages`` a user message that says it is an
  operator note (Anthropic merges consecutive user turns). Byte for byte as before.
- ``"user"`` (the target hoists or rejects them; always in Gemini's native ``contents``,
  which have no system role: ``view.alternates_roles``) and ``"unknown"`` (a self-hosted
  OpenAI-compatible server that declares nothing): a form no chat template rejects,
  neither a system message after the first nor a user message after a user message
  (Mistral- and Gemma-family templates raise ``Conversation roles must alternate...``).
  The note, framed as an operator note and closed by ``MERGED_NOTE_END``, is folded into
  a neighbouring message of the right role (``fold``), and so is each client system
  message ``mid_system`` converted:

  - after a user message (chat, Responses, Anthropic, a Gemini ``user`` content, its function
    responses included: the text goes in a text part after them), a tool result (chat ``tool``,
    Responses ``function_call_output``) or a system message the client kept: appended
    to that message after a blank line: string content, or the text part at that end of
    list content, its other keys (a cache mark) kept, so a message sent as a string on one
    turn and as a marked text part on the next (Claude Code) carries the same text; one more
    text part where the end is not text (an image). In an Anthropic user message that ends with a ``tool_result`` block the text
    goes inside that block (LiteLLM turns it into a chat ``tool`` message on other
    targets, where a text block would become a user message after it); a
    ``tool_result`` block stays first in its message either way.
  - after an assistant message (or at the start of the body): prepended to the next
    user message or tool result when the request has one, else its own user message
    (valid there: it follows an assistant turn), several such notes merged into one, and
    closed the same way.

  Invariants: the message a note is folded into is the one it follows (its anchor), or
  the next one in the same request, so a client that only appends sends the same
  folded bytes on every later turn. Two exceptions, both at the previous request's
  last message, whose text then stays a prefix of what takes its place: a client
  system message appended right after it grows it by that message's note, and a note
  left standing after a final assistant message moves into the start of the user
  message that follows (a request the template accepts outranks that one message's
  cache). Nothing between an assistant's tool calls and their results; every part of
  the client's messages kept, in order; idempotent, since what was folded holds no
  system message to convert again, and notes are placed once per call (the deployment
  hook re-runs only the stateless rules on a call already rewritten).
"""
from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat
from operator import is_
from typing import Any

from ..context import Context
from ..events import Event
from ..journal import Journal, Note, content_hash
from ..sections import memo
from ..view import SYSTEM_ROLES, View, alternates_roles, is_system_message
from .mid_system import SYSTEM_UPDATE_NOTE, as_system_update, role_rules
from .transient import without_transient

DROPPED = object()  # placeholder for a body message a rule removed; keeps client indices stable
MERGED_NOTE_END = "(End of note.)"
# Responses items that carry a tool's result, and their field for it.
_TOOL_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})


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
        # An agent's transient parts (rules/transient.py) are no part of a message's identity: a
        # replay that leaves them out keeps the notes placed after it.
        item = without_transient(ctx.client_body[index], ctx.settings.transient_parts_res)
        found = ctx.memo[key] = (ctx.client_body[index], message_digest(item))
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
    """Drop the notes whose anchors are gone (the client compacted or edited its history), and
    re-seed the state each of them carried: a memory snapshot and pinned sections start again; a
    pinned volatile span keeps its pinned value in the head and is noted again where it differs."""
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
    if names:  # the span stays pinned (the head keeps its cache); its current value is noted again at once
        updated = updated.replace(volatile=tuple((name, pinned, pinned if name in names else last)
                                                 for name, pinned, last in updated.volatile))
    event = Event("reseed", {"parts": sorted(gone_kinds), "dropped_keys": len(journal.dropped) - len(dropped)})
    return view, updated, [event]


def _dropped_key_holds(ctx: Context, key: str) -> bool:
    index, anchor, _ = key.split(":", 2)
    return _anchor_holds(ctx, int(index), anchor)


def note_roles(view: View, ctx: Context) -> str:
    """``mid_system.role_rules`` for this request: ``"user"`` (fold) for a shape whose body alternates
    user and model turns (Gemini's ``contents``: no system role there, whatever the target)."""
    if alternates_roles(view.shape):
        return "user"
    return role_rules(ctx.target, ctx.settings.supports_mid_conversation_system)


def note_message(view: View, ctx: Context, text: str) -> dict[str, Any]:
    """A note as its own message (``place_notes`` folds it where the target's roles call for that)."""
    keeps = view.shape != "anthropic" and note_roles(view, ctx) == "system"
    role = "developer" if view.shape == "responses" else "system"
    return {"role": role, "content": text} if keeps else as_system_update({"content": text}, view.text_part)


def place_notes(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    """Insert every journal note after its anchor; remove placeholders of dropped messages; fold
    notes and converted system messages into their neighbours where the target's roles call for it."""
    rules = note_roles(view, ctx)
    folding = rules != "system"
    converted = _converted_positions(view, ctx) if rules == "user" else ()  # (only there are any)
    if not journal.notes and not converted and not any(map(is_, view.body, repeat(DROPPED))):
        return view, journal, []
    after: dict[int, list[Note]] = {}
    for note in journal.notes:
        after.setdefault(note.index, []).append(note)
    body: list[Any] = []
    foldable: list[bool] = []
    for index, item in enumerate(view.body):
        if item is not DROPPED:
            body.append(item)
            foldable.append(index in converted)
        for note in after.get(index, ()):
            body.append(note_message(view, ctx, note.text))
            foldable.append(folding)
    events: list[Event] = []
    if folding and any(foldable):
        body, folded = fold(body, foldable, view.shape, view.text_part)
        if folded:
            events.append(Event("notes_folded", {"folded": folded, "provider": ctx.target.provider}))
    return view.replace(body=tuple(body)), journal, events


def _converted_positions(view: View, ctx: Context) -> frozenset[int]:
    """Body positions of the client's system messages that ``mid_system`` turned into user notes."""
    client = ctx.client_body
    return frozenset(
        i for i, item in enumerate(client)
        if i < len(view.body) and is_system_message(item) and view.body[i] is not item
        and isinstance(view.body[i], Mapping) and view.body[i].get("role") == "user")


# -- the folded form -------------------------------------------------------------------


def _kind(item: Any, shape: str) -> str:
    """``user``, ``tool`` (a tool's result), ``system`` (a system/developer message) or ``other``."""
    if not isinstance(item, Mapping):
        return "other"
    if shape == "responses":
        kind = item.get("type", "message")
        if kind in _TOOL_OUTPUT_ITEMS:
            return "tool"
        if kind != "message":
            return "other"
    role = item.get("role")
    if role == "user":
        return "user"
    if shape == "chat" and role in ("tool", "function"):
        return "tool"
    if shape != "anthropic" and role in SYSTEM_ROLES:
        return "system"
    return "other"


def _field(item: Mapping[str, Any], shape: str) -> str:
    return "output" if shape == "responses" and item.get("type") in _TOOL_OUTPUT_ITEMS else "content"


def _block(note: Mapping[str, Any], text_part: str) -> str | list[Any]:
    """A note's content, closed by ``MERGED_NOTE_END``: one text where it is all text, else its parts."""
    content = note.get("content")
    if isinstance(content, str):
        return f"{content}\n\n{MERGED_NOTE_END}"
    parts = list(content) if isinstance(content, list) else []
    if all(isinstance(p, Mapping) and set(p) == {"type", "text"} and p["type"] == text_part
           and isinstance(p["text"], str) for p in parts):
        return "\n\n".join([*(p["text"] for p in parts), MERGED_NOTE_END])
    return [*parts, {"type": text_part, "text": MERGED_NOTE_END}]


def _joined(content: Any, block: str | list[Any], at_end: bool, text_part: str) -> Any:
    """``content`` with ``block`` after it (``at_end``) or before it; ``None`` where it cannot take one."""
    if content is None or content == "" or content == []:
        return block
    if isinstance(content, str):
        if isinstance(block, str):
            return f"{content}\n\n{block}" if at_end else f"{block}\n\n{content}"
        own = [{"type": text_part, "text": content}]
        return [*own, *block] if at_end else [*block, *own]
    if isinstance(content, list):
        if isinstance(block, str) and content:
            # Into the text part at that end, its other keys (a cache mark) kept: a client that sends
            # one message as a string on one turn and as a marked text part on the next (Claude Code
            # does) gets the same text either way.
            edge = len(content) - 1 if at_end else 0
            part = content[edge]
            if isinstance(part, Mapping) and part.get("type") == text_part and isinstance(part.get("text"), str):
                text = f"{part['text']}\n\n{block}" if at_end else f"{block}\n\n{part['text']}"
                return [*content[:edge], {**part, "text": text}, *content[edge + 1:]]
        extra = [{"type": text_part, "text": block}] if isinstance(block, str) else block
        return [*content, *extra] if at_end else [*extra, *content]
    return None


def _merged(item: Any, shape: str, block: str | list[Any], at_end: bool, text_part: str) -> Any | None:
    """``item`` (a user message, a tool result or a system message) with ``block`` folded in; None if it cannot."""
    if _kind(item, shape) == "other":
        return None
    key = _field(item, shape)
    content = item.get(key)
    if shape == "anthropic" and isinstance(content, list) and content:
        edge = -1 if at_end else 0
        last = content[edge]
        if isinstance(last, Mapping) and last.get("type") == "tool_result":
            inner = _joined(last.get("content"), block, at_end, "text")
            if inner is None:
                return None
            changed = {**last, "content": inner}
            return {**item, key: [*content[:-1], changed] if at_end else [changed, *content[1:]]}
    new = _joined(content, block, at_end, text_part)
    return None if new is None else {**item, key: new}


def fold(body: list[Any], foldable: list[bool], shape: str, text_part: str) -> tuple[list[Any], int]:
    """``body`` with each foldable note merged into a neighbour (the module docstring says which);
    the number folded into another message."""
    out: list[Any] = []
    pending: list[Any] = []  # notes after an assistant turn, waiting for the next user message
    folded = 0
    for item, is_note in zip(body, foldable):
        if is_note:
            merged = None if pending or not out else _merged(out[-1], shape, _block(item, text_part), True, text_part)
            if merged is None:
                pending.append(item)
            else:
                out[-1] = merged
                folded += 1
            continue
        if pending:
            merged = _merged(item, shape, _joined_notes(pending, text_part), False, text_part) \
                if _kind(item, shape) in ("user", "tool") else None
            if merged is None:
                out.append(_standalone(pending, shape, text_part))
                folded += len(pending) - 1
            else:
                item = merged
                folded += len(pending)
            pending = []
        out.append(item)
    if pending:
        out.append(_standalone(pending, shape, text_part))
        folded += len(pending) - 1
    return out, folded


def _joined_notes(notes: list[Any], text_part: str) -> str | list[Any]:
    block: Any = _block(notes[0], text_part)
    for note in notes[1:]:
        block = _joined(block, _block(note, text_part), True, text_part)
    return block


def _standalone(notes: list[Any], shape: str, text_part: str) -> Any:
    """One user message for notes no neighbour could take (they follow an assistant turn), closed
    like a folded note: when the next turn brings a user message, the notes are folded into its
    start instead, and this message's text stays a prefix of that one's."""
    first = notes[0]
    return {**first, _field(first, shape): _joined_notes(notes, text_part)}


def unfolded(item: Any) -> Any:
    """``item`` with every operator note ``fold`` put into it taken out again: the client's own
    message, for checks that nothing the client sent was lost or changed (tests, benches, the
    real-agent suite). A note runs from ``SYSTEM_UPDATE_NOTE`` to ``MERGED_NOTE_END``."""
    if isinstance(item, str):
        return _without_notes(item)
    if isinstance(item, list):
        parts = [unfolded(part) for part in item]
        return [p for p, original in zip(parts, item)
                if not (isinstance(original, Mapping) and isinstance(original.get("text"), str)
                        and original["text"].startswith(SYSTEM_UPDATE_NOTE) and p.get("text") == "")]
    if isinstance(item, Mapping):
        out = dict(item)
        for key in ("content", "output", "text"):
            if key in out and isinstance(out[key], (str, list)):
                out[key] = unfolded(out[key])
        return out
    return item


def _without_notes(text: str) -> str:
    """``text`` without its folded notes: a closed one anywhere, an unclosed one at its end."""
    while SYSTEM_UPDATE_NOTE in text:
        start = text.index(SYSTEM_UPDATE_NOTE)
        end = text.find(MERGED_NOTE_END, start)
        if end < 0:  # folded at the end of the message: no close
            return text[:start - 2] if start >= 2 and text[start - 2:start] == "\n\n" else text[:start]
        end += len(MERGED_NOTE_END)
        if start >= 2 and text[start - 2:start] == "\n\n":
            start -= 2  # folded after the client's text
        elif text[end:end + 2] == "\n\n":
            end += 2  # folded before it
        text = text[:start] + text[end:]
    return text
