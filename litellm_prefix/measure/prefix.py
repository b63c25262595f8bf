"""How much of a request an exact-prefix cache could reuse from the session's previous request.

A request is rendered the way ``replay`` renders it (``render``) (ChatML, tools in the first system
turn, late system turns hoisted where the target hoists them; JSON by orjson here, for
speed), so live measurements and offline replays count the same layout. What is kept per
request is a ``Shape``, never the text: its length and, per part (``system``, ``tools``,
``messages[i]``, ``end``), its length, an 8-byte digest and one 8-byte digest per 256-byte
piece. A long part (the head, a long tool result) is hashed once per distinct text and
remembered with it (``sections.memo``: a repeat costs one comparison), short parts are hashed
on every request; piece digests are memoised by the part's digest, so a head that repeats
request after request is cut into pieces once. (Parts: SHA-1, truncated: change detection,
not security; it is the fastest hashlib digest on CPUs with SHA extensions. Pieces: Python's
own ``hash`` of the bytes, in one C loop: a Shape lives in this process only.)

Comparing the next request with a shape gives the shared prefix in bytes: exact when the
previous request is a whole prefix of the new one (every part but the last equal, and
the last one a prefix of the part in its place), else to within one piece, in the first
part that differs.
"""
from __future__ import annotations

import hashlib
import threading
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from ..caches import compact_json
from ..request.drift import first_difference
from ..request.sections import memo
from .render import Turn, chat_pair, end_part, hoists, later_part, render_parts

PIECE = 256
PIECES_FROM = 2048  # shorter parts are compared whole (a difference inside one costs at most ~500 tokens)
DIGEST = 8
PIECE_DIGEST = array("q").itemsize  # bytes per piece digest: Python's hash, a C long long (``_pieces``)
_KIND = {"system": "s", "tools": "t", "end": "e"}
ROUTE_OF_WIRE = {"chat": "chat", "anthropic": "messages", "responses": "responses", "gemini": "gemini"}

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
class Shape:
    """A rendered request without its text: about 13 bytes per part, plus piece digests of long parts."""

    length: int  # bytes of the rendered request
    kinds: str  # one letter per part: s(ystem), t(ools), m(essage), e(nd: the generation prompt)
    lengths: array  # bytes per part
    digests: bytes  # DIGEST bytes per part
    pieces: dict  # part index -> PIECE_DIGEST bytes per full PIECE-byte piece (parts of at least PIECES_FROM bytes)

    def label(self, index: int) -> str:
        kind = self.kinds[index] if index < len(self.kinds) else "e"
        if kind == "m":  # render_parts numbers messages by their place among the rendered turns
            return f"messages[{sum(1 for k in self.kinds[:index] if k in 'sm')}]"
        return {"s": "system", "t": "tools", "e": "end"}[kind]


@dataclass(frozen=True)
class Shared:
    bytes: int  # bytes the request shares with the previous one
    whole: bool  # the previous request is a prefix of this one
    where: str  # the part holding the first differing byte ("" when whole)


def _digest(data: bytes) -> bytes:
    return hashlib.sha1(data, usedforsecurity=False).digest()[:DIGEST]


_PIECES: LRUCache = LRUCache(maxsize=8 << 20, getsizeof=len)  # 8 MB of piece digests, by part digest
_PIECES_LOCK = threading.Lock()


def _pieces(digest: bytes, data: bytes) -> bytes:
    with _PIECES_LOCK:
        found = _PIECES.get(digest)
    if found is None:
        # Python's own hash of each piece (SipHash, 8 bytes): one C loop over the pieces, no
        # frame or hash object per piece (2.3x faster than SHA-1 piece by piece, which cost
        # ~0.4 ms for an 80 KB head). Piece digests are compared within this process only
        # (a Shape is never written out), where ``hash`` is stable.
        full = len(data) - len(data) % PIECE
        found = array("q", map(hash, map(data.__getitem__, map(slice, range(0, full, PIECE),
                                                                range(PIECE, full + 1, PIECE))))).tobytes()
        with _PIECES_LOCK:
            _PIECES[digest] = found
    return found


