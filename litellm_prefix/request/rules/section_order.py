"""Section order: a head that only reorders the recorded head's sections is sent in the recorded order.

pi 0.99 lets an extension replace the prompt of typed-prompt runs (``before_agent_start``),
while runs started by extension messages (background-task notifications) keep pi's own
prompt. An extension that only moves sections (a permission extension moving the tool list
after ``cwd``) makes the head switch between two orders of the same sections, twice per
notification run, and every switch prefills the whole conversation again. The model gets
the same text either way.

A section here is a ``<name>\\n...\\n</name>`` block or an untagged paragraph (text between
blank lines outside such blocks); lines keep their order inside a section; pi's tools
filler line ("In addition to the tools above, ...") is left out of the comparison. When a
request's first head segment holds exactly the multiset of sections of the session's
recorded head in another order, the recorded head goes upstream. Any other head (a
section added, removed, or one line changed inside one) passes through, becomes the
recorded head, and the drift report sees it as before. The first head of a session is
recorded, never reordered. The recorded order is that of the head sent upstream (taken at
the end of the pipeline, after the head pin) and lives in the journal (``order``: the
head's hash, then each section's), so resumes and other replicas make the same choice.

In-transcript patches (pi >= 0.86, ``rules/patches.py``): a typed run that changes a section
(an AGENTS.md line) goes upstream with the forced head, which already holds the new text, so
that head is recorded; pi sends the change as an ``Updated system prompt section`` message in
the transcript too. The next notification run sends pi's *original* head plus that message:
not a reorder of the recorded head as it stands, but the same sections once its patches are
applied. So when the head itself is no reorder, it is compared again with the body's patches
that reach the model applied to it, in order: an update replaces the tagged block of that
name (or adds one), a removal drops it, and the removals ``rules/patches.py`` drops in
notification runs are not applied. When that holds exactly the recorded sections, the recorded head goes
upstream and the patch messages stay where they are. The patches are applied to the
request's head only, never to the recorded one: the recorded head is what the model had on
the last request, and it already holds the final text of every patched section (that is
what "the same sections" says), so those patches change nothing in it and the model's
prompt after the last patch is the one the client means. A patch to an untagged section (the
preamble) never matches a tagged block, and any other difference passes through as before.
"""
from __future__ import annotations

import hashlib
import re

from ..context import Context
from ..events import Event
from ..journal import Journal
from ..sections import JOIN, PI_SECTIONS, memo, parse_head, text_digest
from ..view import View
from .notes import message_hash
from .patches import is_notification, run_owner, transcript_patches

_OPEN = re.compile(r"<([A-Za-z][A-Za-z0-9_.-]*)>\n")
# Left out of the comparison: filler that pi's own prompt and a forced prompt may place differently.
FILLER_PARAGRAPHS = (
    "In addition to the tools above, you may have access to other custom tools depending on the project.",
)
_FILLERS = {text_digest(text): text for text in FILLER_PARAGRAPHS}
# A head of more sections than this (a long unsectioned prompt of many paragraphs) is not tracked:
# its order would cost the journal more than the rule can save.
MAX_SECTIONS = 256


def head_units(text: str) -> tuple[str, ...]:
    """The sections of a head text, in order: ``JOIN.join(head_units(text)) == text``."""
    return memo(text, "order units", _units)


def _units(text: str) -> tuple[str, ...]:
    sections = parse_head(text)
    if sections is not None:
        # The same split, from the parse the other rules share (no second scan; the same
        # section strings, so their hashes are shared too): a pi head's preamble holds no
        # section opener after a blank line, so its sections are its paragraphs.
        if sections[0][0] == "preamble" and not _OPEN.match(sections[0][1]):
            return (*sections[0][1].split(JOIN), *(block for _, block in sections[1:]))
        if sections[0][0] != "preamble":
            return tuple(block for _, block in sections)
    out: list[str] = []
    position, size = 0, len(text)
    while True:
        opener = _OPEN.match(text, position)
        if opener:
            closer = f"\n</{opener.group(1)}>"
            end = text.find(closer, opener.end() - 1)
            while end != -1 and not (end + len(closer) == size or text.startswith(JOIN, end + len(closer))):
                end = text.find(closer, end + 1)
            if end != -1:
                end += len(closer)
                out.append(text[position:end])
                if end == size:
                    return tuple(out)
                position = end + len(JOIN)
                continue
        following = text.find(JOIN, position)
        if following == -1:
            out.append(text[position:])
            return tuple(out)
        out.append(text[position:following])
        position = following + len(JOIN)


