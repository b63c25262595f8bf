"""Placement at fleet scale: N engine replicas with finite prefix caches, many agent sessions.

A deterministic simulation (``--seed``) of coding-agent sessions routed over N replicas of
one model, each replica a vLLM-like prefix cache: 16-token blocks whose keys chain (block i
stands for every token up to its end), least recently used blocks evicted when the cache is
full, a request reusing its longest run of leading cached blocks. Sessions of several agent
kinds (their heads of 8-15k tokens shared by every session of the kind, then a session's own
project context) arrive over time, think between turns, sometimes idle for minutes, at most
``--in-flight`` sessions at once. Client requests carry the volatile bytes the plugin
removes (a date line that moves at midnight, a per-request counter in one kind's head).

``SlotEngine`` models llama.cpp's server instead (a few slots, each keeping one prompt):
bench/fleet_real.py checks it, and these policies, against four real servers.

Policies, on the same trace:

- ``simple-shuffle`` and ``least-busy``: LiteLLM's routing strategies (a random replica per
  request; the replica with the fewest requests in flight);
- ``session-affinity``: LiteLLM's session affinity with client ids (first request random,
  then pinned);
- ``hash``: consistent hashing of the session id (a ring with virtual nodes; LiteLLM 1.110's
  pod discovery);
- ``sglang``: SGLang's cache-aware router: per worker an approximate prefix tree of the
  requests routed there (here: their block keys, LRU-bounded like its tree); when the load is
  imbalanced (max - min in-flight > 64 and max > 1.5 x min) the least loaded worker; else the
  worker with the best prefix match if its match rate exceeds 0.5, else the worker with the
  smallest tree;
- ``plugin``: this package, through the same ``litellm_prefix.fleet.placement`` code the gateway's
  ``affinity.py`` runs: a new session placed by ``placement.choose`` (head-block index
  corrected by each answer's cached tokens, load gate), a live one moved only by
  ``placement.move`` at an idle boundary; requests stabilized.

Two readings: **as deployed** (every router but the plugin sees the client's own bytes) and
**placement only** (every policy on the stabilized requests). Reported per policy:
re-processed (prefilled) tokens against the best policy, prefill time at a fixed prefill rate,
requests per replica max/mean, the in-flight peak per replica max/mean, and moves per session;
and where the re-processed tokens come from (``split_prefill``): head prefills (a replica
prefilling an agent kind's shared head, the first time or after eviction) and their tokens,
and a session's own earlier context prefilled again (evicted, or moved); the rest is new.
Target (8 replicas, 200 sessions): the plugin's re-processed tokens no more than the
SGLang-style policy's, with requests per replica and the in-flight peak at max/mean <= 1.25.

    .venv/bin/python -m bench.fleet [--replicas 8 ...] [--sessions 200] [--seed 1 ...] [--json]
"""
from __future__ import annotations

import argparse
import bisect
import hashlib
import heapq
import json
import math
import random
import sys
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from litellm_prefix.fleet import placement

ROOT = Path(__file__).resolve().parent.parent

BLOCK = 16  # tokens per engine cache block (vLLM)
PLACEMENT_BLOCK = 512  # tokens per head block of the plugin's index (placement.BLOCK_CHARS / 4)
PREFILL_TOKENS_PER_S = 8000.0
DECODE_TOKENS_PER_S = 60.0
RESULTS = ROOT / "bench" / "results" / "fleet.json"
TARGET_BALANCE = 1.25

# -- the engine ----------------------------------------------------------------------------


class Engine:
    """A vLLM-like prefix cache: chained 16-token block keys, LRU eviction beyond ``capacity`` blocks."""

    def __init__(self, capacity_tokens: int) -> None:
        self.capacity = capacity_tokens // BLOCK
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def run(self, keys: list[int], tokens: int) -> int:
        """Serve a request of ``tokens`` tokens whose full blocks have ``keys``: returns cached tokens."""
        hit = 0
        for key in keys:
            if key not in self.blocks:
                break
            hit += 1
        for key in keys:  # every block of the request is now the most recently used
            if key in self.blocks:
                self.blocks.move_to_end(key)
            else:
                self.blocks[key] = None
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)
        return hit * BLOCK


