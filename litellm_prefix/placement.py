"""Where a new session goes: the replica most likely to hold its head, unless that one is loaded.

Coding-agent sessions of one kind share most of their head (an agent's system prompt and
tools: 8-20k tokens), and an engine with prefix caching (vLLM, SGLang, llama.cpp) reuses it
across the sessions it serves. Placing sessions by load alone (fewest pins) prefills each
kind's head on every replica; placing them by cache alone piles one kind onto one replica.
This module decides between the two, as pure functions of (the session's head blocks, the
replicas' loads, an approximate index of what each replica holds, settings):

1. **Head blocks.** A request's head (system text, then the tool list) is cut into blocks of
   ``BLOCK_CHARS`` characters; block *i*'s digest covers the whole head up to its end, so two
   heads share block *i* only when they share everything before it (the way vLLM chains its
   block hashes). ``head_blocks`` returns those digests, cheapest first.
2. **The index.** Per replica, the head-block digests recently routed there, each with the
   replica's *clock* (prefill tokens routed to it so far) at its last use. An entry is alive
   while fewer than ``cache_tokens`` tokens have been routed to that replica since: an LRU
   cache of that size would still hold it. An answer whose ``cached_tokens`` show less than
   the index expected drops the replica's entries past what was proven (``correct``). The
   index is bounded per replica (least recently used out first) and forgets replicas that
   are gone.
3. **The gate** (in the spirit of SGLang's router: an absolute and a relative imbalance): the
   replicas whose load (sessions pinned there that sent a request in the last
   ``active_seconds``, plus requests in flight) is within
   ``absolute_slack`` of the least loaded one, or within ``relative_slack`` times the mean,
   are eligible; among them the one with the longest live head match wins, ties to the least
   loaded, then a hash of the session (deterministic, spread). A session whose head no
   replica holds goes to the least loaded.

A live session never moves for placement: only a failed replica moves it (``affinity``).
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

BLOCK_CHARS = 2048  # about 512 tokens
MAX_BLOCKS = 64  # a head's first 128 KB of text: more never changes a decision
INDEX_PER_REPLICA = 4096  # block digests kept per replica


@dataclass(frozen=True, slots=True)
class Gate:
    # A replica is eligible while its load is within absolute_slack of the least loaded one or
    # within relative_slack times the mean (bench/fleet.py: 8 replicas, 200 sessions, seeds 1-3).
    absolute_slack: float = 3.0  # sessions
    relative_slack: float = 1.75  # times the mean load
    cache_tokens: int = 2_000_000  # what one replica's prefix cache holds, in tokens (LRU)
    active_seconds: float = 300.0  # a pinned session counts as load while it sent a request this recently


def head_blocks(head_text: str, block_chars: int = BLOCK_CHARS) -> tuple[str, ...]:
    """Chained digests of the head's blocks: block i's digest stands for head_text[:end of block i]."""
    digests = []
    running = hashlib.blake2b(digest_size=12)
    for start in range(0, min(len(head_text), block_chars * MAX_BLOCKS), block_chars):
        running.update(head_text[start:start + block_chars].encode("utf-8", "surrogatepass"))
        digests.append(running.copy().hexdigest())
    return tuple(digests)


@dataclass
class Replica:
    """What the index knows of one replica: block digest -> the replica clock at its last use."""

    clock: int = 0  # prefill tokens routed here so far
    blocks: dict[str, int] | None = None

    def __post_init__(self) -> None:
        if self.blocks is None:
            self.blocks = {}


class Index:
    """Per replica, the head blocks recently routed there (see the module text)."""

    def __init__(self, gate: Gate = Gate()) -> None:
        self.gate = gate
        self.replicas: dict[str, Replica] = {}

    def match(self, replica: str, blocks: Sequence[str]) -> int:
        """How many of the head's leading blocks the replica most likely still holds."""
        known = self.replicas.get(replica)
        if known is None:
            return 0
        n = 0
        for digest in blocks:
            used = known.blocks.get(digest)
            if used is None or known.clock - used >= self.gate.cache_tokens:
                break
            n += 1
        return n

    def routed(self, replica: str, blocks: Sequence[str], prefill_tokens: int) -> None:
        """A request with this head went to ``replica`` and prefilled about ``prefill_tokens``."""
        known = self.replicas.setdefault(replica, Replica())
        known.clock += max(0, int(prefill_tokens))
        for digest in blocks:
            known.blocks.pop(digest, None)  # re-inserted: most recently used last
            known.blocks[digest] = known.clock
        while len(known.blocks) > INDEX_PER_REPLICA:
            known.blocks.pop(next(iter(known.blocks)))

    def correct(self, replica: str, blocks: Sequence[str], cached_blocks: int) -> None:
        """The answer proved only ``cached_blocks`` leading blocks cached there: forget the rest."""
        known = self.replicas.get(replica)
        if known is None:
            return
        for digest in blocks[max(0, cached_blocks):]:
            known.blocks.pop(digest, None)

    def keep_only(self, replicas: Iterable[str]) -> None:
        """Forget replicas that are no longer in the group."""
        alive = set(replicas)
        for name in [r for r in self.replicas if r not in alive]:
            del self.replicas[name]


def _spread(session: str, replica: str) -> str:
    return hashlib.sha256(f"{session}\x00{replica}".encode()).hexdigest()


def choose(session: str, blocks: Sequence[str], loads: Mapping[str, float], index: Index,
           gate: Gate | None = None) -> str:
    """The replica for a new session (``loads``: every healthy replica's load; not empty)."""
    gate = gate or index.gate
    names = sorted(loads)
    least = min(loads[r] for r in names)
    mean = sum(loads[r] for r in names) / len(names)
    limit = max(least + gate.absolute_slack, mean * gate.relative_slack)
    eligible = [r for r in names if loads[r] <= limit] or names
    return min(eligible, key=lambda r: (-index.match(r, blocks), loads[r], _spread(session, r)))