def order_of(text: str) -> tuple[str, ...]:
    """(head hash, section hash, ...): the head hash is taken over the sections' hashes, so
    each byte is hashed once (the sections' hashes are shared with the other rules')."""
    return memo(text, "order", _order_of)


def _order_of(text: str) -> tuple[str, ...]:
    units = head_units(text)
    hashes = tuple(text_digest(unit) for unit in units)
    head = hashlib.sha256("\x00".join(hashes).encode()).hexdigest()[:20]
    return (head,) if len(units) > MAX_SECTIONS else (head, *hashes)


def _compared(hashes) -> list[str]:
    return sorted(h for h in hashes if h not in _FILLERS)


def _in_order(text: str, order: tuple[str, ...], recorded: tuple[str, ...]) -> str:
    by_hash = dict(zip(order[1:], head_units(text)))
    by_hash.update((h, t) for h, t in _FILLERS.items() if h not in by_hash)
    return JOIN.join(by_hash[h] for h in recorded[1:])


def patched_units(units: tuple[str, ...], patches) -> tuple[str, ...]:
    """``units`` with each patch entry applied in turn: an update replaces the ``<NAME>`` block
    (or adds it at the end), a removal drops it; untagged units are never touched."""
    out = list(units)
    for entries in patches:
        for entry in entries:
            opener, closer = f"<{entry.name}>\n", f"\n</{entry.name}>"
            at = next((i for i, unit in enumerate(out) if unit.startswith(opener) and unit.endswith(closer)), None)
            if entry.action == "removed":
                if at is not None:
                    del out[at]
            elif at is None:
                out.append(entry.block)
            else:
                out[at] = entry.block
    return tuple(out)


def _reaching(view: View, journal: Journal, ctx: Context, patches: dict[int, list]) -> list[list]:
    """The entries of ``patches`` that ``drop_redundant_patches`` lets through whatever the head:
    not a removal of an extension section inside a notification run, not a drop the journal
    holds (unless its patch now leads a typed run). (Its other drops are no-ops: applying them
    changes nothing.) The model's prompt is the head with these applied."""
    out = []
    for index, entries in patches.items():
        owner = run_owner(view.body, index)
        notification = owner is not None and is_notification(view.body[owner], ctx)
        leads_typed = owner is not None and owner > index and not notification
        patch_hash = message_hash(ctx, index) if journal.dropped and index < len(ctx.client_body) else ""
        out.append([entry for number, entry in enumerate(entries)
                    if not (entry.action == "removed" and notification and entry.name not in PI_SECTIONS)
                    and (leads_typed or f"{index}:{patch_hash}:{number}" not in journal.dropped)])
    return out


def _patched_in_order(text: str, view: View, journal: Journal, ctx: Context) -> str | None:
    """The recorded head, when ``text`` with the body's section patches applied holds exactly its sections."""
    if view.shape == "anthropic":  # (no patches there: ``drop_redundant_patches`` leaves it alone too)
        return None
    patches = transcript_patches(view)
    if not patches:
        return None
    recorded = journal.order
    units = patched_units(head_units(text), _reaching(view, journal, ctx, patches))
    if len(units) > MAX_SECTIONS:
        return None
    hashes = tuple(text_digest(unit) for unit in units)
    if _compared(hashes) != _compared(recorded[1:]):
        return None
    by_hash = dict(zip(hashes, units))
    by_hash.update((h, t) for h, t in _FILLERS.items() if h not in by_hash)
    return JOIN.join(by_hash[h] for h in recorded[1:])


def keep_section_order(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    if not view.head:
        return view, journal, []
    text = view.head[0]
    recorded = journal.order
    order = order_of(text)
    if recorded is None or recorded[0] == order[0] or len(recorded) < 2:
        return view, journal, []
    if len(order) > 1 and _compared(order[1:]) == _compared(recorded[1:]):
        head = memo(text, ("in order", recorded), lambda t: _in_order(t, order, recorded))
        return view.replace(head=(head, *view.head[1:])), journal, [
            Event("section_order", {"action": "kept recorded order", "sections": len(recorded) - 1})]
    head = _patched_in_order(text, view, journal, ctx)
    if head is not None:
        return view.replace(head=(head, *view.head[1:])), journal, [
            Event("section_order", {"action": "kept recorded order", "sections": len(recorded) - 1,
                                    "patched": True})]
    return view, journal, []


def record_section_order(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    """Record the order of the head as it goes upstream (after the head pin, which may send the
    pinned head instead of this request's): the order the next request is compared with."""
    if not view.head or ctx.ping:  # a warm-up ping never moves the recorded head
        return view, journal, []
    order = order_of(view.head[0])
    if journal.order is not None and journal.order[0] == order[0]:
        return view, journal, []
    return view, journal.replace(order=order), []