class SlotEngine:
    """llama.cpp's server with ``slots`` slots and no RAM prompt cache (``-np N --cache-ram 0``):
    each slot keeps the tokens of the last prompt it served, and nothing else.

    Slot selection follows ``get_available_slot`` in llama.cpp's tools/server/server-context.cpp:
    among the idle slots holding tokens, the one whose longest common prefix with the prompt is
    the largest share of the prompt, if that share exceeds ``similarity``
    (``--slot-prompt-similarity``, default 0.1; the first slot wins a tie); else the least recently
    used idle slot (``t_last_used <= t_last``: of equals, the last slot). The chosen slot reuses
    the longest common prefix, less one token when that is the whole prompt (the server evaluates
    at least one token to get logits). Every slot is idle here: requests are served one at a time
    (bench/fleet_real.py replays sequentially). Tokens are whatever the caller tokenized with: the
    real check uses the server's own tokenizer, so model and server count the same units."""

    def __init__(self, slots: int, similarity: float = 0.1) -> None:
        self.held: list[tuple] = [()] * slots
        self.last_used = [-1] * slots
        self.similarity = similarity
        self.clock = 0

    def pick(self, tokens: tuple) -> int:
        best, share_best = None, 0.0
        for i, held in enumerate(self.held):
            if held:
                share = common_prefix(held, tokens) / max(1, len(tokens))
                if share > share_best and share > self.similarity:
                    best, share_best = i, share
        if best is None:
            t_last = 0
            for i, used in enumerate(self.last_used):
                if best is None or used <= t_last:
                    best, t_last = i, used
        return best

    def run(self, tokens: tuple) -> int:
        """Serve a prompt of these tokens: returns its cached tokens (the rest is prefilled)."""
        slot = self.pick(tokens)
        cached = min(common_prefix(self.held[slot], tokens), max(0, len(tokens) - 1))
        self.clock += 1
        self.held[slot], self.last_used[slot] = tuple(tokens), self.clock
        return cached


def common_prefix(a: tuple, b: tuple) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def block_keys(pieces: list[tuple[int, int]]) -> list[int]:
    """Chained keys of the full 16-token blocks of a token sequence given as (piece id, length)
    pieces: two sequences share block i exactly when they share every piece up to its end."""
    return extend_keys(([], 0, 0, []), pieces)[0]


def extend_keys(state: tuple, pieces: list[tuple[int, int]]) -> tuple:
    """``block_keys`` carried on: ``state`` (keys, chain, filled, the open block's parts) is
    what a previous call returned for the pieces before these; returns the new state (the
    state given is not changed). A session's next turn extends its last request, so its keys
    cost only the new pieces (the simulation spent most of its time re-keying whole requests)."""
    keys, chain, filled, inside = list(state[0]), state[1], state[2], list(state[3])
    for piece, length in pieces:
        offset = 0
        while offset < length:
            take = min(BLOCK - filled, length - offset)
            inside.append((piece, offset, take))
            filled += take
            offset += take
            if filled == BLOCK:
                chain = hash((chain, tuple(inside)))
                keys.append(chain)
                filled, inside = 0, []
    return keys, chain, filled, inside


# -- the trace -----------------------------------------------------------------------------


def pid(*parts: object) -> int:
    """A piece id: stable across processes (Python's str hash is salted per process)."""
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "big")


@dataclass
class Kind:
    name: str
    head_tokens: int
    volatile_at: float  # where in the head its date line sits (share of the head); < 0: none in the head
    counter_at: float  # a per-request counter's place in the head (share); < 0: none


KINDS = (
    Kind("claude-code", 15000, -1, -1),  # date in the first user message: stabilized there too
    Kind("codex", 9000, -1, -1),  # date at the tail: stable already
    Kind("opencode", 11000, 0.92, -1),  # date near the end of its env block
    Kind("pi", 8000, 0.97, 0.55),  # date near the end; a status counter mid-head (an extension)
)


@dataclass
class Turn:
    at: float  # when the client sends it (seconds), given the previous answer came back
    user_tokens: int
    output_tokens: int