def render(data: Mapping[str, Any], wire_name: str, target: Mapping[str, Any] | None = None,
           tools_text: str | None = None) -> list[tuple[str, str]]:
    """``tools_text``: the request's tools as the rules encoded them (their fingerprint's JSON), if known."""
    turn = Turn("", ROUTE_OF_WIRE.get(wire_name, "chat"), data, dict(target or {}))  # type: ignore[arg-type]
    return render_parts(turn, dumps=_sorted_json, tool_dumps=compact_json, tool_text=tools_text, framed=True)


def _encoded(text: str | bytes | tuple[str, str, str]) -> bytes:
    if isinstance(text, tuple):  # a framed part (``render``): prefix, body, suffix
        text = "".join(text)
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")


def _long_part(body: str, prefix: str = "", suffix: str = "") -> tuple[int, bytes, bytes]:
    """(length in bytes, digest, piece digests) of the long rendered part ``prefix + body + suffix``,
    computed once per distinct body and framing and remembered with the body, the message's own
    string (the rules already looked the head up by it): the head and the long messages of a
    session repeat request after request, and comparing a known text costs a ``memcmp``, not a
    hash of every byte."""
    return memo(body, ("prefix-shape", prefix, suffix), lambda b: _part_shape(prefix + b + suffix))


def _part_shape(part: str) -> tuple[int, bytes, bytes]:
    data = _encoded(part)
    digest = _digest(data)
    return len(data), digest, _pieces(digest, data)


def shape_of(parts: list[tuple[str, Any]]) -> tuple[Shape, list[Any]]:
    """The shape of a rendered request (parts as text, UTF-8 bytes, or ``(prefix, body, suffix)``
    texts as ``render`` frames them), and its parts (for one comparison; not to be kept)."""
    lengths = array("I")
    digests: list[bytes] = []
    pieces: dict[int, bytes] = {}
    for index, (_, text) in enumerate(parts):
        if isinstance(text, tuple):  # framed (``render``): a long body is looked up as itself
            prefix, body, suffix = text
            if len(body) < PIECES_FROM:
                text = prefix + body + suffix
        if isinstance(text, tuple):
            length, digest, cut = _long_part(body, prefix, suffix)
        elif isinstance(text, str) and len(text) >= PIECES_FROM:
            length, digest, cut = _long_part(text)
        else:
            data = _encoded(text)
            length, digest = len(data), _digest(data)
            cut = _pieces(digest, data) if length >= PIECES_FROM else None
        lengths.append(length)
        digests.append(digest)
        if cut is not None:
            pieces[index] = cut
    kinds = "".join(_KIND.get(label, "m") for label, _ in parts)
    return Shape(sum(lengths), kinds, lengths, b"".join(digests), pieces), [text for _, text in parts]


@dataclass(frozen=True)
class Seen:
    """A chat request as measured, for measuring the session's next one from where it differs:
    its message count, a digest of its tools' text, the number of parts before ``messages[1]``,
    its shape, and ``serial``: what the caller tagged it with (``sinks``: the incremental path's
    record of the same request). No message and no text is held: which leading messages the
    next request shares with it is the caller's to say (``measure``'s ``same``)."""

    count: int
    tools: tuple[int, int]  # (length, hash) of the tools' text
    lead: int
    shape: Shape
    serial: int | None = None


def _text_key(text: str) -> tuple[int, int]:
    return len(text), hash(text)


