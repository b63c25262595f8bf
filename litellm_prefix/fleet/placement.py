"""Where a session goes: the replica most likely to hold its head, unless that one is loaded.

Coding-agent sessions of one kind share most of their head (an agent's system prompt and
tools: 8-20k tokens), and an engine with prefix caching (vLLM, SGLang, llama.cpp) reuses it
across the sessions it serves. Placing sessions by load alone prefills each kind's head on
every replica; placing them by cache alone piles one kind onto one replica. This module
decides between the two, as pure functions of (the session's head blocks, an approximate
index of what each replica holds and how loaded it is, the gate's settings):

1. **Head blocks.** A request's head (system text, then the tool list) is cut into blocks of
   ``BLOCK_CHARS`` characters; block *i*'s digest covers the whole head up to its end, so two
   heads share block *i* only when they share everything before it (the way vLLM chains its
   block hashes). ``head_blocks`` returns those digests.
2. **The index** (one JSON record per model group, ``Index.record``): per replica, the head
   blocks recently routed there, each with the replica's *clock* (prefill tokens routed to it
   so far) at its last use, and its *load*: requests routed there, decayed with a time
   constant of ``load_seconds`` (a request rate), plus ``session_weight`` for each session
   that sent a request there in the last ``active_seconds`` (a session has at most one request
   in flight, so balancing the sessions active now bounds each replica's in-flight peak, which
   the rate alone does not). Every gateway process that shares the record sees the same. A
   block is alive while fewer than ``cache_tokens`` tokens have been routed to its replica
   since: an LRU cache of that size would still hold it. An answer whose ``cached_tokens``
   show less than the index expected drops the blocks past what was proven (``correct``).
   The record is bounded (``BLOCKS_PER_REPLICA`` per replica, least recently
   used out first) and forgets replicas no longer in the group (``keep_only``).
3. **The gate** (in the spirit of SGLang's router: an absolute and a relative imbalance): the
   replicas with at most ``active_slack`` active sessions more than the least active one
   (the in-flight peak: each active session may have a request in flight, so this keeps any
   replica's concurrent requests within a session or two of every other's), and among those
   the ones whose load is within ``absolute_slack`` of the least loaded one, or within
   ``relative_slack`` times the mean (the request rate), are eligible (none within the load
   limits: every replica the active count allows); among them the one with the longest live
   head match wins, ties to the least loaded, then a hash of the session (deterministic,
   spread). A head no eligible replica holds goes to the least loaded.
4. **Moves** (``move``). A live session stays put. At an idle boundary (no request for
   ``idle_seconds``) it is placed again when its replica's cache has likely dropped its
   prefix anyway (``expired``: ``cache_tokens`` routed there since its last request), or when
   its replica's load is past ``move_slack`` times the mean (``overloaded``); a failed
   replica moves it at once (``affinity``).

bench/fleet.py runs this module's code as its ``plugin`` policy; the defaults are the ones it
measured (README, "Running a fleet").
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BLOCK_CHARS = 2048  # about 512 tokens
MAX_BLOCKS = 64  # a head's first 128 KB of text: more never changes a decision
BLOCKS_PER_REPLICA = 256  # block digests kept per replica (a few kinds' heads and recent sessions' tails)
ACTIVE_PER_REPLICA = 512  # active sessions remembered per replica
DIGEST_BYTES = 8


@dataclass(frozen=True, slots=True)
class Gate:
    # bench/fleet.py, 8 replicas, 200 sessions, seeds 1-3 (README "Running a fleet").
    absolute_slack: float = 2.0  # requests per load_seconds above the least loaded replica
    relative_slack: float = 1.3  # times the mean load
    move_slack: float = 2.0  # an idle session's replica this far past the mean load: placed again
    load_seconds: float = 1800.0  # the time constant of the decayed request count
    active_seconds: float = 120.0  # a session that sent a request this recently is active
    session_weight: float = 10.0  # load of one active session, in requests of the decayed count
    # active_slack, seeds 1-6 at 8 replicas: 2 holds the in-flight peak max/mean <= 1.25 on 5 of
    # 6 (without the gate: 3 of 6) for 0-0.2% more re-processed tokens; 1 does no better on the
    # peak and re-processes 1-2% more, 0 (least active only) 2-4% more.
    active_slack: float = 2.0  # active sessions above the least active replica's that still leave a replica eligible
    # What the re-processing left over the SGLang-style router is (bench/fleet.py's split, seeds 1-3):
    # head prefills only, 12-14 (kind, replica) pairs against its 8-12, and no context prefilled
    # again. A gate loose enough to save them (absolute_slack 100, active_slack 3: 9-10 pairs,
    # 0.998 / 1.0003 / 0.963 of its tokens) loses the balance (requests 1.30 on seed 1, peak
    # 1.29 on seed 3); a head holder taken past the load gate when that does not raise the
    # fleet's most active count: 1.004 / 1.004 / 0.971, and at 16 replicas idle sessions then
    # move (`overloaded`): +1.3% tokens. Counting sessions idle up to 25 minutes as active
    # spreads heads further: 14-17 pairs.
    idle_seconds: float = 300.0  # no request for this long: an idle boundary, where a move is cheap
    cache_tokens: int = 400_000  # what one replica's prefix cache holds, in tokens (LRU)


def head_blocks(head_text: str, block_chars: int = BLOCK_CHARS) -> tuple[str, ...]:
    """Chained digests of the head's full blocks: block i's digest stands for head_text[:end of
    block i]. A head shorter than one block has none: too short to be worth placing by."""
    digests = []
    running = hashlib.blake2b(digest_size=DIGEST_BYTES)
    for start in range(0, min(len(head_text) // block_chars, MAX_BLOCKS) * block_chars, block_chars):
        running.update(head_text[start:start + block_chars].encode("utf-8", "surrogatepass"))
        digests.append(running.copy().hexdigest())
    return tuple(digests)


class Index:
    """One model group's record: replica -> {"k": clock, "l": decayed requests, "t": their time,
    "b": {block digest: clock at last use}, "p": {block digest: clock when placed}, "a": {session
    tag: last request}}. ``b`` holds blocks an answer from the replica has followed (the replica
    prefilled or reused them); ``p`` blocks of a session placed there whose first answer has not
    come yet: they count for the match (a burst of new sessions sees each other) but prove
    nothing, so an answer's cached tokens are checked against ``b`` only (``proven``)."""

    def __init__(self, gate: Gate = Gate(), record: Mapping[str, Any] | None = None) -> None:
        self.gate = gate
        self.replicas: dict[str, dict[str, Any]] = {}
        for name, r in ((record or {}).get("r") or {}).items():
            if isinstance(r, Mapping):
                self.replicas[str(name)] = {"k": int(r.get("k", 0)), "l": float(r.get("l", 0.0)),
                                            "t": float(r.get("t", 0.0)), "b": dict(r.get("b") or {}),
                                            "p": dict(r.get("p") or {}), "a": dict(r.get("a") or {})}

    def record(self) -> dict[str, Any]:
        return {"r": self.replicas}

    def _replica(self, name: str) -> dict[str, Any]:
        return self.replicas.setdefault(name, {"k": 0, "l": 0.0, "t": 0.0, "b": {}, "p": {}, "a": {}})

    def clock(self, replica: str) -> int:
        known = self.replicas.get(replica)
        return int(known["k"]) if known else 0

    def requests(self, replica: str, now: float) -> float:
        """The replica's decayed request count."""
        known = self.replicas.get(replica)
        if not known:
            return 0.0
        return known["l"] * math.exp(-max(0.0, now - known["t"]) / self.gate.load_seconds)

    def active(self, replica: str, now: float) -> int:
        """Sessions that sent a request to the replica in the last ``active_seconds``."""
        known = self.replicas.get(replica)
        horizon = now - self.gate.active_seconds
        return sum(1 for t in known["a"].values() if t > horizon) if known else 0

    def load(self, replica: str, now: float) -> float:
        return self.requests(replica, now) + self.gate.session_weight * self.active(replica, now)

    def loads(self, replicas: Iterable[str], now: float) -> dict[str, float]:
        return {r: self.load(r, now) for r in replicas}

    def match(self, replica: str, blocks: Sequence[str]) -> int:
        """How many of the head's leading blocks the replica most likely still holds."""
        known = self.replicas.get(replica)
        if not known:
            return 0
        return self._held(known, blocks, (known["b"], known.get("p") or {}))

    def proven(self, replica: str, blocks: Sequence[str]) -> int:
        """How many of the head's leading blocks an earlier answer from the replica followed (and
        its cache most likely still holds): what this answer's cached tokens should show."""
        known = self.replicas.get(replica)
        return self._held(known, blocks, (known["b"],)) if known else 0

    def _held(self, known: Mapping[str, Any], blocks: Sequence[str], maps: tuple[Mapping[str, int], ...]) -> int:
        n = 0
        for digest in blocks:
            used = max((m[digest] for m in maps if digest in m), default=None)
            if used is None or known["k"] - used >= self.gate.cache_tokens:
                break
            n += 1
        return n

    def placed(self, replica: str, blocks: Sequence[str], now: float, session: str | None = None) -> None:
        """A session with this head was placed there: one request's worth of load, and its head
        expected there, before its first answer (so a burst of new sessions sees each other)."""
        for name, other in self.replicas.items():  # a moved session is active only where it went
            if name != replica and session is not None:
                other["a"].pop(_tag(session), None)
        self.routed(replica, blocks, 0, now, session, pending=True)

    def routed(self, replica: str, blocks: Sequence[str], prefill_tokens: int, now: float,
               session: str | None = None, pending: bool = False) -> None:
        """A request of ``session`` with this head was answered by ``replica`` after prefilling
        ``prefill_tokens`` (``pending``: placed there, not answered yet)."""
        known = self._replica(replica)
        known["l"], known["t"] = self.requests(replica, now) + 1.0, now
        known["k"] += max(0, int(prefill_tokens))
        active = known["a"]
        if session is not None:
            active.pop(_tag(session), None)
            active[_tag(session)] = now
        horizon = now - self.gate.active_seconds
        for tag in [t for t, at in active.items() if at <= horizon]:
            del active[tag]
        while len(active) > ACTIVE_PER_REPLICA:
            active.pop(next(iter(active)))
        held = known.setdefault("p", {}) if pending else known["b"]
        placed = known.get("p") or {}
        for digest in blocks:
            if pending and digest in known["b"]:
                continue  # followed by an answer already: stays proven
            held.pop(digest, None)  # re-inserted: most recently used last
            held[digest] = known["k"]
            if not pending:
                placed.pop(digest, None)
        while len(held) > BLOCKS_PER_REPLICA:
            held.pop(next(iter(held)))

    def answered(self, replica: str, blocks: Sequence[str], prefill_tokens: int, now: float,
                 session: str | None, cached_blocks: int | None) -> None:
        """An answer from ``replica``: ``routed``, then ``correct`` by the ``cached_blocks`` it showed
        (None: the answer said nothing about its cache) against what was proven before it."""
        expected = self.proven(replica, blocks)
        self.routed(replica, blocks, prefill_tokens, now, session)
        if cached_blocks is not None:
            self.correct(replica, blocks, cached_blocks, expected)

    def correct(self, replica: str, blocks: Sequence[str], cached_blocks: int, expected: int | None = None) -> None:
        """The answer showed only ``cached_blocks`` leading blocks cached where ``expected`` were
        proven before it (``proven``, read before the answer's ``routed``): the replica keeps
        less than the index thought, so forget the blocks past what it showed. An answer that
        shows at least what was proven corrects nothing: blocks nothing had proven yet (a
        session's first request there) are now in its cache, just prefilled. ``expected``
        None: any shortfall counts."""
        known = self.replicas.get(replica)
        if known and (expected is None or cached_blocks < expected):
            for digest in blocks[max(0, cached_blocks):]:
                known["b"].pop(digest, None)
                (known.get("p") or {}).pop(digest, None)

    def keep_only(self, replicas: Iterable[str]) -> list[str]:
        """Forget replicas that are no longer in the group; returns those forgotten."""
        alive = set(replicas)
        gone = [r for r in self.replicas if r not in alive]
        for name in gone:
            del self.replicas[name]
        return gone


