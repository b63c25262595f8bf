"""bench/fleet.py's cache model and policies, and litellm_prefix.placement's decisions."""
from __future__ import annotations

import json
import random

import pytest
from harness.procs import load_bench

from litellm_prefix import placement


@pytest.fixture(scope="module")
def fleet():
    return load_bench("fleet")


def test_block_keys_chain_so_a_change_early_shares_nothing_after_it(fleet):
    a = fleet.block_keys([(1, 100), (2, 60), (3, 40)])
    b = fleet.block_keys([(1, 100), (9, 60), (3, 40)])
    assert len(a) == 12 and a[:6] == b[:6] and not set(a[6:]) & set(b[6:])
    assert fleet.block_keys([(1, 100), (2, 60)]) == a[:10]  # an appended turn keeps every earlier block


def test_the_engine_reuses_the_longest_cached_run_and_evicts_least_recently_used(fleet):
    engine = fleet.Engine(capacity_tokens=16 * 10)
    first = fleet.block_keys([(1, 96)])  # 6 blocks
    assert engine.run(first, 96) == 0
    assert engine.run(first, 96) == 96
    other = fleet.block_keys([(2, 96)])
    engine.run(other, 96)  # 12 blocks wanted, 10 fit: the first request's oldest blocks go
    assert engine.run(first, 96) == 0  # its first block was evicted: nothing after it counts
    assert len(engine.blocks) == 10


def test_sglang_goes_to_the_least_loaded_worker_only_past_both_thresholds(fleet):
    policy = fleet.SGLang(["a", "b"], random.Random(0), 16 * 1000)
    keys = fleet.block_keys([(1, 320)])
    policy.answered(None, 0, "a", keys, 0, 320)
    assert policy.route(None, 0, keys, {"a": 60, "b": 0}) == "a"  # imbalance 60 <= 64: cache wins
    assert policy.route(None, 0, keys, {"a": 100, "b": 30}) == "b"  # > 64 and > 1.5x: least loaded
    fresh = fleet.block_keys([(5, 320)])  # no match above 0.5: the smaller tree
    assert policy.route(None, 0, fresh, {"a": 0, "b": 0}) == "b"


def test_the_hash_ring_is_deterministic_and_keeps_most_sessions_when_a_replica_goes(fleet):
    sessions = [fleet.Session(i, fleet.KINDS[0], 0.0, 100, [], -1) for i in range(200)]
    full = fleet.HashRing([f"r{i}" for i in range(8)], random.Random(0), 0)
    fewer = fleet.HashRing([f"r{i}" for i in range(7)], random.Random(1), 0)
    before = [full.route(s, 0, [], {}) for s in sessions]
    assert before == [full.route(s, 0, [], {}) for s in sessions]
    kept = sum(b == fewer.route(s, 0, [], {}) for s, b in zip(sessions, before) if b != "r7")
    assert kept == sum(b != "r7" for b in before)  # only r7's sessions move


def test_placement_prefers_the_replica_holding_the_head_within_the_gate():
    gate = placement.Gate(absolute_slack=2, relative_slack=1.0, cache_tokens=10_000, session_weight=0)
    index = placement.Index(gate)
    head = placement.head_blocks("system prompt " * 2000)

    def loaded(loads):  # decayed request counts as given, at time 0
        for r, n in loads.items():
            index._replica(r).update(l=float(n), t=0.0)
        return list(loads)

    index.routed("b", head, 5_000, 0.0)
    assert placement.choose("s1", head, loaded({"a": 3, "b": 4, "c": 3}), index, 0.0) == "b"  # within 2 of the least
    assert placement.choose("s1", head, loaded({"a": 1, "b": 4, "c": 1}), index, 0.0) != "b"  # gated: too loaded
    other = placement.head_blocks("another agent " * 2000)
    assert placement.choose("s2", other, loaded({"a": 3, "b": 4, "c": 2}), index, 0.0) == "c"  # no match: least loaded


def test_load_is_decayed_requests_plus_active_sessions():
    gate = placement.Gate(load_seconds=100.0, active_seconds=60.0, session_weight=10.0)
    index = placement.Index(gate)
    for t in range(5):
        index.routed("a", (), 0, float(t), "s1")
    assert index.active("a", 4.0) == 1 and 14.8 < index.load("a", 4.0) < 15.0
    assert index.active("a", 70.0) == 0 and abs(index.load("a", 104.0) - 5 * 2.718281828 ** -1) < 0.05
    index.placed("b", (), 80.0, "s1")  # moved: active only where it went
    assert index.active("a", 80.0) == 0 and index.active("b", 80.0) == 1


def test_the_index_ages_by_tokens_routed_since_and_is_corrected_by_cached_tokens():
    index = placement.Index(placement.Gate(cache_tokens=10_000))
    head = placement.head_blocks("x" * 20_000)
    index.routed("a", head, 2_000, 0.0)
    assert index.match("a", head) == len(head)
    index.correct("a", head, 3)  # the answer proved only 3 blocks cached
    assert index.match("a", head) == 3
    index.routed("a", placement.head_blocks("y" * 20_000), 10_000, 0.0)  # 10k tokens of others since
    assert index.match("a", head) == 0  # an LRU cache of 10k tokens no longer holds it
    assert placement.Index(index.gate, json.loads(json.dumps(index.record()))).record() == index.record()
    assert index.keep_only(["b"]) == ["a"] and index.replicas == {}


def test_a_run_is_deterministic_from_its_seed_and_stabilizing_never_costs_tokens(fleet):
    trace = fleet.make_trace(12, seed=3, horizon_s=300)
    a = fleet.simulate(fleet.Plugin, trace, 3, 60_000, 4, 3)
    b = fleet.simulate(fleet.Plugin, fleet.make_trace(12, seed=3, horizon_s=300), 3, 60_000, 4, 3)
    assert (a.prefill_tokens, dict(a.requests), a.moves) == (b.prefill_tokens, dict(b.requests), b.moves)
    raw = fleet.simulate(fleet.SessionAffinity, trace, 3, 60_000, 4, 3)
    stable = fleet.simulate(fleet.SessionAffinity, trace, 3, 60_000, 4, 3, stabilized=True)
    assert stable.prefill_tokens < raw.prefill_tokens and stable.prompt_tokens == raw.prompt_tokens
    assert a.moves == 0 and sum(a.requests.values()) == sum(len(s.turns) for s in trace)
