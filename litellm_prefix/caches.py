"""The process's caches, in one place: each states its key, its bound and how it is invalidated.

Where it sits: at the top of the package, beside ``settings`` and ``profile_data``, and below
everything (the bottom layer of pyproject's import contracts; it imports nothing from the
package). Every wing uses it: ``settings`` and ``request/`` (``PerObject``, ``Identity``, the
stream records), ``fleet/`` and ``measure/`` (``Recent``, ``Expiring``). Inside any one wing it
would make ``settings`` or the other wings import sideways into it. ``compact_json`` lives here
too: the JSON that the caches' keys and the fingerprints are made of, which the rules, the
drift record and the measurement all share.

``Recent`` and ``Expiring`` (below) are the two time-bounded maps the others build on: answers
remembered for a short while (the disk, LiteLLM's router) and the records one hook of a call
writes for a later hook of the same call.

Every cache here holds values derived from their key by a pure function, or a record that a
request checks in full before it trusts it, so a hit never changes a result: a stabilizer
with every cache empty writes the same bytes.

``Streams`` (below): the incremental request path's memory of each session stream's last
request. Key: the stream's journal key (tenant-scoped, ``session.identify``). Bound: the
settings' ``incrementalStreams`` (1,024) or session cap (``maxSessions``), whichever is
smaller, and 64 MB of the bytes they hold (the head written, the items the rules made; the
last body's JSON only as its length and two keyed hashes), least recently used out first.
Invalidation: a record is replaced by each request of its stream, and trusted only when the
journal loaded is the one the record was made with (``Streams`` never outlives a change made
elsewhere: another replica's save changes the journal's text). A record's body check is by
the process's keyed 64-bit hash (``body_digests``): the one cache here whose hit is exact
only up to a 2**-64 chance per check.

Elsewhere, each beside the code it serves (documented there):

- ``sections.KNOWN``: parses, digests and derived values of head texts. Key: the text (sampled,
  confirmed by equality; a long sectioned head held as its sections, shared with its other
  versions). Bound: 64 M characters. Invalidation: none needed (pure functions of the text); LRU.
- ``core._DECODED``: a journal's text to the decoded journal. Key: the text. Bound: 2,048.
  Invalidation: none needed (a journal is immutable; a changed journal is another text).
- ``settings.Settings.for_model`` and ``profiles.apply`` (``PerObject``): a settings object's
  copy for one model / one profile. Key: the settings object (by identity) and the model's
  names and override / the profile's name. Bound: 256 / 64, oldest out first. Invalidation:
  none needed (settings are frozen; another settings object is another key).
- ``journal._text_hash``, ``target`` and ``profiles``' ``lru_cache``s: pure functions of
  their arguments (regex compilation, a text's hash, a profile's merged settings). Bounded
  by their ``maxsize``.
- ``Context.memo``: one request's derived values (a tool's JSON, the tools' JSON and names);
  dropped with the request. Key: the object by identity (``Identity``).
- ``sections.KnownTexts`` keeps the last 32 string objects looked up (``Identity``), each with
  its entry, so the rules' lookups of one request's head cost no comparison.
- ``Stabilizer.applied`` / ``written`` (``Expiring``): calls this gateway already rewrote,
  by ``litellm_call_id``; 16,384 for 15 minutes / 256 for 30 seconds.
- ``Sinks.sessions`` / ``reports``: per session the last call's shape; per call its report.
  Bounded by ``maxSessions`` and ``sessionTtlSeconds`` / 4,096 for 10 minutes.

Nothing is keyed by ``id()``: an id names an object only while it lives, and a dead object's id
is given to the next one. A key that stands for an object by identity is an ``Identity``,
which holds the object, so no other object can take its place while the key is in a map.
(Two functions map inputs to their positions by ``id`` for the length of one call, over a list
that holds every input meanwhile: ``core._script`` and ``rules.tools``. Those are not caches.)
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

try:
    import orjson
except ImportError:  # pragma: no cover - orjson comes with litellm[proxy]
    orjson = None


class Identity:
    """A map key that stands for one object by identity: equal only to a key of that very object.

    For objects that cannot be keys themselves (a list, a dict, a pydantic model whose hash reads
    every field) or whose hash would read all of them (a new 500 KB string). The key holds its
    object, so the object cannot die and hand its identity to another while the key is in a map."""

    __slots__ = ("obj", "_hash")

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self._hash = object.__hash__(obj)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return type(other) is Identity and other.obj is self.obj

    def __repr__(self) -> str:
        return f"Identity({type(self.obj).__name__})"


class PerObject:
    """Values derived from an object (by identity) and a hashable rest of key, for the last ``size`` keys.

    The derivation must be a pure function of the object and the rest (the object is frozen), so
    a hit never changes a result. Oldest key out first. Thread-safe enough for the GIL: a value
    computed twice by two threads is the same value."""

    def __init__(self, size: int) -> None:
        self._values: OrderedDict[tuple[Identity, Hashable], Any] = OrderedDict()
        self._size = size

    def get(self, owner: Any, rest: Hashable, compute: Callable[[], Any]) -> Any:
        key = (Identity(owner), rest)
        try:
            return self._values[key]
        except KeyError:
            pass
        value = self._values[key] = compute()
        while len(self._values) > self._size:
            try:
                self._values.popitem(last=False)
            except KeyError:  # another thread emptied it meanwhile
                break
        return value


@dataclass(frozen=True, slots=True)
class Digest:
    """A cheap digest of raw request parts: their length and the process's string hash.

    ``hash`` of a ``str`` or ``bytes`` is SipHash keyed at random per process (never stored,
    never compared across processes); a head string's hash is computed once per object, and
    the section rules' lookups reuse it."""

    size: int
    value: int

    @classmethod
    def of(cls, raw: str | bytes) -> Digest:
        return cls(len(raw), hash(raw))


