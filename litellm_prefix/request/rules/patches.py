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

Which run a patch belongs to (``run_owners``): a patch directly before a user message
(only system/developer messages in between) belongs to that message's run: pi sends the
patch for a change the user made (``/todo off``) together with the typed prompt. Any
other message belongs to the run of the last user message before it. A drop recorded for
a patch that now leads a typed run is lifted: the user's own change reaches the model.

Text changes, removals in typed runs, removals of pi's own sections and any other
system message (e.g. "Context compacted.") pass through.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..context import Context
from ..events import Event
from ..journal import Journal
from ..sections import PI_SECTIONS, PatchEntry, parse_head, parse_patch, render_patch
from ..view import View, field_of, is_system_message
from .notes import DROPPED, message_hash

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
    content = field_of(item, "content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                return part["text"]
    return ""


def is_notification(item: Any, ctx: Context, patterns: Sequence[Any] | None = None) -> bool:
    text = _user_text(item)
    return any(pattern.search(text) for pattern in (ctx.settings.notification_res if patterns is None else patterns))


def starts_run(item: Any) -> bool:
    """A user message that starts a run: any user message except an Anthropic-style one that
    only carries tool results (the agent's own turn, inside the run of the prompt before it)."""
    if field_of(item, "role") != "user":
        return False
    content = field_of(item, "content")
    if isinstance(content, list) and content and all(
            isinstance(part, Mapping) and part.get("type") == "tool_result" for part in content):
        return False
    return True


def run_owners(body: Sequence[Any]) -> list[int | None]:
    """For each body message, the index of the user message whose run it belongs to.

    A user message starts its own run. A system/developer message followed by a user
    message with only system/developer messages in between belongs to that user
    message's run (pi sends the patch for a change the user made with the prompt it
    goes with, directly before it); every other message belongs to the run of the last
    user message before it (``None`` before the first one).
    """
    owners: list[int | None] = []
    starts = [starts_run(item) for item in body]
    last: int | None = None
    for index, start in enumerate(starts):
        if start:
            last = index
        owners.append(last)
    following: int | None = None
    for index in range(len(body) - 1, -1, -1):
        item = body[index]
        if starts[index]:
            following = index
        elif is_system_message(item):
            if following is not None:
                owners[index] = following
        else:
            following = None
    return owners


def run_owner(body: Sequence[Any], index: int) -> int | None:
    """``run_owners(body)[index]``, from the messages around ``index`` only (the patches of a
    request are few; its messages are many)."""
    if index < 0:
        index += len(body)
    item = body[index]
    if starts_run(item):
        return index
    if is_system_message(item):
        following = index + 1
        while following < len(body) and is_system_message(body[following]):
            following += 1
        if following < len(body) and starts_run(body[following]):
            return following
    for before in range(index - 1, -1, -1):
        if starts_run(body[before]):
            return before
    return None


def run_is_notification(body: Sequence[Any], index: int, ctx: Context) -> bool:
    """Is body message ``index`` (negative counts from the end) inside a notification run?"""
    if not body:
        return False
    owner = run_owner(body, index)
    return owner is not None and is_notification(body[owner], ctx)


def _patch_entries(item: Any) -> list[PatchEntry] | None:
    if not isinstance(item, Mapping) or item.get("role") not in ("system", "developer"):
        return None
    text = _text_of(item)
    if text is None or _MARK not in text:
        return None
    return parse_patch(text)


def transcript_patches(view: View) -> dict[int, list[PatchEntry]]:
    """The section patches in the body: ``{message index: its entries}``, in body order."""
    return {i: e for i in view.system_roles if (e := _patch_entries(view.body[i])) is not None}


def head_state(view: View) -> dict[str, str]:
    for segment in view.head:
        sections = parse_head(segment)
        if sections:
            return dict(sections)
    return {}


def drop_redundant_patches(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    if view.shape == "anthropic":
        return view, journal, []
    patches = transcript_patches(view)
    if not patches:
        return view, journal, []
    state = head_state(view)
    # The run of each patch (and whether a notification started it), looked up around the patch.
    owners = {index: run_owner(view.body, index) for index in patches}
    patterns = ctx.settings.notification_res
    verdicts: dict[int, bool] = {}
    flags: dict[int, bool] = {}
    for index, owner in owners.items():
        if owner is not None and owner not in verdicts:
            verdicts[owner] = is_notification(view.body[owner], ctx, patterns)
        flags[index] = owner is not None and verdicts[owner]
    body = list(view.body)
    dropped = set(journal.dropped)
    counts = {"noop": 0, "notification_removal": 0, "recorded": 0, "emptied": 0, "typed_again": 0}
    for index in sorted(patches):
        entries = patches[index]
        patch_hash = message_hash(ctx, index) if index < len(ctx.client_body) else ""
        # A patch sent with a typed prompt (directly before it) is that prompt's change: the user's own.
        # A drop recorded for it while it still looked like part of a notification run (the
        # request ended at the patch, or an older gateway judged it so) no longer holds.
        leads_typed = (owner := owners[index]) is not None and owner > index and not flags[index]
        kept: list[PatchEntry] = []
        for number, entry in enumerate(entries):
            key = f"{index}:{patch_hash}:{number}"
            if key in journal.dropped:
                if not leads_typed:
                    counts["recorded"] += 1
                    continue
                dropped.discard(key)
                counts["typed_again"] += 1
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
    new_journal = journal.replace(dropped=frozenset(dropped)) if dropped != set(journal.dropped) else journal
    if body == list(view.body):
        return view, new_journal, ([Event("section_patches", counts)] if new_journal is not journal else [])
    return view.replace(body=tuple(body)), new_journal, [Event("section_patches", counts)]