def measure(data: Mapping[str, Any], wire_name: str, target: Mapping[str, Any] | None = None,
            tools_text: str | None = None, seen: Seen | None = None, same: int = 0,
            serial: int | None = None) -> tuple[Shape, list[Any], Seen | None]:
    """``shape_of(render(...))``, with the parts of a chat request's first ``same`` messages taken
    from the ``seen`` request's shape instead of rendered and hashed again: the caller knows them
    equal to the seen request's (``sinks``: the incremental path proved it, byte for byte). Returns
    the shape, the parts' texts (``None`` for a part taken over: ``compare`` reads a text only
    where the digests differ) and what to keep for the next one, tagged ``serial`` (``None`` for a
    request measured whole only: another route, or late system turns hoisted).

    The rest is byte for byte ``shape_of``; the same tools' text is checked here (a digest)."""
    messages = data.get("messages")
    if wire_name != "chat" or not isinstance(messages, list) or not messages or hoists(target or {}):
        shape, texts = shape_of(render(data, wire_name, target, tools_text))
        return shape, texts, None
    tools = data.get("tools")
    if tools_text is None or not tools:  # as render_parts makes it
        tools_text = "\n".join(compact_json(t) for t in tools) if tools else ""
    tools_key = _text_key(tools_text)
    kept = 0
    if seen is not None and same > 0 and seen.tools == tools_key:
        kept = min(same, len(messages), seen.count)
    if kept == 0:  # the head differs (or a first request, or nothing known equal): whole
        parts = render(data, wire_name, target, tools_text)
        shape, texts = shape_of(parts)
        lead = next((i for i, (label, _) in enumerate(parts) if label == "messages[1]"), len(parts) - 1)
        return shape, texts, Seen(len(messages), tools_key, lead, shape, serial)
    old = seen.shape
    taken = seen.lead + kept - 1  # parts of messages[:kept] (with message 0's system and tools parts)
    rest = [later_part(index, *chat_pair(message, _sorted_json), framed=True)
            for index, message in enumerate(messages[kept:], kept)]
    rest.append(end_part(framed=True))
    new, new_texts = shape_of(rest)
    lengths = old.lengths[:taken]
    lengths.extend(new.lengths)
    pieces = {i: cut for i, cut in old.pieces.items() if i < taken}
    pieces.update((taken + i, cut) for i, cut in new.pieces.items())
    shape = Shape(sum(lengths), old.kinds[:taken] + new.kinds, lengths,
                  old.digests[: DIGEST * taken] + new.digests, pieces)
    return shape, [None] * taken + new_texts, Seen(len(messages), tools_key, seen.lead, shape, serial)


def leading_equal(messages: Any, earlier: Any) -> int:
    """How many leading messages two chat requests share (Python equality): what ``measure``'s
    ``same`` may be. For callers that hold both requests (tests, offline tools)."""
    count = min(len(messages), len(earlier))
    kept = 0
    while kept < count and messages[kept] == earlier[kept]:
        kept += 1
    return kept


def compare(previous: Shape, current: Shape, texts: list[str | bytes | None]) -> Shared:
    """What ``current`` (whose parts' bytes are ``texts``) shares with ``previous``."""
    offset = 0
    old_parts, new_parts = len(previous.lengths), len(current.lengths)
    if previous.digests[: DIGEST * old_parts] == current.digests[: DIGEST * old_parts] and new_parts >= old_parts:
        return Shared(previous.length, True, "")
    # The previous request's generation prompt is where the model's own turn began: what the
    # client sends next in its place (an assistant message, a Responses function_call item the
    # rendering spells differently) continues the conversation, it does not change it.
    kept = old_parts - 1 if previous.kinds.endswith("e") else old_parts
    if new_parts > kept and previous.digests[: DIGEST * kept] == current.digests[: DIGEST * kept]:
        return Shared(previous.length, True, "")
    for i in range(min(old_parts, new_parts)):
        old_length, new_length = previous.lengths[i], current.lengths[i]
        old_digest = previous.digests[DIGEST * i : DIGEST * (i + 1)]
        if old_digest == current.digests[DIGEST * i : DIGEST * (i + 1)]:
            offset += old_length
            continue
        # (A part taken over from an earlier shape has no text here; its bytes were not read.)
        if i == old_parts - 1 and new_length >= old_length and texts[i] is not None \
                and _digest(_encoded(texts[i])[:old_length]) == old_digest:
            return Shared(previous.length, True, "")  # e.g. the generation prompt, now the assistant's turn
        equal = first_difference(previous.pieces.get(i, b""), current.pieces.get(i, b"")) // PIECE_DIGEST
        return Shared(offset + min(equal * PIECE, old_length, new_length), False, current.label(i))
    return Shared(offset, False, "end")