def body_json(body: tuple[Any, ...]) -> bytes | None:
    """The body as JSON bytes (orjson, keys as sent), or None where it is not plain JSON."""
    if orjson is None:
        return None
    try:
        return orjson.dumps(list(body))
    except TypeError:  # an object orjson cannot encode (litellm.Message): the full path
        return None


@dataclass(frozen=True, slots=True)
class StreamRecord:
    """What one stream's last request looked like on the way in, and what it produced.

    ``head``: the raw head parts' digests (shape, system segments, tools JSON, ...) and the
    context the rules saw (settings, target, ping). The body's JSON (a later request's body starts
    with it, but for the closing bracket, where it only appends) is not kept, only its length
    ``size`` and ``digests``: the process's keyed hash (SipHash, ``hash``) of its bytes before
    ``last`` (or before the closing bracket where ``last`` is None) and of the rest up to the
    bracket, so a later body is checked byte range for byte range without the record holding the
    bytes. ``count``: its message count. ``journal_in``: the journal text the rules ran on (and
    left unchanged); ``texts``: the text hashes the load brought. ``tail``: whether the last
    message's run is a notification run where an appended request may reuse the decisions, else
    None (``appended.extensible``). ``result``: ``(head segments, tools script, body script,
    events, head segments set aside, and dropped)``: what the transform produced, replayable
    (``core``); a script is a tuple of input slices ``(start, stop)`` and JSON bytes of items a
    rule made. ``last``: where the last message begins in the body's JSON, where the output
    carries it as sent (so a request that changes only its marker fields may reuse the record),
    else None; ``last_unmarked``: the hash of that message's JSON without its marker fields (keys
    sorted). ``serial``: set by ``Streams.put``, new for every record stored (the measurement tells
    by it which request a record was made from: ``Sinks.expect_same``)."""

    head: tuple[Any, ...]
    size: int
    digests: tuple[int, int]
    count: int
    journal_in: str | None
    texts: frozenset[str]
    tail: bool | None
    result: Any
    last: int | None = None
    last_unmarked: int | None = None
    serial: int = 0

    def size_held(self) -> int:
        """Bytes held, roughly: the head written and the items the rules made."""
        segments, tools, body = self.result[:3]
        # (a SectionedText segment: its sections, shared with the process's known heads)
        held = sum(len(s) if type(s) is str else RECORD_BYTES for s in segments) if segments is not None else 0
        for script in (tools or (), body or ()):
            held += sum(len(part) for part in script if type(part) is bytes)
        return RECORD_BYTES + held


def body_digests(encoded: bytes, cut: int) -> tuple[int, int]:
    """``StreamRecord.digests`` of a body's JSON: the bytes before ``cut``, and from it to the
    closing bracket. A keyed 64-bit hash per process (never stored, never compared across
    processes): an unequal range matches with a chance of 2**-64, and no client knows the key."""
    return hash(encoded[:cut]), hash(encoded[cut:-1])


RECORD_BYTES = 2048  # a record's own objects, beside the bytes it holds
STREAM_BYTES = 64 << 20  # all records together


