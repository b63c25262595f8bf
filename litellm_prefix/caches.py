"""The process's caches, in one place: each states its key, its bound and how it is invalidated.

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
  confirmed by equality). Bound: 32 M characters. Invalidation: none needed (pure functions
  of the text); LRU.
- ``core._DECODED``: a journal's text to the decoded journal. Key: the text. Bound: 2,048.
  Invalidation: none needed (a journal is immutable; a changed journal is another text).
- ``settings.Settings.for_model`` and ``profiles.apply`` (``PerObject``): a settings object's
  copy for one model / one profile. Key: the settings object (by identity) and the model's
  names and override / the profile's name. Bound: 256 / 64, oldest out first. Invalidation:
  none needed (settings are frozen; another settings object is another key).
- ``journal._text_hash``, ``context`` and ``profiles``' ``lru_cache``s: pure functions of
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
import threading
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
    def of(cls, raw: str | bytes) -> "Digest":
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
        held = sum(len(s) for s in segments) if segments is not None else 0
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

    def __len__(self) -> int:
        return len(self._records)