@dataclass
class Session:
    sid: int
    kind: Kind
    arrive: float
    project_tokens: int
    turns: list[Turn]
    day_change_at: int  # the turn from which the client's date line shows the next day (-1: never)

    def pieces(self, turn: int, stabilized: bool) -> list[tuple[int, int]]:
        """The request of turn ``turn`` as (piece id, tokens): the kind's head (with the client's
        volatile bytes unless stabilized), the session's project context, then the history."""
        out = self.kind_head(turn, stabilized)
        out.append((pid("project", self.sid), self.project_tokens))
        for t in range(turn + 1):
            out.append((pid("user", self.sid, t), self.turns[t].user_tokens))
            if t < turn:
                out.append((pid("answer", self.sid, t), self.turns[t].output_tokens))
        return out

    def shared_head(self, turn: int, stabilized: bool) -> int:
        """Tokens of turn ``turn``'s request that any other session of the kind sends alike on the
        same day: the kind's head up to the first per-session bytes (pi's counter)."""
        twin = Session(-1 - self.sid, self.kind, self.arrive, self.project_tokens, self.turns, self.day_change_at)
        n = 0
        for mine, theirs in zip(self.kind_head(turn, stabilized), twin.kind_head(turn, stabilized)):
            if mine != theirs:
                break
            n += mine[1]
        return n

    def kind_head(self, turn: int, stabilized: bool) -> list[tuple[int, int]]:
        """The request's head: the kind's system text and tools, with the volatile bytes."""
        kind, k = self.kind, KINDS.index(self.kind)
        marks = []
        if kind.volatile_at >= 0:
            day = 1 if (not stabilized and 0 <= self.day_change_at <= turn) else 0
            marks.append((int(kind.head_tokens * kind.volatile_at), ("date", day)))
        if kind.counter_at >= 0:
            marks.append((int(kind.head_tokens * kind.counter_at), ("count", 0 if stabilized else turn)))
        out, at = [], 0
        for pos, what in sorted(marks):
            out.append((pid("head", k, at), pos - at))
            out.append((pid("volatile", k, what, self.sid if what[0] == "count" else 0), 8))
            at = pos
        out.append((pid("head", k, at), kind.head_tokens - at))
        return out

    def head_pieces(self, stabilized: bool) -> list[tuple[int, int]]:
        return self.pieces(0, stabilized)[:-1]  # everything before the first user message


def make_trace(n_sessions: int, seed: int, horizon_s: float = 3600.0) -> list[Session]:
    rng = random.Random(seed)
    sessions = []
    for sid in range(n_sessions):
        kind = KINDS[rng.choices(range(len(KINDS)), weights=(3, 2, 2, 3))[0]]
        arrive = rng.uniform(0, horizon_s)
        n = rng.randint(8, 30)
        turns, t = [], arrive
        for _ in range(n):
            turns.append(Turn(t, rng.randint(80, 1500), rng.randint(60, 700)))
            gap = rng.expovariate(1 / 12.0)
            if rng.random() < 0.08:
                gap += rng.uniform(300, 1200)  # the user walks away: idle minutes
            t += gap
        day_change = rng.randrange(n) if rng.random() < 0.15 else -1
        sessions.append(Session(sid, kind, arrive, rng.randint(300, 2500), turns, day_change))
    return sessions


# -- policies -----------------------------------------------------------------------------


class Policy:
    name = ""
    stabilized = False

    def __init__(self, replicas: list[str], rng: random.Random, engine_tokens: int) -> None:
        self.replicas = replicas
        self.rng = rng

    def route(self, s: Session, turn: int, keys: list[int], in_flight: dict[str, int]) -> str:
        raise NotImplementedError

    def answered(self, s: Session, turn: int, replica: str, keys: list[int], cached: int, tokens: int) -> None:
        pass

    def ended(self, s: Session) -> None:
        pass


class SimpleShuffle(Policy):
    name = "simple-shuffle"

    def route(self, s, turn, keys, in_flight):
        return self.rng.choice(self.replicas)


class LeastBusy(Policy):
    name = "least-busy"

    def route(self, s, turn, keys, in_flight):
        least = min(in_flight[r] for r in self.replicas)
        return self.rng.choice([r for r in self.replicas if in_flight[r] == least])


class SessionAffinity(Policy):
    name = "session-affinity"

    def __init__(self, *a) -> None:
        super().__init__(*a)
        self.pins: dict[int, str] = {}

    def route(self, s, turn, keys, in_flight):
        if s.sid not in self.pins:
            self.pins[s.sid] = self.rng.choice(self.replicas)
        return self.pins[s.sid]


