"""bench/fleet.py's cache model and policies, and litellm_prefix.fleet.placement's decisions."""
from __future__ import annotations

import json
import random

import pytest

from litellm_prefix.fleet import placement
from tests.support import full_size


@pytest.fixture(scope="module")
def fleet():
    from bench import fleet as module

    return module


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


def test_prefilled_tokens_split_into_head_prefills_a_sessions_own_context_and_new_tokens(fleet):
    # a 1,000-token request whose kind shares its first 500 (a partial block: 500 = 31 * 16 + 4)
    assert fleet.split_prefill(1000, 0, 500, 0) == (500, 0, 500)  # first request on a cold replica
    assert fleet.split_prefill(1000, 496, 500, 0) == (0, 0, 504)  # the head's partial block is no head prefill
    assert fleet.split_prefill(1000, 800, 500, 810) == (0, 0, 200)  # 800 = the earlier request's full blocks
    assert fleet.split_prefill(1000, 496, 500, 810) == (0, 300, 204)  # its own context gone: evicted or moved
    assert fleet.split_prefill(1000, 0, 500, 810) == (500, 300, 200)  # all of it: a cold replica mid-session


def test_one_replica_with_room_for_everything_prefills_each_kinds_head_once_and_no_context(fleet):
    trace = fleet.make_trace(16, seed=2, horizon_s=300)
    out = fleet.simulate(fleet.SessionAffinity, trace, 1, 10_000_000, 8, 2, stabilized=True)
    kinds = {s.kind.name: s.shared_head(0, True) for s in trace}
    assert out.head_prefills == len(kinds) and out.head_tokens == sum(kinds.values())
    assert out.context_tokens == 0
    tiny = fleet.simulate(fleet.SessionAffinity, trace, 1, 20_000, 8, 2, stabilized=True)  # evicts
    assert tiny.head_prefills > len(kinds) and tiny.context_tokens > 0