class Streams:
    """The incremental path's records, one per stream (see the module docstring)."""

    def __init__(self, maxsize: int, max_bytes: int = STREAM_BYTES) -> None:
        self._records: LRUCache[str, StreamRecord] = LRUCache(maxsize=max_bytes, getsizeof=StreamRecord.size_held)
        self._count = max(1, maxsize)
        self._lock = threading.Lock()
        self._serials = itertools.count(1)

    def get(self, key: str) -> StreamRecord | None:
        with self._lock:
            return self._records.get(key)

    def put(self, key: str, record: StreamRecord) -> int | None:
        """Store ``record`` under a serial of its own; returns it (None: not stored, too large)."""
        with self._lock:
            record = dataclasses.replace(record, serial=next(self._serials))
            try:
                self._records[key] = record
            except ValueError:  # larger than all records together may be: not remembered
                self._records.pop(key, None)
                return None
            while len(self._records) > self._count:
                self._records.popitem()
            return record.serial

    def drop(self, key: str) -> None:
        with self._lock:
            self._records.pop(key, None)

    def retag(self, key: str, journal_in: str | None, saved: str) -> None:
        """The stream's journal went from ``journal_in`` to ``saved`` by a change no rule reads
        (a derived session's trace; a seeded journal kept under its session's key): a record made
        on the one holds on the other (its serial kept: it is the same request's record)."""
        with self._lock:
            record = self._records.get(key)
            if record is not None and record.journal_in == journal_in:
                self._records[key] = dataclasses.replace(record, journal_in=saved)

    def __len__(self) -> int:
        return len(self._records)


class Recent:
    """Answers remembered per key for at most ``seconds``, and only while their ``stamp`` stands
    (each element the same object, or an equal int: a list's identity and length, say). For
    what every request asks and what changes rarely (the disk, LiteLLM's router and callbacks).
    At most ``limit`` keys: all are dropped when it is full."""

    def __init__(self, seconds: float, limit: int) -> None:
        self.seconds, self.limit = seconds, limit
        self._entries: dict[Any, tuple[float, tuple[Any, ...], Any]] = {}

    def get(self, key: Any, compute: Callable[[], Any], stamp: tuple[Any, ...] = ()) -> Any:
        """``compute()``, or its remembered answer (an exception is passed on, not remembered)."""
        now = time.monotonic()
        hit = self._entries.get(key)
        if hit is not None and now < hit[0] and len(hit[1]) == len(stamp) and all(
                a is b or (type(a) is int and a == b) for a, b in zip(hit[1], stamp)):
            return hit[2]
        value = compute()
        if len(self._entries) >= self.limit:
            self._entries.clear()
        self._entries[key] = (now + self.seconds, stamp, value)
        return value

    def forget(self, key: Any) -> None:
        """Drop the remembered answer for ``key`` (the shell changed what it was about)."""
        self._entries.pop(key, None)


class Expiring:
    """A bounded map whose entries are kept at least ``seconds`` after they were set and at most
    twice that: two generations of plain dicts, the older dropped when the newer is ``seconds``
    old or holds half of ``maxsize``. For the records one hook of a call writes and a later hook
    of the same call reads (milliseconds later): every request writes and reads several, and a
    ``TTLCache`` keeps each entry's expiry in order, at several times the cost."""

    __slots__ = ("seconds", "half", "clock", "_new", "_old", "_turned")

    def __init__(self, maxsize: int, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.half, self.clock = seconds, max(1, maxsize // 2), clock
        self._new: dict[Any, Any] = {}
        self._old: dict[Any, Any] = {}
        self._turned = clock()

    def _turn(self) -> None:
        # Generations turn on a fixed grid of ``seconds`` (an entry set in one period is dropped at
        # the end of the next: at least ``seconds``, less than twice that); a full newer one turns
        # early, off the grid.
        periods = int((self.clock() - self._turned) // self.seconds)
        if periods:
            self._old = self._new if periods == 1 else {}
            self._new = {}
            self._turned += periods * self.seconds
        elif len(self._new) >= self.half:
            self._old, self._new = self._new, {}

    def __setitem__(self, key: Any, value: Any) -> None:
        self._turn()
        self._old.pop(key, None)
        self._new[key] = value

    def get(self, key: Any, default: Any = None) -> Any:
        self._turn()
        value = self._new.get(key, _MISSING)
        if value is _MISSING:
            value = self._old.get(key, default)
        return value

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key: Any) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def pop(self, key: Any, default: Any = None) -> Any:
        self._turn()
        value = self._new.pop(key, _MISSING)
        if value is _MISSING:
            value = self._old.pop(key, default)
        return value

    def __len__(self) -> int:
        self._turn()
        return len(self._new) + len(self._old)


_MISSING = object()


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def compact_json(value: Any) -> str:
    """Compact JSON (no spaces, UTF-8 kept): orjson when it can encode the value, else the stdlib.

    Only ever compared with itself (fingerprints, substring checks), so the two encoders
    need not agree byte for byte; each value always takes the same path.
    """
    if orjson is not None:
        try:
            return orjson.dumps(value).decode()
        except TypeError:
            pass
    return _ENCODER.encode(value)
