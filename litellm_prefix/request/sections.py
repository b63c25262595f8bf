"""pi's sectioned head (pi >= 0.86), its section-patch wire format, and the head as sections.

Parsing, hashing and every value derived from a head text are done once per distinct
text (``KNOWN``, ``memo``, ``text_digest``): each request brings its 500 KB head as new
strings, and a known head then costs one comparison instead of a pass per rule. Rules that
change sections hand them on unjoined (``SectionedText``); the head is joined once.

A head is an ordered set of sections: untagged ``preamble``, then ``tools, rules, docs,
addendum, project_context, skills, cwd``, then extension sections, each wrapped
``<name>\\n...\\n</name>`` and joined with ``\\n\\n``. Later changes arrive as system
messages whose parts are ``Removed system prompt section "NAME".`` or
``Updated system prompt section "NAME":\\n\\n<NAME>\\n...\\n</NAME>``, joined with ``\\n\\n``.
"""
from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..caches import Identity

PI_SECTIONS = frozenset({"preamble", "tools", "rules", "docs", "addendum", "project_context", "skills", "cwd"})
JOIN = "\n\n"
_OPEN = re.compile(r"<([A-Za-z][A-Za-z0-9_.-]*)>\n")
_REMOVED = re.compile(r'Removed system prompt section "(?P<name>[^"\n]+)"\.')
_UPDATED = re.compile(r'Updated system prompt section "(?P<name>[^"\n]+)":\n\n')


class _Entry:
    __slots__ = ("text", "digest", "memo", "length", "shared")

    def __init__(self, text: str) -> None:
        # The last equal string object looked up (this request's copy); None once the text is
        # held as its sections only (``KnownTexts`` "compacted"): ``memo["sections"]`` joins to it.
        self.text: str | None = text
        self.digest: str | None = None
        self.memo: dict | None = None
        self.length = len(text)
        # The text is a value some derived value holds too (``KnownTexts.canonical``): never
        # compacted, so that the equal values made later share it.
        self.shared = False

    def sections(self) -> tuple[tuple[str, str], ...] | None:
        memo = self.memo
        return memo.get("sections") if memo is not None else None

    def equals(self, text: str) -> bool:
        """``text`` is this entry's text: one comparison, or one per section once compacted."""
        known = self.text
        if known is not None:
            return known is text or known == text
        if len(text) != self.length:
            return False
        position = 0
        for index, (_, block) in enumerate(self.sections() or ()):
            if index:
                if not text.startswith(JOIN, position):
                    return False
                position += len(JOIN)
            if not text.startswith(block, position):
                return False
            position += len(block)
        return position == self.length

    def compact(self) -> None:
        """Hold the text as its parsed sections only, where it has them (``memo`` keeps them, each
        long one the known string shared with the other heads that hold it: two versions of a
        head that differ in one section cost that section, not a second head)."""
        if self.text is not None and not self.shared and len(self.text) >= COMPACT_CHARS and self.sections():
            self.text = None


