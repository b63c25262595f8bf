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
"""
from __future__ import annotations

import hashlib
import re

from ..context import Context, Event
from ..journal import Journal
from ..sections import JOIN, memo, parse_head, text_digest
from ..view import View

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


def keep_section_order(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    if not view.head:
        return view, journal, []
    text = view.head[0]
    recorded = journal.order
    order = order_of(text)
    if recorded is not None and recorded[0] == order[0]:
        return view, journal, []
    if recorded is not None and len(recorded) > 1 and len(order) > 1 and _compared(order[1:]) == _compared(recorded[1:]):
        head = memo(text, ("in order", recorded), lambda t: _in_order(t, order, recorded))
        return view.replace(head=(head, *view.head[1:])), journal, [
            Event("section_order", {"action": "kept recorded order", "sections": len(recorded) - 1})]
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
