"""How much of a request an exact-prefix cache could reuse from the session's previous request.

A request is rendered the way ``replay`` renders it (ChatML, tools in the first system
turn, late system turns hoisted where the target hoists them), so live measurements and
offline replays count the same bytes. What is kept per request is a ``Shape``: its
length, a digest of the whole text, one 8-byte digest per 256-byte piece and the
offsets where its parts (``system``, ``tools``, ``messages[i]``) end; never the text.

Comparing the next request with a shape gives the shared prefix in bytes: exact when
the previous request is a whole prefix of the new one (the digest of the new text's
first ``length`` bytes equals the previous digest), else to within one piece.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .drift import first_difference
from .replay import Turn, render_parts

PIECE = 256
DIGEST = 8
ROUTE_OF_WIRE = {"chat": "chat", "anthropic": "messages", "responses": "responses"}


@dataclass(frozen=True)
class Shape:
    length: int  # bytes of the rendered request
    whole: bytes  # digest of all of it
    pieces: bytes  # DIGEST bytes per full PIECE-byte piece, in order
    ends: tuple[tuple[str, int], ...]  # (part label, end offset) in order


@dataclass(frozen=True)
class Shared:
    bytes: int  # bytes the request shares with the previous one
    whole: bool  # the previous request is a prefix of this one
    where: str  # the part holding the first differing byte ("" when whole)


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=DIGEST).digest()


def render(data: Mapping[str, Any], wire_name: str, target: Mapping[str, Any] | None = None) -> list[tuple[str, bytes]]:
    turn = Turn("", ROUTE_OF_WIRE.get(wire_name, "chat"), data, dict(target or {}))  # type: ignore[arg-type]
    return [(label, text.encode("utf-8", "surrogatepass")) for label, text in render_parts(turn)]


def shape_of(parts: list[tuple[str, bytes]]) -> tuple[Shape, bytes]:
    """The shape of a rendered request, and its bytes (for one comparison; not to be kept)."""
    text = b"".join(part for _, part in parts)
    ends, offset = [], 0
    for label, part in parts:
        offset += len(part)
        ends.append((label, offset))
    full = len(text) - len(text) % PIECE
    pieces = b"".join(_digest(text[i : i + PIECE]) for i in range(0, full, PIECE))
    return Shape(len(text), _digest(text), pieces, tuple(ends)), text


def part_at(shape: Shape, offset: int) -> str:
    for label, end in shape.ends:
        if offset < end:
            return label
    return shape.ends[-1][0] if shape.ends else ""


def compare(previous: Shape, current: Shape, text: bytes) -> Shared:
    """What ``current`` (whose bytes are ``text``) shares with ``previous``."""
    if current.length >= previous.length and _digest(text[: previous.length]) == previous.whole:
        return Shared(previous.length, True, "")
    equal = first_difference(previous.pieces, current.pieces) // DIGEST  # type: ignore[arg-type]
    shared = min(equal * PIECE, previous.length, current.length)
    return Shared(shared, False, part_at(current, shared))
