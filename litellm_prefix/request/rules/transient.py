"""Transient parts: a reminder an agent sends in a user message and leaves out when it replays it.

Qwen Code 0.24 adds ``<system-reminder>\\nThe current date is: <date>. ...</system-reminder>`` as a
text part of the first query of each process (``lastInjectedDate`` is per process), but its
session file does not keep it: ``--continue`` replays those messages without it. The model had
them with it, the prefix cache holds them with it, and the replay moves the prefix from the
first such message on (the session's first prompt, then the first query of every earlier
process), on every continue.

A profile (or the setting ``transientParts``) names such parts by regex, matched against a whole
text part. The newest user message of a request, where it carries one, is recorded in the journal
(``transient``: the message's index, a hash of the message without its transient parts, and each
part's place and text; the last ``MAX_KEPT`` messages). On a later request, a user message at a
recorded index that carries none of those parts and is, without them, the message recorded (the
same hash: the same text, nothing else changed) gets them back at their places. A message that
changed in any other way passes as sent (its prefix is gone anyway); nothing else is ever added.

The note anchors (``notes.message_hash``) leave transient parts out, so a note placed after a
message keeps its place when a replay drops the message's reminder.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..context import Context
from ..events import Event
from ..journal import Journal, content_hash, unmarked
from ..view import TEXT_PART_TYPES, View, field_of, is_user_message

MAX_KEPT = 32  # messages whose transient parts the journal keeps (the newest)


def _transient(part: Any, patterns: Sequence[Any]) -> bool:
    text = field_of(part, "text")
    return (field_of(part, "type") in TEXT_PART_TYPES and isinstance(text, str)
            and any(p.fullmatch(text) for p in patterns))


def without_transient(item: Any, patterns: Sequence[Any]) -> Any:
    """``item`` (a message) without its transient parts: the same object where it has none."""
    if not patterns or not isinstance(item, dict):
        return item
    content = item.get("content")
    if not isinstance(content, list) or not any(_transient(p, patterns) for p in content):
        return item
    return {**item, "content": [p for p in content if not _transient(p, patterns)]}


def _key(item: Any) -> str:
    return content_hash(json.dumps(unmarked(item), sort_keys=True, ensure_ascii=False, default=str))


def keep_transient_parts(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    patterns = ctx.settings.transient_parts_res
    if not patterns or not view.body:
        return view, journal, []
    body = view.body
    events: list[Event] = []
    kept: dict[int, tuple[str, list[tuple[int, str]]]] = {}
    for index, key, position, text in journal.transient:
        kept.setdefault(index, (key, []))[1].append((position, text))
    new_body: list[Any] | None = None
    for index, (key, parts) in kept.items():
        if index >= len(body) - 1:
            continue  # the newest message is the client's own request, never replayed yet
        item = body[index]
        content = item.get("content") if isinstance(item, dict) else None
        if not is_user_message(item) or not isinstance(content, list) or any(_transient(p, patterns) for p in content):
            continue
        if _key(item) != key:
            continue  # the message changed otherwise: as sent
        restored = list(content)
        for position, text in sorted(parts):
            if position > len(restored):
                break
            restored.insert(position, {"type": _part_type(content), "text": text})
        else:
            if new_body is None:
                new_body = list(body)
            new_body[index] = {**item, "content": restored}
            events.append(Event("transient", {"action": "restore", "message": index, "parts": len(parts)}))
    if new_body is not None:
        view = view.replace(body=tuple(new_body))
    last = len(body) - 1
    item = body[last]
    content = item.get("content") if isinstance(item, dict) else None
    if is_user_message(item) and isinstance(content, list):
        found = [(position, part["text"]) for position, part in enumerate(content) if _transient(part, patterns)]
        key = _key(without_transient(item, patterns)) if found else None
        if found and (last not in kept or kept[last][0] != key):
            entries = [e for e in journal.transient if e[0] != last]
            entries += [(last, key, position, text) for position, text in found]
            indexes = sorted({e[0] for e in entries})[-MAX_KEPT:]
            journal = journal.replace(transient=tuple(e for e in entries if e[0] in indexes))
    return view, journal, events


def _part_type(content: list) -> str:
    """The text part type the message uses (``input_text`` in a Responses item)."""
    return next((field_of(p, "type") for p in content if field_of(p, "type") in TEXT_PART_TYPES), "text")
