"""The session journal: every decision that depends on history, so that the same history
always yields the same bytes, in every process and replica.

A journal is an immutable value; rules return a new one. It is stored as compact JSON
(section texts are kept out of it, by content hash, in the store's blob space) and
versioned for compare-and-set. What it records:

- ``head``: the last head sent (section hashes and sizes, tools hash, fingerprint),
  for drift reports;
- ``pinned``: the pinned head, section by section (name, content hash), and for
  ``headPolicy: pin`` the state the model has been told about so far;
- ``memory``: the frozen memory block and the entries reported removed or restored;
- ``volatile``: each pinned volatile span's first value and the last value delivered;
- ``learned``: learned volatile lines (``rules/volatile.py``): the candidate lines of the
  last head seen (shape key, text hash; their texts are in the blob space), and each
  learned line's pinned first value, last value seen, last value told and when;
- ``dropped``: keys of dropped section-patch entries;
- ``order``: the recorded head's section order (its hash, then each section's hash), so a
  head that only reorders those sections is sent in the recorded order;
- ``roots``: per install-path suffix, the session's install root (``rules/paths.py``): the
  first one its head named, kept shown while a later root holds the same npm package;
- ``notes``: each injected note with its anchor: the body message after which it sits,
  by index and content hash. When an anchor is gone (the client compacted or truncated
  its history) the note and the state it carried are re-seeded: compaction rewrites the
  prompt anyway, so that boundary is free.
- ``trace`` (a derived session's): how far the session got, taken at 1, 2, 4, 8, ... answers:
  that number of answers, a digest of their tool calls, and the digest of the request that got
  there (``session.answer_turns``; ``core.Stabilizer._generation`` reads it to tell look-alike
  sessions of one derived key apart);
- ``forks`` (the first journal of a derived key only): the later look-alike sessions of that key,
  each with a journal of its own.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

try:  # several times faster than json for a journal; the stdlib where it cannot encode the text
    import orjson
except ImportError:  # pragma: no cover - orjson comes with litellm[proxy]
    orjson = None


VERSION = 1


# Per-turn marker fields: where a client puts them says nothing about the content (Claude
# Code moves its last ``cache_control`` mark to the newest message every turn). Identity,
# anchors, head comparison and drift never see them; the request keeps them as sent.
MARKER_FIELDS = frozenset({"cache_control"})


def _one_text_part(content: Any) -> bool:
    """A ``content`` list that is one plain text part (``{"type": "text", "text": ...}``, nothing else)."""
    if not (isinstance(content, list) and len(content) == 1):
        return False
    part = content[0]
    return isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str) \
        and len(part) == 2


def unmarked(value: Any) -> Any:
    """``value`` without marker fields, at any depth; a ``content`` list that is one plain text
    part reads as its string (Claude Code turns a marked string into exactly that list)."""
    if isinstance(value, dict):
        out = {k: unmarked(v) for k, v in value.items() if k not in MARKER_FIELDS}
        content = out.get("content")
        if _one_text_part(content):
            out["content"] = content[0]["text"]
        return out
    if isinstance(value, (list, tuple)):
        return [unmarked(v) for v in value]
    return value


def content_hash(value: Any) -> str:
    """A short, stable hash of a message or text (JSON with sorted keys for objects, marks ignored)."""
    if isinstance(value, str):
        return _text_hash(value)
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return hashlib.sha256(_hashed_json(value)).hexdigest()[:20]


def _hashed_json(value: Any) -> bytes:
    """Sorted-key compact JSON of ``unmarked(value)`` as the json module writes it; a list item by
    item (the same bytes: ``[`` items joined by ``,`` ``]``), so that one marked message in a long
    body costs the json module's way for that message alone."""
    if isinstance(value, (list, tuple)):
        return b"[" + b",".join([_hashed_json(item) for item in value]) + b"]"
    raw = _fast_json(value)
    if raw is None:
        raw = json.dumps(unmarked(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                         default=str).encode("utf-8", "surrogatepass")
    return raw


def _as_is(value: Any) -> bool:
    """Whether ``unmarked(value)`` is ``value`` and orjson writes it as the json module does: no
    marker field, no content list of one plain text part (at any depth), no float (orjson
    writes some otherwise: 0.00001 for 1e-05, 1.5e-7 for 1.5e-07). Reads the structure, not the
    texts: a few microseconds for a message."""
    if isinstance(value, dict):
        if not MARKER_FIELDS.isdisjoint(value) or _one_text_part(value.get("content")):
            return False
        items = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        return not isinstance(value, float)
    for item in items:  # (a loop, not all() over a generator: this runs for every message of a body)
        if isinstance(item, (dict, list, tuple)):
            if not _as_is(item):
                return False
        elif isinstance(item, float):
            return False
    return True


_SORTED = 0 if orjson is None else orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS \
    | orjson.OPT_PASSTHROUGH_DATETIME


def _fast_json(value: Any) -> bytes | None:
    """``content_hash``'s bytes by orjson, where they are exactly what the json module writes for
    ``unmarked(value)`` (the digests stored in journals stay what they were: ``_as_is``); None
    where they may not be, or where orjson does not take a key or value (then the json module
    writes them)."""
    if orjson is None or not _as_is(value):
        return None
    try:
        return orjson.dumps(value, default=str, option=_SORTED)
    except (TypeError, orjson.JSONEncodeError):
        return None


@lru_cache(maxsize=256)
def _text_hash(text: str) -> str:
    # Cached: several rules hash the same section strings in one request (and across
    # requests of a session the head's strings repeat); the lookup costs one str hash.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]


@dataclass(frozen=True)
class Note:
    """A message the gateway injected after body message ``index`` (whose hash is ``anchor``)."""

    index: int
    anchor: str
    kind: str  # "memory", "volatile:<name>", "sections"
    text: str

    def to_json(self) -> list[Any]:
        return [self.index, self.anchor, self.kind, self.text]

    @classmethod
    def from_json(cls, raw: list[Any]) -> Note:
        return cls(int(raw[0]), str(raw[1]), str(raw[2]), str(raw[3]))


@dataclass(frozen=True)
class HeadRecord:
    fingerprint: str
    sections: tuple[tuple[str, str, int], ...]  # (name, content hash, length) in order
    tools: str  # hash of the tools JSON
    tool_names: tuple[str, ...]


@dataclass(frozen=True)
class MemoryRecord:
    marker: str  # which kind of block: "<memory>", "# Memory", or "start...end"
    snapshot: str  # the frozen block text, as first seen
    removed: tuple[str, ...] = ()  # entries reported removed (and not restored since)


@dataclass(frozen=True)
class LearnedLine:
    """A head line learned as volatile: pinned to ``pinned``; ``told`` is what the model was last told."""

    key: str  # hash of the line's shape (its digit and hex runs blanked)
    pinned: str  # the first value: what the head shows for the whole session
    seen: str  # the value in the last request
    told: str  # the value the model knows (``pinned`` until a note is sent)
    told_at: int | None = None  # when the last note was sent (seconds); None: never
    nonce: bool = False  # its changes are nonces: pinned, never noted

    def to_json(self) -> list[Any]:
        return [self.key, self.pinned, self.seen, self.told, self.told_at, self.nonce]

    @classmethod
    def from_json(cls, raw: list[Any]) -> LearnedLine:
        told_at = None if raw[4] is None else int(raw[4])
        return cls(str(raw[0]), str(raw[1]), str(raw[2]), str(raw[3]), told_at, bool(raw[5]))


@dataclass(frozen=True)
class LearnState:
    head: str = ""  # hash of the last head compared
    lines: str = ""  # that head's candidate lines: KEY(12 hex) + TEXT HASH(8 hex) each, in head order
    learned: tuple[LearnedLine, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"head": self.head, "lines": self.lines, "learned": [line.to_json() for line in self.learned]}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> LearnState:
        return cls(str(raw.get("head", "")), str(raw.get("lines", "")),
                   tuple(LearnedLine.from_json(line) for line in raw.get("learned", ())))


@dataclass(frozen=True)
class Journal:
    head: HeadRecord | None = None
    pinned: tuple[tuple[str, str], ...] | None = None  # (section name, content hash)
    told: tuple[tuple[str, str], ...] | None = None  # headPolicy pin: what the model knows
    memory: MemoryRecord | None = None
    volatile: tuple[tuple[str, str, str], ...] = ()  # (name, pinned value, last delivered value)
    dropped: frozenset[str] = frozenset()
    notes: tuple[Note, ...] = ()
    requests: int = 0
    learned: LearnState | None = None
    order: tuple[str, ...] | None = None  # (head hash, section hash, ...) of the recorded head
    roots: tuple[tuple[str, str], ...] = ()  # (install-path suffix, the session's install root)
    listings: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (listing, its keys' hashes in the session's order)
    # (message index, hash of the message without its transient parts, part position, part text)
    transient: tuple[tuple[int, str, int, str], ...] = ()
    trace: tuple[int, str, str] | None = None  # (answers, their calls' digest, the request's digest)
    forks: tuple[str, ...] = ()  # the names of the key's later look-alike sessions (core._generation)

    def replace(self, **changes: Any) -> Journal:
        return dataclasses.replace(self, **changes)

    def with_note(self, note: Note) -> Journal:
        return self.replace(notes=self.notes + (note,))

    def volatile_value(self, name: str) -> tuple[str, str] | None:
        for entry_name, pinned, last in self.volatile:
            if entry_name == name:
                return pinned, last
        return None

    def with_volatile(self, name: str, pinned: str, last: str) -> Journal:
        kept = tuple(v for v in self.volatile if v[0] != name)
        return self.replace(volatile=tuple(sorted(kept + ((name, pinned, last),))))

    # -- JSON -----------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"v": VERSION, "n": self.requests}
        if self.head:
            h = self.head
            out["head"] = {"fp": h.fingerprint, "sections": [list(s) for s in h.sections], "tools": h.tools,
                           "names": list(h.tool_names)}
        if self.pinned is not None:
            out["pinned"] = [list(s) for s in self.pinned]
        if self.told is not None:
            out["told"] = [list(s) for s in self.told]
        if self.memory:
            out["memory"] = {"marker": self.memory.marker, "snapshot": self.memory.snapshot,
                             "removed": list(self.memory.removed)}
        if self.volatile:
            out["volatile"] = [list(v) for v in self.volatile]
        if self.dropped:
            out["dropped"] = sorted(self.dropped)
        if self.notes:
            out["notes"] = [n.to_json() for n in self.notes]
        if self.learned is not None:
            out["learned"] = self.learned.to_json()
        if self.order is not None:
            out["order"] = list(self.order)
        if self.roots:
            out["roots"] = [list(r) for r in self.roots]
        if self.listings:
            out["listings"] = [[name, list(keys)] for name, keys in self.listings]
        if self.transient:
            out["transient"] = [list(t) for t in self.transient]
        if self.trace is not None:
            out["trace"] = list(self.trace)
        if self.forks:
            out["forks"] = list(self.forks)
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any] | None) -> Journal:
        if not raw or raw.get("v") != VERSION:
            return cls()
        head = raw.get("head")
        memory = raw.get("memory")
        return cls(
            head=HeadRecord(
                fingerprint=head["fp"],
                sections=tuple((str(a), str(b), int(c)) for a, b, c in head["sections"]),
                tools=head["tools"],
                tool_names=tuple(head["names"]),
            ) if head else None,
            pinned=tuple((str(a), str(b)) for a, b in raw["pinned"]) if "pinned" in raw else None,
            told=tuple((str(a), str(b)) for a, b in raw["told"]) if "told" in raw else None,
            memory=MemoryRecord(memory["marker"], memory["snapshot"], tuple(memory.get("removed", ())))
            if memory else None,
            volatile=tuple((str(a), str(b), str(c)) for a, b, c in raw.get("volatile", ())),
            dropped=frozenset(raw.get("dropped", ())),
            notes=tuple(Note.from_json(n) for n in raw.get("notes", ())),
            requests=int(raw.get("n", 0)),
            learned=LearnState.from_json(raw["learned"]) if "learned" in raw else None,
            order=tuple(str(h) for h in raw["order"]) if "order" in raw else None,
            roots=tuple((str(a), str(b)) for a, b in raw.get("roots", ())),
            listings=tuple((str(name), tuple(str(k) for k in keys)) for name, keys in raw.get("listings", ())),
            transient=tuple((int(i), str(k), int(p), str(t)) for i, k, p, t in raw.get("transient", ())),
            trace=(int(raw["trace"][0]), str(raw["trace"][1]), str(raw["trace"][2])) if "trace" in raw else None,
            forks=tuple(str(f) for f in raw.get("forks", ())),
        )

    def encoded(self) -> str:
        """Compact JSON with sorted keys. orjson's bytes are the stdlib's here (strings, ints,
        booleans, null, lists and string-keyed objects; no floats); a text with a lone surrogate
        (valid JSON, so possible in a prompt) is one orjson refuses: the stdlib encodes it."""
        raw = self.to_json()
        if orjson is not None:
            try:
                return orjson.dumps(raw, option=orjson.OPT_SORT_KEYS).decode()
            except TypeError:
                pass
        return json.dumps(raw, ensure_ascii=False, separators=(",", ":"), sort_keys=True)

    @classmethod
    def decoded(cls, text: str) -> Journal:
        """``from_json`` of a journal's text (orjson; the stdlib for what orjson refuses, a lone surrogate)."""
        if orjson is not None:
            try:
                return cls.from_json(orjson.loads(text))
            except orjson.JSONDecodeError:
                pass
        return cls.from_json(json.loads(text))