class KnownTexts:
    """Texts seen recently (head segments and their sections), each with its hash and derived values.

    Every request brings its head as new string objects, so a cache keyed by the string
    itself would hash (read) every byte of a 500 KB head again on every lookup. Here the
    key is a sample (length, first and last 32 characters) and a hit is confirmed by
    equality, a ``memcmp``: per request a known head costs one comparison instead of a
    scan per rule, and a changed head costs a scan of its changed sections only.
    Derived values are pure functions of the text, so a hit can never change a result.
    An entry keeps the last equal string object it was looked up with (the current request's
    copy, in place of the one before: one copy of each text), so the other rules' lookups of
    that object cost no comparison. Bounded by the texts' total characters, least recently
    used out first (a parse holds a copy of its text in its sections: count about twice that
    in memory).

    A long sectioned text is held as its sections once parsed ("compacted"): the entry keeps
    its parse (which it holds anyway) and lets go of the string (the request that brought it
    holds it, and ``_recent`` by identity for the lookups of that request's rules); a later
    copy is compared section by section (``_Entry.equals``: the same ``memcmp`` in pieces). The
    versions of one session's head share all their sections but the ones that changed, and a
    compacted version holds only those of its own. A text that derived values hold as well
    (``canonical``'s) is kept whole: they share it. The bound counts every entry's full length
    all the same (a conservative count: a compacted head's sections may outlive their own
    entries): 64M characters, what the 32M of the whole texts with their parses' copies held
    before compaction; a text that is not sectioned holds about its length.
    """

    RECENT = 32

    def __init__(self, max_chars: int = 64 << 20) -> None:
        self._buckets: OrderedDict[Any, list[_Entry]] = OrderedDict()
        self._chars = 0
        self._max_chars = max_chars
        self._lock = threading.Lock()
        # The last string objects looked up, by identity, with their entries: every rule of a
        # request asks about the same few objects, and this answers without reading them.
        self._recent: dict[Identity, _Entry] = {}

    def entry(self, text: str, sections: tuple[tuple[str, str], ...] | None = None) -> _Entry:
        """``sections``: the parse ``text`` was joined from (``known_sections``): an entry that holds
        that very tuple is this text's without a comparison."""
        key = Identity(text)
        hit = self._recent.get(key)
        if hit is not None:
            return hit
        entry = self._entry(text, sections)
        with self._lock:
            recent = self._recent
            recent[key] = entry
            if len(recent) > self.RECENT:
                recent.pop(next(iter(recent)), None)
        return entry

    def _entry(self, text: str, sections: tuple[tuple[str, str], ...] | None = None) -> _Entry:
        n = len(text)
        key = (n, text[:32], text[-32:]) if n > 64 else text
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is not None:
                for entry in bucket:
                    if entry.text is text or (sections is not None and entry.sections() is sections):
                        self._buckets.move_to_end(key)
                        return entry
                for entry in bucket:
                    if entry.equals(text):
                        # Every rule asks about the same new string of a request: the next
                        # lookups of this object cost no comparison (``_recent``, by identity).
                        # A compacted text stays so (its sections stand for it); another one
                        # is held as this copy, the earlier one let go.
                        if entry.text is not None:
                            entry.text = text
                        self._buckets.move_to_end(key)
                        return entry
            else:
                bucket = self._buckets[key] = []
            entry = _Entry(text)
            bucket.append(entry)
            self._chars += n
            while self._chars > self._max_chars and len(self._buckets) > 1:
                _, evicted = self._buckets.popitem(last=False)
                self._chars -= sum(e.length for e in evicted)
            return entry

    def forget_recent(self) -> None:
        """Let go of the strings ``_recent`` holds by identity (a request's, once it is written: the
        next request brings new string objects, found by their sample and a comparison)."""
        with self._lock:
            self._recent.clear()

    def canonical(self, text: str) -> str:
        """The known string equal to ``text`` (that object: no second copy is kept), else ``text``,
        now known. For values derived from a text (a section, a pinned head), which often equal a
        text seen before: a memory write changes one section of a head, and the others, the
        pinned head among them, are the earlier head's."""
        n = len(text)
        key = (n, text[:32], text[-32:]) if n > 64 else text
        with self._lock:
            for entry in self._buckets.get(key) or ():
                if entry.equals(text):
                    if entry.text is None:  # compacted: this copy is held from now on (by the caller too)
                        entry.text = text
                    entry.shared = True
                    return entry.text
        entry = self._entry(text)
        if entry.text is None:
            entry.text = text
        entry.shared = True
        return entry.text

    def clear(self) -> None:
        with self._lock:
            self._buckets.clear()
            self._recent.clear()
            self._chars = 0


COMPACT_CHARS = 16384  # a sectioned text this long is held as its sections once parsed (``_Entry.compact``)
KNOWN = KnownTexts()


def text_digest(text: str) -> str:
    """``journal.content_hash`` of a text, computed once per distinct text while it is known."""
    entry = KNOWN.entry(text)
    if entry.digest is None:
        entry.digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return entry.digest


SHARED_CHARS = 1024  # a derived string this long is kept as the known equal one, where there is one


def _shared(value: Any, depth: int = 0) -> Any:
    """``value`` (a string, or tuples of them) with its long strings replaced by the known equal
    ones (``KnownTexts.canonical``): derived values hold no second copy of a text the process
    already holds."""
    kind = type(value)
    if kind is str:
        return KNOWN.canonical(value) if len(value) >= SHARED_CHARS else value
    if kind is tuple and depth < 2:
        return tuple(_shared(item, depth + 1) for item in value)
    return value


class _Subject:
    """In a known text's memo, in place of a value that is that text itself (or a tuple's item
    that is): the text is not held by its own memo, so a compacted entry lets it go."""

    __slots__ = ()


