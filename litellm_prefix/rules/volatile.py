"""Volatile spans (opt-in): named regexes whose match in the head is pinned to its first value.

A date line, a clock time or a git status block changes during a session and moves
the head with it. Each configured span keeps its first value in the head for the whole
session; when the real value changes, the new value is delivered once as a short note
at the tail (like a memory correction) and replayed at the same place afterwards.
"""
from __future__ import annotations

from ..context import Context, Event
from ..journal import Journal, Note
from ..view import View
from .notes import tail_anchor


def volatile_note(name: str, value: str) -> str:
    return f"Update ({name}): the system prompt shows the value from the start of this session. Current value:\n{value}"


def pin_volatile_spans(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    rules = ctx.settings.volatile_rules
    if not rules:
        return view, journal, []
    head = list(view.head)
    events: list[Event] = []
    for name, pattern in rules:
        for index, segment in enumerate(head):
            match = pattern.search(segment)
            if match:
                break
        else:
            continue
        value = match.group(0)
        recorded = journal.volatile_value(name)
        if recorded is None:
            journal = journal.with_volatile(name, value, value)
            continue
        pinned, last = recorded
        if value != pinned:
            head[index] = segment[: match.start()] + pinned + segment[match.end():]
        if value != last:
            anchor = tail_anchor(ctx)
            if anchor is None:
                continue
            journal = journal.with_volatile(name, pinned, value).with_note(
                Note(anchor[0], anchor[1], f"volatile:{name}", volatile_note(name, value)))
            events.append(Event("volatile", {"name": name, "action": "note"}))
    if tuple(head) != view.head:
        view = view.replace(head=tuple(head))
    return view, journal, events
