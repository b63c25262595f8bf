"""Section patches (pi >= 0.86): drop the ones that would only cost tokens.

pi sends later changes of its sectioned head as mid-conversation system messages of
``Removed system prompt section "NAME".`` / ``Updated system prompt section "NAME": ...``
entries. This rule tracks each section's text from the head through every patch, and:

- drops entries that set a section to the text it already has (or remove one that is
  not there), and patch messages left empty;
- in a run not started by a typed prompt (its first user message is an extension
  notification, by ``notificationPatterns``), drops removals of extension sections, never
  of pi's own sections, and records each such drop in the journal, so later requests,
  resumes and other replicas drop it too. The re-add that usually follows is then a
  no-op and is dropped as well: the flip never reaches the model.

Text changes, removals in typed runs, removals of pi's own sections and any other
system message (e.g. "Context compacted.") pass through.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..context import Context, Event
from ..journal import Journal, content_hash
from ..sections import PI_SECTIONS, PatchEntry, parse_head, parse_patch, render_patch
from ..view import View
from .notes import DROPPED

_MARK = "system prompt section"


def _text_of(item: Any) -> str | None:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping):
        text = content[0].get("text")
        return text if isinstance(text, str) else None
    return None


def _with_text(item: Mapping[str, Any], text: str) -> dict[str, Any]:
    content = item.get("content")
    if isinstance(content, str):
        return {**item, "content": text}
    return {**item, "content": [{**content[0], "text": text}]}


def _user_text(item: Any) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                return part["text"]
    return ""


def is_notification(item: Any, ctx: Context) -> bool:
    text = _user_text(item)
    return any(pattern.search(text) for pattern in ctx.settings.notification_res)


def run_flags(body: tuple[Any, ...], ctx: Context) -> list[bool]:
    """For each body message: is it inside a run started by a notification (not a typed prompt)?"""
    flags = []
    current = False
    for item in body:
        if isinstance(item, Mapping) and item.get("role") == "user":
            current = is_notification(item, ctx)
        flags.append(current)
    return flags


def _patch_entries(item: Any) -> list[PatchEntry] | None:
    if not isinstance(item, Mapping) or item.get("role") not in ("system", "developer"):
        return None
    text = _text_of(item)
    if text is None or _MARK not in text:
        return None
    return parse_patch(text)


def head_state(view: View) -> dict[str, str]:
    for segment in view.head:
        sections = parse_head(segment)
        if sections:
            return dict(sections)
    return {}


def drop_redundant_patches(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    if view.shape == "anthropic":
        return view, journal, []
    patches = {i: e for i, item in enumerate(view.body) if (e := _patch_entries(item)) is not None}
    if not patches:
        return view, journal, []
    state = head_state(view)
    flags = run_flags(view.body, ctx)
    body = list(view.body)
    dropped = set(journal.dropped)
    counts = {"noop": 0, "notification_removal": 0, "recorded": 0, "emptied": 0}
    for index in sorted(patches):
        entries = patches[index]
        message_hash = content_hash(ctx.client_body[index]) if index < len(ctx.client_body) else ""
        kept: list[PatchEntry] = []
        for number, entry in enumerate(entries):
            key = f"{index}:{message_hash}:{number}"
            if key in journal.dropped:
                counts["recorded"] += 1
                continue
            if (entry.action == "updated" and state.get(entry.name) == entry.block) or (
                entry.action == "removed" and entry.name not in state
            ):
                counts["noop"] += 1
                continue
            if entry.action == "removed" and flags[index] and entry.name not in PI_SECTIONS:
                dropped.add(key)
                counts["notification_removal"] += 1
                continue
            kept.append(entry)
            if entry.action == "updated":
                state[entry.name] = entry.block
            else:
                state.pop(entry.name, None)
        if len(kept) != len(entries):
            if kept:
                body[index] = _with_text(view.body[index], render_patch(kept))
            else:
                body[index] = DROPPED
                counts["emptied"] += 1
    if body == list(view.body):
        return view, journal, []
    new_journal = journal.replace(dropped=frozenset(dropped)) if dropped != set(journal.dropped) else journal
    return view.replace(body=tuple(body)), new_journal, [Event("section_patches", counts)]
