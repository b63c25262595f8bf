"""Memory snapshot (``memorySnapshot: stable``): the head's memory block is frozen at first sight.

A memory write re-renders the block in the head, and everything after it has to be
prefilled again, although the write is already visible to the model in the tool-call
history. So the block stays as first seen. Additions are not re-rendered. A deletion,
or the restore of an entry reported deleted, is sent once as a correction note at the
tail (costing only its own tokens) and replayed at the same place on every later
request. Lines that carry a clock time are never reported (they change on every write);
the gateway itself never adds a time to the head. ``refresh`` is exact pass-through.

Blocks: a ``<memory>`` section, a ``# Memory`` block (up to the next top-level heading),
or a configured ``[start, end]`` marker pair; in a pi sectioned head, its ``<memory>``
section (or a configured marker pair).
"""
from __future__ import annotations

import re

from ..context import Context
from ..events import Event
from ..journal import Journal, MemoryRecord, Note
from ..sections import JOIN, parse_head, segment_memo
from ..view import View
from .notes import tail_anchor

_MEMORY_HEADING = re.compile(r"# Memory\b")
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b")


def find_block(text: str, markers: list[tuple[str, str]]) -> tuple[int, int, str] | None:
    """(start, end, marker) of the first memory block in ``text``.

    One pass over the head finds every "emory" (rare in prompts, and shared by both
    built-in markers); each hit is then checked for ``<memory>`` or ``# Memory`` at a line start.
    """
    section = heading = None
    at = text.find("emory")
    while at != -1 and section is None:
        if text.startswith("<memory>\n", at - 2) and (at == 2 or text[at - 3] == "\n"):
            end = text.find("\n</memory>", at)
            if end != -1 and (end + 10 == len(text) or text[end + 10] == "\n"):
                section = (at - 2, end + 10, "<memory>")
        elif heading is None and text.startswith("# Memory", at - 3) and (at == 3 or text[at - 4] == "\n") \
                and _MEMORY_HEADING.match(text, at - 3):
            heading = at - 3
        at = text.find("emory", at + 1)
    if section:
        return section
    if heading is not None:
        line_end = text.find("\n", heading)
        line_end = len(text) if line_end == -1 else line_end
        following = text.find("\n# ", line_end)
        end = following if following != -1 else len(text)
        while end > line_end and text[end - 1] == "\n":
            end -= 1
        return heading, end, "# Memory"
    for start_marker, end_marker in markers:
        start = text.find(start_marker)
        if start == -1:
            continue
        end = text.find(end_marker, start + len(start_marker))
        if end != -1:
            return start, end + len(end_marker), f"{start_marker}...{end_marker}"
    return None


def locate_block(text: str, markers: list[tuple[str, str]]) -> tuple[int, int, str] | None:
    """The memory block of a head segment. In a pi sectioned head it is the ``<memory>`` section
    (a "# Memory" heading inside another section, e.g. the project's AGENTS.md, is that
    section's prose), found from the parsed sections without scanning the text again."""
    sections = parse_head(text)
    if sections is None:
        return find_block(text, markers)
    offset = 0
    for name, block in sections:
        if name == "memory":
            return offset, offset + len(block), "<memory>"
        offset += len(block) + len(JOIN)
    for start_marker, end_marker in markers:
        start = text.find(start_marker)
        end = text.find(end_marker, start + len(start_marker)) if start != -1 else -1
        if end != -1:
            return start, end + len(end_marker), f"{start_marker}...{end_marker}"
    return None


def entries(block: str) -> list[str]:
    """The entries of a block: its non-empty inner lines, stripped; lines with a clock time excluded."""
    lines = block.split("\n")[1:]
    if lines and lines[-1].strip().startswith("</"):
        lines = lines[:-1]
    return [line.strip() for line in lines if line.strip() and not _CLOCK.search(line)]


def correction(removed: list[str], restored: list[str]) -> str:
    parts = ["Memory correction: the memory block in the system prompt is a snapshot from the start of this session."]
    if removed:
        parts.append("These entries have since been removed and no longer apply:\n" + _listed(removed))
    if restored:
        parts.append("These entries are back in memory and apply again:\n" + _listed(restored))
    return "\n\n".join(parts)


def _listed(items: list[str]) -> str:
    return "\n".join(item if item.startswith(("- ", "* ")) else f"- {item}" for item in items)


def _pinned(segment: str, start: int, end: int, snapshot: str) -> tuple[str, tuple[str, ...], frozenset[str], int]:
    """The segment with its block [start, end) replaced by ``snapshot``; the snapshot's entries
    missing from the block, the block's entries, and how many of them the snapshot lacks."""
    now = frozenset(entries(segment[start:end]))
    old = entries(snapshot)
    return segment[:start] + snapshot + segment[end:], tuple(e for e in old if e not in now), now, len(now - set(old))


def snapshot_memory(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    if ctx.settings.memory_snapshot != "stable":
        return view, journal, []
    markers = [tuple(m) for m in ctx.settings.memory_markers]
    for segment_index, segment in enumerate(view.head):  # noqa: B007  (read after the loop: the segment found)
        found = locate_block(segment, markers)
        if found:
            break
    else:
        if journal.memory is not None:  # the block is gone entirely: a genuine change, passed through
            return view, journal.replace(memory=None, notes=tuple(n for n in journal.notes if n.kind != "memory")), [
                Event("memory", {"action": "block removed"})]
        return view, journal, []
    start, end, marker = found
    block = segment[start:end]
    memory = journal.memory
    if memory is None or memory.marker != marker:
        return view, journal.replace(memory=MemoryRecord(marker, block)), [
            Event("memory", {"action": "snapshot", "entries": len(entries(block))})]
    if block == memory.snapshot:
        return view, journal, []
    # The same head and snapshot every turn until either changes: the pinned text (one object, so
    # the rules after this one know it at once) and the entry comparison are remembered with the head.
    pinned, removed_now, now, added = segment_memo(
        segment, ("memory pinned", start, end, memory.snapshot), lambda text: _pinned(text, start, end, memory.snapshot))
    head = list(view.head)
    head[segment_index] = pinned
    view = view.replace(head=tuple(head))
    newly_removed = [e for e in removed_now if e not in memory.removed]
    restored = [e for e in memory.removed if e in now]
    events = [Event("memory", {"action": "kept snapshot", "added": added})]
    if not newly_removed and not restored:
        return view, journal.replace(memory=MemoryRecord(marker, memory.snapshot, removed_now)), events
    anchor = tail_anchor(ctx)
    if anchor is None:  # nowhere to put the note yet: keep the record, report on a later request
        return view, journal, events
    note = Note(anchor[0], anchor[1], "memory", correction(newly_removed, restored))
    journal = journal.replace(memory=MemoryRecord(marker, memory.snapshot, removed_now)).with_note(note)
    events.append(Event("memory", {"action": "correction note", "removed": len(newly_removed), "restored": len(restored)}))
    return view, journal, events