def _tag(session: str) -> str:
    return hashlib.blake2b(session.encode(), digest_size=6).hexdigest()


def _spread(session: str, replica: str) -> str:
    return hashlib.sha256(f"{session}\x00{replica}".encode()).hexdigest()


def _limit(loads: Mapping[str, float], slack: float, absolute: float) -> float:
    least = min(loads.values())
    return max(least + absolute, slack * sum(loads.values()) / len(loads))


def choose(session: str, blocks: Sequence[str], replicas: Iterable[str], index: Index, now: float) -> str:
    """The replica for a session being placed (``replicas``: the healthy ones; not empty)."""
    gate = index.gate
    loads = index.loads(sorted(replicas), now)
    limit = _limit(loads, gate.relative_slack, gate.absolute_slack)
    active = {r: index.active(r, now) for r in loads}
    calm = [r for r in loads if active[r] <= min(active.values()) + gate.active_slack]  # never empty
    eligible = [r for r in calm if loads[r] <= limit] or calm
    return min(eligible, key=lambda r: (-index.match(r, blocks), loads[r], _spread(session, r)))


def move(session: str, current: str, blocks: Sequence[str], replicas: Iterable[str], index: Index, now: float,
         idle_s: float, clock_then: int | None) -> tuple[str, str] | None:
    """At a live session's request: (the replica it moves to, why), or None to stay.

    Only at an idle boundary (``idle_s`` >= ``idle_seconds``): ``expired`` when ``cache_tokens``
    were routed to its replica since its last request (``clock_then``), ``overloaded`` when its
    replica's load is past ``move_slack`` times the mean (and ``absolute_slack`` above the least)."""
    gate = index.gate
    replicas = sorted(replicas)
    if idle_s < gate.idle_seconds or current not in replicas or len(replicas) < 2:
        return None
    loads = index.loads(replicas, now)
    if clock_then is not None and index.clock(current) - clock_then >= gate.cache_tokens:
        reason = "expired"
    elif loads[current] > _limit(loads, gate.move_slack, gate.absolute_slack):
        reason = "overloaded"
    else:
        return None
    chosen = choose(session, blocks, replicas, index, now)
    return (chosen, reason) if chosen != current else None
