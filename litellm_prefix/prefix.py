"""How much of a request an exact-prefix cache could reuse from the session's previous request.

A request is rendered the way ``replay`` renders it (ChatML, tools in the first system
turn, late system turns hoisted where the target hoists them; JSON by orjson here, for
speed), so live measurements and offline replays count the same layout. What is kept per
request is a ``Shape``, never the text: its length and, per part (``system``, ``tools``,
``messages[i]``, ``end``), its length, an 8-byte digest and one 8-byte digest per 256-byte
piece. Each byte is hashed once per request; piece digests are memoised by the part's
digest, so a head that repeats request after request is cut into pieces once. (SHA-1,
truncated: change detection, not security; it is the fastest hashlib digest on CPUs
with SHA extensions.)

Comparing the next request with a shape gives the shared prefix in bytes: exact when the
previous request is a whole prefix of the new one (every part but the last equal, and
the last one a prefix of the part in its place), else to within one piece, in the first
part that differs.
"""
from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from .context import compact_json
from .drift import first_difference
from .replay import Turn, render_parts

PIECE = 256
DIGEST = 8
ROUTE_OF_WIRE = {"chat": "chat", "anthropic": "messages", "responses": "responses"}

try:
    import orjson

    def _sorted_json(value: Any) -> str:
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError:
            return compact_json(value)
except ImportError:  # pragma: no cover - orjson comes with litellm[proxy]
    import json

    def _sorted_json(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class Part:
    label: str
    length: int
    digest: bytes
    pieces: bytes  # DIGEST bytes per full PIECE-byte piece of this part


@dataclass(frozen=True)
class Shape:
    length: int  # bytes of the rendered request
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class Shared:
    bytes: int  # bytes the request shares with the previous one
    whole: bool  # the previous request is a prefix of this one
    where: str  # the part holding the first differing byte ("" when whole)


def _digest(data: bytes) -> bytes:
    return hashlib.sha1(data, usedforsecurity=False).digest()[:DIGEST]


_PIECES: LRUCache = LRUCache(maxsize=8192)
_PIECES_LOCK = threading.Lock()


def _pieces(digest: bytes, data: bytes) -> bytes:
    if len(data) < PIECE:
        return b""
    with _PIECES_LOCK:
        found = _PIECES.get(digest)
    if found is None:
        full = len(data) - len(data) % PIECE
        found = b"".join(_digest(data[i : i + PIECE]) for i in range(0, full, PIECE))
        with _PIECES_LOCK:
            _PIECES[digest] = found
    return found


def render(data: Mapping[str, Any], wire_name: str, target: Mapping[str, Any] | None = None) -> list[tuple[str, bytes]]:
    turn = Turn("", ROUTE_OF_WIRE.get(wire_name, "chat"), data, dict(target or {}))  # type: ignore[arg-type]
    parts = render_parts(turn, dumps=_sorted_json, tool_dumps=compact_json)
    return [(label, text.encode("utf-8", "surrogatepass")) for label, text in parts]


def shape_of(parts: list[tuple[str, bytes]]) -> tuple[Shape, list[bytes]]:
    """The shape of a rendered request, and its parts' bytes (for one comparison; not to be kept)."""
    out = []
    for label, data in parts:
        digest = _digest(data)
        out.append(Part(label, len(data), digest, _pieces(digest, data)))
    return Shape(sum(p.length for p in out), tuple(out)), [data for _, data in parts]


def compare(previous: Shape, current: Shape, texts: list[bytes]) -> Shared:
    """What ``current`` (whose parts' bytes are ``texts``) shares with ``previous``."""
    offset = 0
    last = len(previous.parts) - 1
    for i, (old, new) in enumerate(zip(previous.parts, current.parts)):
        if old.digest == new.digest:
            offset += old.length
            continue
        if i == last and new.length >= old.length and _digest(texts[i][: old.length]) == old.digest:
            return Shared(previous.length, True, "")  # e.g. the generation prompt, now the assistant's turn
        equal = first_difference(old.pieces, new.pieces) // DIGEST  # type: ignore[arg-type]
        return Shared(offset + min(equal * PIECE, old.length, new.length), False, new.label)
    if len(current.parts) >= len(previous.parts):
        return Shared(previous.length, True, "")
    return Shared(offset, False, "end")