_SUBJECT = _Subject()


def _packed(value: Any, text: str) -> Any:
    kind = type(value)
    if kind is str:
        return _SUBJECT if value is text or (len(value) == len(text) and value == text) else _shared(value)
    if kind is tuple:
        return tuple(_SUBJECT if type(item) is str and (item is text or (len(item) == len(text) and item == text))
                     else _shared(item, 1) for item in value)
    return value


def _unpacked(value: Any, text: str) -> Any:
    if value is _SUBJECT:
        return text
    if type(value) is tuple and _SUBJECT in value:
        return tuple(text if item is _SUBJECT else item for item in value)
    return value


def memo(text: str, key: Any, compute: Callable[[str], Any]) -> Any:
    """``compute(text)``, computed once per distinct text (``compute`` must be a pure function of it)."""
    entry = KNOWN.entry(text)
    if entry.memo is None:
        entry.memo = {}
    try:
        return _unpacked(entry.memo[key], text)
    except KeyError:
        value = compute(text)
        entry.memo[key] = _packed(value, text)
        if key == "sections":
            entry.compact()
        return _unpacked(entry.memo[key], text)


def parse_head(text: str) -> tuple[tuple[str, str], ...] | None:
    """``((name, block), ...)`` with ``JOIN.join(blocks) == text``, or ``None`` when the text is not sectioned.

    Parsed once per distinct text (``memo``): every rule asks about the same head, and a
    rule that rewrites sections hands the new head's parse over (``known_sections``).
    """
    return memo(text, "sections", _parse_head)


def section_digests(text: str) -> tuple[str, ...]:
    """``text_digest`` of each of the text's sections (of the text itself when unsectioned), in order;
    one lookup for a known head."""
    return memo(text, "digests", _section_digests)


def _section_digests(text: str) -> tuple[str, ...]:
    sections = parse_head(text)
    return tuple(text_digest(block) for _, block in sections) if sections else (text_digest(text),)


def known_sections(sections: tuple[tuple[str, str], ...]) -> str:
    """The head text of ``sections`` (changed by a rule, structure kept), remembered as their parse."""
    text = render_head(sections)
    entry = KNOWN.entry(text, sections)
    if entry.memo is None:
        entry.memo = {}
    entry.memo.setdefault("sections", sections)
    entry.compact()  # (the SectionedText holds the text while its request needs it)
    return text


class SectionedText:
    """A head segment as sections, joined into its text once, when first read.

    Rules that rewrite sections (install paths, the tools list) hand these on, so the head
    is copied once however many of them change it. ``memo`` holds values derived from it,
    like a known text's: the same object comes back for the same input text, so a head seen
    before is neither joined nor rewritten again."""

    __slots__ = ("sections", "_text", "memo")

    def __init__(self, sections: tuple[tuple[str, str], ...]) -> None:
        self.sections = sections
        self._text: str | None = None
        self.memo: dict = {}

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = known_sections(self.sections)
            _JOINED.append(self)
        return self._text


# The SectionedTexts joined since the last ``release_joined``: a request's rules read them (the
# head written, a rule that reads a whole segment), then the request holds what it needs.
_JOINED: deque[SectionedText] = deque()


def release_joined() -> None:
    """Let go of the joined texts of the SectionedTexts joined so far (after a request is written:
    it holds its head's strings). A memo or a stream record that keeps such a head holds its
    sections only, which it shares with the session's other heads; a later request joins them
    again when it reads the text (one join, no rule run again). Another request in flight that
    reads one of them joins it again: the same text, a pure function of its sections. The
    strings ``KNOWN`` holds by identity for the request's lookups go too."""
    while True:
        try:
            _JOINED.popleft()._text = None
        except IndexError:
            break
    KNOWN.forget_recent()


def sections_of(segment: Any) -> tuple[tuple[str, str], ...] | None:
    """The sections of a head segment (a string or a ``SectionedText``), or ``None`` when unsectioned."""
    return segment.sections if isinstance(segment, SectionedText) else parse_head(segment)


def segment_memo(segment: Any, key: Any, compute: Callable[[Any], Any]) -> Any:
    """``memo`` for a head segment, a string or a ``SectionedText``."""
    return memo_of(segment).get(key, compute, segment)