class HashRing(Policy):
    name = "hash"

    def __init__(self, *a) -> None:
        super().__init__(*a)
        ring = sorted((int(hashlib.sha256(f"{r}#{v}".encode()).hexdigest()[:16], 16), r)
                      for r in self.replicas for v in range(100))
        self.points = [p for p, _ in ring]
        self.owners = [r for _, r in ring]

    def route(self, s, turn, keys, in_flight):
        h = int(hashlib.sha256(f"session-{s.sid}".encode()).hexdigest()[:16], 16)
        return self.owners[bisect.bisect(self.points, h) % len(self.points)]


class SGLang(Policy):
    """SGLang's cache-aware policy (sgl-router ``cache_aware``), its defaults: cache_threshold 0.5,
    balance_abs_threshold 64, balance_rel_threshold 1.5; the tree bounded like the engine's cache."""

    name = "sglang"
    CACHE_THRESHOLD, ABS, REL = 0.5, 64, 1.5

    def __init__(self, replicas, rng, engine_tokens) -> None:
        super().__init__(replicas, rng, engine_tokens)
        self.trees = {r: OrderedDict() for r in replicas}
        self.limit = engine_tokens // BLOCK

    def route(self, s, turn, keys, in_flight):
        loads = [in_flight[r] for r in self.replicas]
        if max(loads) - min(loads) > self.ABS and max(loads) > self.REL * min(loads):
            least = min(loads)
            return next(r for r in self.replicas if in_flight[r] == least)
        best, best_rate = None, -1.0
        for r in self.replicas:
            tree, n = self.trees[r], 0
            for key in keys:
                if key not in tree:
                    break
                n += 1
            rate = n / max(1, len(keys))
            if rate > best_rate:
                best, best_rate = r, rate
        if best_rate > self.CACHE_THRESHOLD:
            return best
        return min(self.replicas, key=lambda r: len(self.trees[r]))

    def answered(self, s, turn, replica, keys, cached, tokens):
        tree = self.trees[replica]
        for key in keys:
            tree.pop(key, None)
            tree[key] = None
        while len(tree) > self.limit:
            tree.popitem(last=False)


