"""Pinned head: folded section patches, and ``headPolicy: pin``.

For models without mid-conversation system support pi folds its section patches into
the head, so an extension that drops its section during a background run rewrites the
whole head. The journal pins the session's head (section by section, by content hash):

- ``headPolicy: follow`` (default): during a run not started by a typed prompt, a head
  that is the pinned head minus extension sections is replaced by the pinned head.
  Any other head (or any change in a typed run) is accepted and becomes the new pin.
- ``headPolicy: pin``: the head never moves. Every section change is delivered once as
  an in-place note in pi's own patch wording, anchored at the tail and replayed.

Tools are not part of the pin: tool changes always pass through.
"""
from __future__ import annotations

from ..context import Context
from ..events import Event, TextsNeeded, TextsToKeep
from ..journal import Journal, Note
from ..sections import PI_SECTIONS, PatchEntry, known_sections, parse_head, render_patch, section_digests
from ..view import View
from .notes import tail_anchor
from .patches import run_is_notification


def _last_run_is_notification(view: View, ctx: Context) -> bool:
    """Is the run this request continues (the run of its last message) a notification run?"""
    return run_is_notification(view.body, -1, ctx)


def _minus_extensions(current: tuple[tuple[str, str], ...], pinned: tuple[tuple[str, str], ...]) -> bool:
    """Is ``current`` the pinned head with one or more extension sections taken out?"""
    if len(current) >= len(pinned):
        return False
    it = iter(current)
    following = next(it, None)
    for entry in pinned:
        if entry == following:
            following = next(it, None)
        elif entry[0] in PI_SECTIONS:
            return False
    return following is None


def _texts_event(sections: list[tuple[str, str]], hashes: tuple[tuple[str, str], ...]) -> Event:
    return Event("texts", TextsToKeep({h: block for (_, block), (_, h) in zip(sections, hashes)}))


def keep_pinned_head(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    if not view.head:
        return view, journal, []
    sections = parse_head(view.head[0])
    if sections is None:
        return view, journal, []
    hashes = tuple((name, h) for (name, _), h in zip(sections, section_digests(view.head[0])))
    pinned = journal.pinned
    if pinned is None or hashes == pinned and journal.told in (None, pinned):
        if pinned is None:
            return view, journal.replace(pinned=hashes), [_texts_event(sections, hashes)]
        return view, journal, []

    texts = {h: block for (_, block), (_, h) in zip(sections, hashes)}
    missing = [h for _, h in pinned if h not in texts and h not in ctx.texts]

    def pinned_head() -> tuple[str, ...]:
        text = known_sections(tuple((name, texts.get(h) or ctx.texts[h]) for name, h in pinned))
        return (text, *view.head[1:])

    if ctx.settings.head_policy == "pin":
        if missing:
            return _need_or_reseed(view, journal, ctx, missing, sections, hashes)
        told = journal.told or pinned
        if hashes != told:
            told_map = dict(told)
            entries = [PatchEntry("updated", name, texts[h]) for name, h in hashes if told_map.get(name) != h]
            current_names = {name for name, _ in hashes}
            entries += [PatchEntry("removed", name) for name, _ in told if name not in current_names]
            anchor = tail_anchor(ctx)
            if anchor is None:
                return view.replace(head=pinned_head()), journal, []
            journal = journal.replace(told=hashes).with_note(
                Note(anchor[0], anchor[1], "sections", render_patch(entries)))
            return view.replace(head=pinned_head()), journal, [
                _texts_event(sections, hashes), Event("head_pin", {"action": "note", "entries": len(entries)})]
        return view.replace(head=pinned_head()), journal, []

    if hashes == pinned:
        return view, journal, []
    if _last_run_is_notification(view, ctx) and _minus_extensions(hashes, pinned):
        if missing:
            return _need_or_reseed(view, journal, ctx, missing, sections, hashes)
        removed = sorted({name for name, _ in pinned} - {name for name, _ in hashes})
        return view.replace(head=pinned_head()), journal, [Event("head_pin", {"action": "kept pinned", "sections": removed})]
    return view, journal.replace(pinned=hashes, told=None), [_texts_event(sections, hashes)]


def _need_or_reseed(view, journal, ctx, missing, sections, hashes):
    if ctx.texts_fetched:
        # The pinned texts are gone from the store (evicted): re-seed the pin from this head.
        return view, journal.replace(pinned=hashes, told=None), [
            _texts_event(sections, hashes), Event("reseed", {"parts": ["sections"], "reason": "pinned text evicted"})]
    return view, journal, [Event("need_texts", TextsNeeded(missing))]