class _Memo:
    """The derived values of one text: several lookups for the price of one (a long head that
    arrives as a new string is compared with the known one once, not once per value)."""

    __slots__ = ("values", "entry")

    def __init__(self, values: dict, entry: _Entry | None = None) -> None:
        self.values = values
        self.entry = entry  # the known text's entry (None: a SectionedText's memo)

    def get(self, key: Any, compute: Callable[[Any], Any], subject: Any) -> Any:
        if self.entry is None:  # a SectionedText's memo: it holds its own text
            try:
                return self.values[key]
            except KeyError:
                value = self.values[key] = _shared(compute(subject))
                return value
        try:
            return _unpacked(self.values[key], subject)
        except KeyError:
            self.values[key] = _packed(compute(subject), subject)
            if key == "sections":
                self.entry.compact()
            return _unpacked(self.values[key], subject)

    def sections(self, subject: Any) -> tuple[tuple[str, str], ...] | None:
        """``sections_of(subject)``, with this memo (``subject`` is the text it belongs to)."""
        if isinstance(subject, SectionedText):
            return subject.sections
        return self.get("sections", _parse_head, subject)


def memo_of(segment: Any) -> _Memo:
    """The memo of a head segment (a string or a ``SectionedText``)."""
    if isinstance(segment, SectionedText):
        return _Memo(segment.memo)
    entry = KNOWN.entry(segment)
    if entry.memo is None:
        entry.memo = {}
    return _Memo(entry.memo, entry)


def _parse_head(text: str) -> tuple[tuple[str, str], ...] | None:
    # Scanned with ``str.find`` (a regex over a 500 KB head is too slow).
    start = 0 if _OPEN.match(text, 0) else -1
    if start == -1:
        at = text.find("\n\n<")
        while at != -1 and not _OPEN.match(text, at + 2):
            at = text.find("\n\n<", at + 2)
        if at == -1:
            return None
        start = at + 2
    out: list[tuple[str, str]] = [("preamble", text[: start - 2])] if start else []
    position = start
    while True:
        opener = _OPEN.match(text, position)
        if opener is None:
            return None
        name = opener.group(1)
        closer = f"\n</{name}>"
        end = text.find(closer, opener.end() - 1)
        while end != -1 and not _ends_section(text, end + len(closer)):
            end = text.find(closer, end + 1)
        if end == -1:
            return None
        end += len(closer)
        out.append((name, text[position:end]))
        if end == len(text):
            break
        position = end + len(JOIN)
    names = [name for name, _ in out]
    if len(set(names)) != len(names):
        return None
    return tuple(out)


def _ends_section(text: str, end: int) -> bool:
    return end == len(text) or text.startswith(JOIN, end)


def render_head(sections) -> str:
    return JOIN.join(block for _, block in sections)


@dataclass(frozen=True)
class PatchEntry:
    action: str  # "removed" | "updated"
    name: str
    block: str = ""  # for "updated": the whole "<name>\n...\n</name>"

    def render(self) -> str:
        if self.action == "removed":
            return f'Removed system prompt section "{self.name}".'
        return f'Updated system prompt section "{self.name}":{JOIN}{self.block}'


def parse_patch(text: str) -> list[PatchEntry] | None:
    """The entries of a section-patch message, or ``None`` when the text is not one."""
    entries: list[PatchEntry] = []
    position = 0
    while position < len(text):
        if entries:
            if not text.startswith(JOIN, position):
                return None
            position += len(JOIN)
        removed = _REMOVED.match(text, position)
        if removed:
            entries.append(PatchEntry("removed", removed.group("name")))
            position = removed.end()
            continue
        updated = _UPDATED.match(text, position)
        if not updated:
            return None
        name = updated.group("name")
        opener = f"<{name}>\n"
        body_start = updated.end()
        if not text.startswith(opener, body_start):
            return None
        closer = f"\n</{name}>"
        end = text.find(closer, body_start + len(opener) - 1)
        while end != -1 and not (end + len(closer) == len(text) or text.startswith(JOIN, end + len(closer))):
            end = text.find(closer, end + 1)
        if end == -1:
            return None
        entries.append(PatchEntry("updated", name, text[body_start : end + len(closer)]))
        position = end + len(closer)
    return entries or None


def render_patch(entries: list[PatchEntry]) -> str:
    return JOIN.join(entry.render() for entry in entries)