class Plugin(Policy):
    """This package's placement (``litellm_prefix.fleet.placement``, the code ``affinity.py`` runs) on
    stabilized requests: a new session placed by ``placement.choose``, a live one moved only by
    ``placement.move`` at an idle boundary, the index fed each answer's cached tokens."""

    name = "plugin"
    stabilized = True

    def __init__(self, replicas, rng, engine_tokens, gate: placement.Gate | None = None) -> None:
        super().__init__(replicas, rng, engine_tokens)
        self.gate = gate or placement.Gate(cache_tokens=engine_tokens)
        self.index = placement.Index(self.gate)
        self.pins: dict[int, str] = {}
        self.last: dict[int, tuple[float, int]] = {}  # session -> (its last request, its replica's clock then)
        self.heads: dict[int, tuple[str, ...]] = {}
        self.reasons: dict[str, int] = defaultdict(int)
        self.now = 0.0

    def _head(self, s: Session) -> tuple[str, ...]:
        if s.sid not in self.heads:
            digests, running, done = [], hashlib.blake2b(digest_size=placement.DIGEST_BYTES), 0
            for piece, length in s.head_pieces(True):
                running.update(f"{piece}:{length};".encode())
                done += length
                while done >= PLACEMENT_BLOCK * (len(digests) + 1):
                    digests.append(running.copy().hexdigest())
            self.heads[s.sid] = tuple(digests)
        return self.heads[s.sid]

    def route(self, s, turn, keys, in_flight):
        if s.sid not in self.pins:
            self.pins[s.sid] = placement.choose(str(s.sid), self._head(s), self.replicas, self.index, self.now)
            self.index.placed(self.pins[s.sid], self._head(s), self.now, str(s.sid))
        else:
            then, clock = self.last[s.sid]
            moved = placement.move(str(s.sid), self.pins[s.sid], self._head(s), self.replicas, self.index,
                                   self.now, self.now - then, clock)
            if moved is not None:
                self.pins[s.sid] = moved[0]
                self.reasons[moved[1]] += 1
                self.index.placed(moved[0], self._head(s), self.now, str(s.sid))
        replica = self.pins[s.sid]
        self.last[s.sid] = (self.now, self.index.clock(replica))
        return replica

    def answered(self, s, turn, replica, keys, cached, tokens):
        blocks = self._head(s)
        self.index.answered(replica, blocks, tokens - cached, self.now, str(s.sid), cached // PLACEMENT_BLOCK)


POLICIES = (SimpleShuffle, LeastBusy, SessionAffinity, HashRing, SGLang, Plugin)

# -- the run -------------------------------------------------------------------------------


def split_prefill(tokens: int, cached: int, shared: int, before: int) -> tuple[int, int, int]:
    """Where a request's prefilled tokens (``tokens`` - ``cached``) come from, as (head, context,
    new). Head: the kind's shared head (its first ``shared`` tokens), counted when at least one
    block of it was missing: this replica prefilled the kind's head (again). Context: the
    session's own earlier request (``before`` tokens, its full blocks) prefilled again: evicted,
    or the session moved. New: the rest, what no policy can save (the tokens the session never
    sent before, and the partial last blocks no engine caches)."""
    head = shared - cached if shared - cached >= BLOCK else 0
    context = max(0, before // BLOCK * BLOCK - max(cached, shared))
    return head, context, tokens - cached - head - context


@dataclass
class Outcome:
    name: str
    prefill_tokens: int = 0
    prompt_tokens: int = 0
    head_prefills: int = 0  # requests that prefilled their kind's shared head on their replica
    head_tokens: int = 0
    context_tokens: int = 0
    new_tokens: int = 0  # what no placement saves (split_prefill's third part)
    requests: dict = field(default_factory=lambda: defaultdict(int))
    peak: dict = field(default_factory=lambda: defaultdict(int))
    moves: int = 0

    def row(self, replicas: list[str], sessions: int) -> dict:
        reqs = [self.requests[r] for r in replicas]
        peaks = [self.peak[r] for r in replicas]
        return {"policy": self.name, "reprocessed_tokens": self.prefill_tokens, "prompt_tokens": self.prompt_tokens,
                "prefill_s": round(self.prefill_tokens / PREFILL_TOKENS_PER_S, 1),
                "head_prefills": self.head_prefills, "head_reprocessed_tokens": self.head_tokens,
                "context_reprocessed_tokens": self.context_tokens, "new_tokens": self.new_tokens,
                "requests_max_over_mean": round(max(reqs) / (sum(reqs) / len(reqs)), 3),
                "inflight_peak_max_over_mean": round(max(peaks) / (sum(peaks) / len(peaks)), 3),
                "moves_per_session": round(self.moves / sessions, 3),
                "requests_per_replica": reqs}


def simulate(policy_cls, trace: list[Session], n_replicas: int, engine_tokens: int, in_flight_cap: int,
             seed: int, stabilized: bool | None = None) -> Outcome:
    replicas = [f"r{i}" for i in range(n_replicas)]
    rng = random.Random(seed * 7919 + pid(policy_cls.name) % 1000)
    policy = policy_cls(replicas, rng, engine_tokens)
    stable = policy.stabilized if stabilized is None else stabilized
    engines = {r: Engine(engine_tokens) for r in replicas}
    out = Outcome(policy.name if stabilized is None else f"{policy.name}{' (stabilized)' if stable else ''}")
    in_flight = {r: 0 for r in replicas}
    # events: (time, order, kind, session index, turn)
    events: list[tuple[float, int, str, int, int]] = []
    order = 0
    waiting: list[int] = []
    active = 0
    for s in sorted(trace, key=lambda s: s.arrive):
        heapq.heappush(events, (s.arrive, order, "arrive", s.sid, 0))
        order += 1
    by_id = {s.sid: s for s in trace}
    last_replica: dict[int, str] = {}
    offset: dict[int, float] = defaultdict(float)  # a session's delay (answers and the admission queue)
    keyed: dict[int, tuple[list, tuple]] = {}  # session -> (its last request's pieces, their extend_keys state)
    sent: dict[int, int] = {}  # session -> its last request's tokens
    shared: dict[tuple[int, bool], int] = {}  # (session, its date moved) -> Session.shared_head

    def shared_head(s: Session, turn: int) -> int:
        key = (s.sid, 0 <= s.day_change_at <= turn)
        if key not in shared:
            shared[key] = s.shared_head(turn, stable)
        return shared[key]

    def keys_of(sid: int, pieces: list[tuple[int, int]]) -> list[int]:
        before, state = keyed.get(sid, ([], ([], 0, 0, [])))
        if pieces[:len(before)] != before:
            before, state = [], ([], 0, 0, [])
        state = extend_keys(state, pieces[len(before):])
        keyed[sid] = (pieces, state)
        return state[0]

    def send(sid: int, turn: int, now: float) -> None:
        nonlocal order
        s = by_id[sid]
        pieces = s.pieces(turn, stable)
        tokens = sum(length for _, length in pieces)
        keys = keys_of(sid, pieces)
        policy.now = now
        replica = policy.route(s, turn, keys, in_flight)
        if sid in last_replica and last_replica[sid] != replica:
            out.moves += 1
        last_replica[sid] = replica
        cached = engines[replica].run(keys, tokens)
        policy.answered(s, turn, replica, keys, cached, tokens)
        prefill = tokens - cached
        head, context, new = split_prefill(tokens, cached, shared_head(s, turn), sent.get(sid, 0))
        sent[sid] = tokens
        out.head_prefills += head > 0
        out.head_tokens += head
        out.context_tokens += context
        out.new_tokens += new
        out.prefill_tokens += prefill
        out.prompt_tokens += tokens
        out.requests[replica] += 1
        in_flight[replica] += 1
        out.peak[replica] = max(out.peak[replica], in_flight[replica])
        done = now + prefill / PREFILL_TOKENS_PER_S + s.turns[turn].output_tokens / DECODE_TOKENS_PER_S
        heapq.heappush(events, (done, order, "done", sid, turn * 1000 + replicas.index(replica)))
        order += 1

    while events:
        now, _, kind, sid, turn = heapq.heappop(events)
        s = by_id[sid]
        if kind == "arrive":
            if active >= in_flight_cap:
                waiting.append(sid)
                continue
            active += 1
            offset[sid] = now - s.arrive
            send(sid, 0, now)
        elif kind == "done":
            t, replica = divmod(turn, 1000)
            in_flight[replicas[replica]] -= 1
            if t + 1 < len(s.turns):
                nxt = max(now, s.turns[t + 1].at + offset[sid])
                offset[sid] = nxt - s.turns[t + 1].at
                heapq.heappush(events, (nxt, order, "send", sid, t + 1))
                order += 1
            else:
                policy.ended(s)
                keyed.pop(sid, None)
                sent.pop(sid, None)
                active -= 1
                if waiting:
                    heapq.heappush(events, (now, order, "arrive", waiting.pop(0), 0))
                    order += 1
        elif kind == "send":
            send(sid, turn, now)
    return out


def balance_bound(trace: list[Session], n_replicas: int, sglang: dict, rows: list[dict], stabilized: bool = True) -> dict:
    """What the balance target alone costs any placement, against the SGLang-style router's tokens.

    With requests per replica at most TARGET_BALANCE times the mean, a kind with a share f of the
    requests is served by at least ceil(n * f / TARGET_BALANCE) replicas, and each of them prefills
    the kind's shared head at least once (an empty cache holds none of it). Every other token a
    placement re-processes is either the session's own context again (0 at best) or new tokens,
    the same for every policy but for partial blocks (``new_tokens`` of each row differ by
    ``new_spread`` at most over the policies simulated). So no placement within the balance target
    re-processes fewer tokens than the router where the heads it must prefill exceed the router's
    head and context tokens by more than that spread: ``room`` + ``new_spread`` < 0."""
    requests: dict[str, int] = defaultdict(int)
    shared: dict[str, int] = {}
    for session in trace:
        requests[session.kind.name] += len(session.turns)
        shared.setdefault(session.kind.name, session.shared_head(0, stabilized))
    total = sum(requests.values())
    replicas = {k: min(n_replicas, math.ceil(n_replicas * n / total / TARGET_BALANCE - 1e-9)) for k, n in requests.items()}
    minimum = sum(replicas[k] * shared[k] for k in replicas)
    router = sglang["head_reprocessed_tokens"] + sglang["context_reprocessed_tokens"]
    news = [r["new_tokens"] for r in rows]
    spread = max(news) - min(news)
    return {"replicas_per_kind": replicas, "request_share": {k: round(n / total, 3) for k, n in requests.items()},
            "min_head_tokens": minimum, "router_head_and_context_tokens": router, "room_tokens": router - minimum,
            "new_spread_tokens": spread, "out_of_reach": router - minimum + spread < 0}


def run(n_replicas: int, n_sessions: int, seed: int, engine_tokens: int, in_flight_cap: int) -> dict:
    trace = make_trace(n_sessions, seed)
    deployed = [simulate(p, trace, n_replicas, engine_tokens, in_flight_cap, seed) for p in POLICIES]
    placement_only = [simulate(p, trace, n_replicas, engine_tokens, in_flight_cap, seed, stabilized=True)
                      for p in POLICIES]
    replicas = [f"r{i}" for i in range(n_replicas)]
    tables = {}
    for name, outcomes in (("as_deployed", deployed), ("placement_only", placement_only)):
        rows = [o.row(replicas, n_sessions) for o in outcomes]
        best = min(r["reprocessed_tokens"] for r in rows)
        for r in rows:
            r["reprocessed_vs_best"] = round(r["reprocessed_tokens"] / best, 3)
        tables[name] = rows
    verdict = {}
    for name, rows in tables.items():
        by = {r["policy"].split(" ")[0]: r for r in rows}
        plug, sgl = by["plugin"], by["sglang"]
        verdict[name] = {
            "plugin_vs_sglang_reprocessed": round(plug["reprocessed_tokens"] / sgl["reprocessed_tokens"], 3),
            "plugin_requests_max_over_mean": plug["requests_max_over_mean"],
            "plugin_inflight_peak_max_over_mean": plug["inflight_peak_max_over_mean"],
            "meets_target": (plug["reprocessed_tokens"] <= sgl["reprocessed_tokens"]
                             and plug["requests_max_over_mean"] <= TARGET_BALANCE
                             and plug["inflight_peak_max_over_mean"] <= TARGET_BALANCE)}
    sgl = next(r for r in tables["placement_only"] if r["policy"].startswith("sglang"))
    bound = balance_bound(trace, n_replicas, sgl, tables["placement_only"])
    return {"replicas": n_replicas, "sessions": n_sessions, "seed": seed, "engine_cache_tokens": engine_tokens,
            "in_flight_sessions": in_flight_cap, "tables": tables, "verdict": verdict, "balance_bound": bound}


def print_tables(result: dict) -> None:
    print(f"{result['replicas']} replicas, {result['sessions']} sessions, seed {result['seed']}, "
          f"{result['engine_cache_tokens']:,} cached tokens per replica, {result['in_flight_sessions']} in flight")
    for name, rows in result["tables"].items():
        print(f"\n{name.replace('_', ' ')}")
        print(f"{'policy':<30}{'re-processed':>14}{'vs best':>9}{'prefill s':>11}{'req max/mean':>14}"
              f"{'peak max/mean':>15}{'moves/sess':>12}{'heads':>7}{'head k':>8}{'context k':>11}")
        for r in rows:
            print(f"{r['policy']:<30}{r['reprocessed_tokens']:>14,}{r['reprocessed_vs_best']:>9.3f}"
                  f"{r['prefill_s']:>11,.1f}{r['requests_max_over_mean']:>14.3f}"
                  f"{r['inflight_peak_max_over_mean']:>15.3f}{r['moves_per_session']:>12.3f}{r['head_prefills']:>7}"
                  f"{r['head_reprocessed_tokens'] / 1000:>8.1f}{r['context_reprocessed_tokens'] / 1000:>11.1f}")
        v = result["verdict"][name]
        if name == "placement_only":
            b = result["balance_bound"]
            print(f"balance bound: replicas per kind {b['replicas_per_kind']} (request shares {b['request_share']}); "
                  f"their heads {b['min_head_tokens']:,} tokens against the router's head and context "
                  f"{b['router_head_and_context_tokens']:,}: room {b['room_tokens']:,}, new tokens differ by "
                  f"{b['new_spread_tokens']:,} over the policies: "
                  f"{'the target is out of reach of any placement' if b['out_of_reach'] else 'not excluded'}")
        print(f"plugin / sglang re-processed {v['plugin_vs_sglang_reprocessed']:.3f}, balance "
              f"{v['plugin_requests_max_over_mean']:.3f} / {v['plugin_inflight_peak_max_over_mean']:.3f}: "
              f"{'meets' if v['meets_target'] else 'MISSES'} the target")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[8])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--seed", type=int, nargs="+", default=[1])
    parser.add_argument("--cache-tokens", type=int, default=400_000, help="each replica's prefix cache")
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = [run(n, args.sessions, seed, args.cache_tokens, args.in_flight) for n in args.replicas
               for seed in args.seed]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for result in results:
            print_tables(result)
            print()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