def test_the_balance_bound_holds_for_every_policy_within_the_balance_target(fleet):
    """balance_bound: a kind with a share f of the requests needs ceil(n f / 1.25) replicas within the
    balance target, each prefilling the kind's head once at least; every simulated policy that
    keeps the balance prefills at least that many head tokens. (The full run's trace: 40 sessions,
    where pi needs two replicas; the quick one: 16 sessions, where opencode needs two and the
    bound is out of reach.)"""
    sessions, horizon = (40, 900) if full_size() else (16, 400)
    trace = fleet.make_trace(sessions, seed=5, horizon_s=horizon)
    rows = [fleet.simulate(p, trace, 4, 400_000, 8, 5, stabilized=True).row([f"r{i}" for i in range(4)], sessions)
            for p in fleet.POLICIES]
    sgl = next(r for r in rows if r["policy"].startswith("sglang"))
    bound = fleet.balance_bound(trace, 4, sgl, rows)
    total = sum(len(s.turns) for s in trace)
    for kind, replicas in bound["replicas_per_kind"].items():
        share = sum(len(s.turns) for s in trace if s.kind.name == kind) / total
        assert replicas == min(4, -(-4 * share // fleet.TARGET_BALANCE))
    heads = {s.kind.name: s.shared_head(0, True) for s in trace}
    assert bound["min_head_tokens"] == sum(bound["replicas_per_kind"][k] * heads[k] for k in heads)
    balanced = [r for r in rows if r["requests_max_over_mean"] <= fleet.TARGET_BALANCE]
    assert balanced  # least-busy balances, at least
    for r in balanced:
        assert r["head_reprocessed_tokens"] >= bound["min_head_tokens"], r["policy"]
    assert bound["out_of_reach"] == (bound["room_tokens"] + bound["new_spread_tokens"] < 0)


# -- llama.cpp's slots (bench/fleet_real.py's model) ------------------------------------------


def test_a_slot_engine_reuses_the_most_similar_slot_and_one_token_less_than_a_whole_prompt(fleet):
    engine = fleet.SlotEngine(slots=2)
    a = tuple(range(100))
    assert engine.run(a) == 0  # empty: least recently used, of equals the last slot (llama.cpp's <=)
    assert engine.held[1] == a and engine.held[0] == ()
    b = tuple(range(1000, 1100))
    assert engine.run(b) == 0  # shares nothing: the least recently used slot, slot 0
    assert engine.held == [b, a]
    assert engine.run(a + (7, 8)) == 100  # a's slot, whole a reused
    assert engine.run(a + (7, 8)) == 101  # all of it cached: one token is evaluated again
    assert engine.held == [b, a + (7, 8)]


def test_a_slot_engine_takes_a_similar_slot_only_past_the_similarity_threshold(fleet):
    engine = fleet.SlotEngine(slots=2, similarity=0.5)
    engine.run(tuple(range(10)))  # slot 1, used at 1
    engine.run(tuple(range(100, 110)))  # slot 0, used at 2
    # shares 4 of 10 tokens with slot 1: 0.4 is not over 0.5, so the least recently used slot (1) anyway
    assert engine.pick(tuple(range(4)) + tuple(range(50, 56))) == 1
    # shares 6 of 10 with slot 0: over 0.5, although slot 1 is the least recently used
    assert engine.pick(tuple(range(100, 106)) + (0, 0, 0, 0)) == 0
    # two slots over the threshold: the larger share wins, whichever is older
    engine = fleet.SlotEngine(slots=3, similarity=0.5)
    engine.run((1, 2, 3, 4, 5, 6, 0, 0, 0, 0))  # slot 2
    engine.run((1, 2, 7, 7, 7, 7, 7, 7, 7, 7))  # shares 0.2, not over 0.5: the least recently used, slot 1
    assert engine.held[1][2] == 7 and engine.held[0] == ()
    engine.similarity = 0.1  # now both slots are similar enough to (1, 2, ...)
    assert engine.pick((1, 2, 3, 4, 5, 6, 7, 7, 7, 7)) == 2  # 0.6 against 0.2, and not slot 0 (empty, LRU)
    assert engine.pick((1, 2, 7, 7, 7, 7, 7, 0, 0, 0)) == 1  # 0.7 against 0.2
    assert engine.run((1, 2, 7, 7, 7, 7, 7, 0, 0, 0)) == 7


def test_real_fleet_requests_share_a_kinds_head_bytes_exactly_and_nothing_across_kinds():
    from bench import fleet_real
    from litellm_prefix.fleet import affinity

    steps = fleet_real.steps(sessions=12, turns=3, seed=1, scale=0.1, horizon_s=120)
    assert steps == fleet_real.steps(sessions=12, turns=3, seed=1, scale=0.1, horizon_s=120)  # deterministic
    assert [s.session.turns[s.turn].at for s in steps] == sorted(s.session.turns[s.turn].at for s in steps)
    by_kind: dict = {}
    for step in steps:
        by_kind.setdefault(step.session.kind.name, []).append(step)
    assert len(by_kind) == 4 and all(len({s.session.sid for s in v}) >= 2 for v in by_kind.values())
    heads = {}
    for kind, kind_steps in by_kind.items():
        firsts = {(s.body["messages"][0]["content"], json.dumps(s.body["tools"])) for s in kind_steps}
        assert len(firsts) == 1  # one head per kind, to the byte
        heads[kind] = affinity.head_blocks_of(kind_steps[0].body)
        assert len(heads[kind]) >= 1  # long enough for the plugin's placement index
        first_users = {s.body["messages"][1]["content"] for s in kind_steps}
        assert len(first_users) == len({s.session.sid for s in kind_steps})  # each session its own
    assert len({h[0] for h in heads.values()}) == 4  # kinds differ from the first block
    for step in steps:  # a later turn extends the earlier one: append-only history
        if step.turn:
            earlier = next(s for s in steps if s.session.sid == step.session.sid and s.turn == step.turn - 1)
            assert step.body["messages"][:len(earlier.body["messages"])] == earlier.body["messages"]
