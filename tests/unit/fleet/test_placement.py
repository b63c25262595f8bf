"""Placement on realistic requests (placement.py through affinity.py): agent kinds that share a head
are co-located, the load gate spreads them, an idle session moves only at an idle boundary, a removed
deployment leaves the index, and two gateway processes over one store place alike."""
from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from harness.agent_requests import claude_code_prompt
from harness.realistic import chat_request, openai_tools, pi_system_prompt
from litellm_prefix.fleet import placement
from litellm_prefix.fleet.affinity import SessionAffinity, head_blocks_of
from litellm_prefix.fleet.store import MemoryStore
from litellm_prefix.settings import Settings
from tests.support import ROOT
from tests.unit.fleet.test_affinity import Clock, deployments

pytestmark = pytest.mark.anyio

PI = pi_system_prompt()
CC = claude_code_prompt(random.Random(5))
TOOLS = openai_tools()


def request(kind: str, i: int) -> dict:
    system = PI if kind == "pi" else CC
    return chat_request(system, [{"role": "user", "content": f"session {kind} {i}: fix the failing test"}], TOOLS,
                        metadata={"user_api_key_hash": "tenant-1"})


def make(store=None, clock=None, events=None, **settings) -> SessionAffinity:
    s = Settings(path_check="absolute", session_affinity="always", **settings)
    store = store if store is not None else MemoryStore(1000, 3600)  # an empty MemoryStore is falsy
    return SessionAffinity(store, Counter(), lambda: s, 3600, clock=clock or Clock(),
                           report=(events.append if events is not None else None))


async def turn(affinity: SessionAffinity, req: dict, deps: list[dict], prompt: int = 9000, cached: int = 0) -> str:
    """One request through the router's filter, then its answer through the success callback."""
    chosen = await affinity.filter("pool", deps, req)
    assert len(chosen) == 1
    where = chosen[0]["model_info"]["id"]
    kwargs = {**req, "litellm_params": {"metadata": req["metadata"]},
              "standard_logging_object": {"model_group": "pool", "model_id": where}}
    usage = {"prompt_tokens": prompt, "completion_tokens": 20,
             "prompt_tokens_details": {"cached_tokens": cached}}
    await affinity.answered(kwargs, {"usage": usage})
    return where


def test_realistic_heads_have_blocks_and_two_kinds_share_none():
    pi, cc = head_blocks_of(request("pi", 1)), head_blocks_of(request("cc", 1))
    assert len(pi) >= 4 and len(cc) >= 4
    assert head_blocks_of(request("pi", 2)) == pi  # one kind, two sessions: the same head
    assert not set(pi) & set(cc)
    assert placement.head_blocks("short agent prompt") == ()  # under one block: nothing to place by


async def test_two_agent_kinds_are_co_located_each_on_its_own_deployment():
    affinity, deps = make(), deployments(2)
    where = {(kind, i): await turn(affinity, request(kind, i), deps) for i in range(4) for kind in ("pi", "cc")}
    by_kind = {kind: {d for (k, _), d in where.items() if k == kind} for kind in ("pi", "cc")}
    assert len(by_kind["pi"]) == 1 and len(by_kind["cc"]) == 1 and by_kind["pi"] != by_kind["cc"], where
    # Later turns stay, and say so in the index: the cached head proves it.
    for (kind, i), d in where.items():
        assert await turn(affinity, request(kind, i), deps, cached=8000) == d
    assert affinity.stats["affinity_moves"] == 0


async def test_the_load_gate_spreads_one_kind_over_every_deployment():
    affinity, deps = make(), deployments(3)
    where = Counter([await turn(affinity, request("pi", i), deps) for i in range(12)])
    assert len(where) == 3 and max(where.values()) <= 12 / 3 * 1.25, where
    # Without the gate's slack for a warm head (absolute and relative at their floor): even spread.
    tight = make(placement_absolute_slack=0, placement_relative_slack=1.0)
    assert Counter([await turn(tight, request("pi", i), deps) for i in range(12)]) == {
        "dep-0": 4, "dep-1": 4, "dep-2": 4}


async def test_the_active_gate_keeps_one_kind_s_sessions_from_piling_onto_its_cached_deployment():
    # The load gate opened wide: the cached head alone decides, and every pi session goes where
    # the first one went (the in-flight peak of that deployment is every session's request).
    deps = deployments(3)

    async def sessions(affinity: SessionAffinity) -> Counter:
        warm, where = set(), Counter()
        for i in range(12):  # each session's first answer proves the head cached where it was before
            first = await turn(affinity, request("pi", i), deps, cached=8000 if warm else 0)
            assert await turn(affinity, request("pi", i), deps, cached=8000) == first
            warm.add(first)
            where[first] += 1
        return where

    wide = {"placement_absolute_slack": 1e9, "placement_relative_slack": 1e9}
    assert len(await sessions(make(placement_active_slack=1e9, **wide))) == 1
    # The active gate: a deployment more than one active session above the least active one
    # takes no new session, cached head or not.
    where = await sessions(make(placement_active_slack=1, **wide))
    assert len(where) == 3 and max(where.values()) - min(where.values()) <= 2, where


def test_a_first_answer_with_nothing_cached_keeps_the_head_it_just_prefilled():
    """A session's first request to a replica that held nothing of its head shows 0 cached
    tokens: the replica prefilled the head and holds it now. Only an answer that shows less than
    an earlier answer proved (the replica evicted, or keeps no prefixes) drops blocks."""
    index = placement.Index(placement.Gate())
    head = placement.head_blocks(PI)
    index.placed("a", head, 0.0, "s1")
    assert index.match("a", head) == len(head) and index.proven("a", head) == 0  # expected, not proven
    index.answered("a", head, 9000, 1.0, "s1", 0)  # its first answer: nothing was cached before it
    assert index.match("a", head) == index.proven("a", head) == len(head)
    # A second session's answer on the same replica shows the head cached: nothing changes.
    index.answered("a", head, 100, 2.0, "s2", len(head))
    assert index.proven("a", head) == len(head)
    # A later answer that shows only 2 blocks of what was proven: the rest is forgotten.
    index.answered("a", head, 7000, 3.0, "s3", 2)
    assert index.match("a", head) == index.proven("a", head) == 2
    assert placement.Index(index.gate, json.loads(json.dumps(index.record()))).record() == index.record()


async def test_through_the_gateway_a_kind_s_second_session_follows_a_head_proven_by_nothing_cached():
    # The load gate opened wide: the head alone decides where the second session goes.
    affinity, deps = make(placement_absolute_slack=1e9, placement_relative_slack=1e9), deployments(2)
    first = await turn(affinity, request("pi", 0), deps, cached=0)  # cold: the head prefilled there
    index, _ = await affinity.index("pool")
    head = head_blocks_of(request("pi", 0))
    assert index.proven(first, head) == len(head)
    # A server that keeps no prefixes: the next session goes there, and its answer shows 0 cached
    # where the index had proven the head: the head is forgotten there.
    assert await turn(affinity, request("pi", 1), deps, cached=0) == first
    index, _ = await affinity.index("pool")
    assert index.match(first, head) == 0


def test_the_active_gate_picks_the_least_active_replica_when_the_cached_one_is_too_far_over():
    head, other = placement.head_blocks(PI), placement.head_blocks(CC)
    for slack, over, expected in ((1, 1, "a"), (1, 2, "b"), (2, 2, "a"), (2, 3, "b")):
        index = placement.Index(placement.Gate(active_slack=slack, session_weight=0, relative_slack=1e9))
        index.routed("a", head, 9000, 0.0, "pi-0")  # a holds the pi head
        for n in range(1, 1 + over):
            index.routed("a", head, 100, 1.0, f"pi-{n}")
        index.routed("b", other, 9000, 1.0, "cc-0")  # b and c: one claude-code session each,
        index.routed("c", other, 9000, 1.0, "cc-1")  # c's on its second request
        index.routed("c", other, 500, 1.0, "cc-1")
        assert [index.active(r, 2.0) for r in "abc"] == [1 + over, 1, 1]
        # ``over`` sessions above the least active: within the slack, the cached head wins;
        # past it, a replica the active count allows (no head there: the least loaded, b).
        assert placement.choose("pi-new", head, ["a", "b", "c"], index, 2.0) == expected, (slack, over)
    # Once a's sessions fall silent for ``active_seconds``, they no longer count: a again.
    assert placement.choose("pi-new", head, ["a", "b", "c"], index, 2.0 + index.gate.active_seconds) == "a"


async def test_an_overloaded_deployment_sheds_a_session_only_at_its_idle_boundary():
    clock, events = Clock(), []
    affinity, deps = make(clock=clock, events=events), deployments(3)
    home = await turn(affinity, request("pi", 0), deps)
    for _ in range(60):  # a burst of answers from home: its decayed request count climbs past 2x the mean
        kwargs = {**request("cc", 99), "litellm_params": {"metadata": {}},
                  "standard_logging_object": {"model_group": "pool", "model_id": home}}
        await affinity.answered(kwargs, {"usage": {"prompt_tokens": 100}})
    clock.now += 30  # busy, not idle: it stays
    assert await turn(affinity, request("pi", 0), deps) == home
    clock.now += 400  # back after an idle gap: it moves, once, with its reason
    moved = await turn(affinity, request("pi", 0), deps)
    assert moved != home
    assert [(e["from"], e["to"], e["reason"]) for e in events] == [(home, moved, "overloaded")]
    clock.now += 10
    assert await turn(affinity, request("pi", 0), deps) == moved
    assert affinity.stats["affinity_moves_overloaded"] == 1


def test_an_idle_session_moves_when_its_replica_s_cache_has_dropped_it():
    gate = placement.Gate(cache_tokens=50_000)
    index = placement.Index(gate)
    head = placement.head_blocks(PI)
    index.routed("a", head, 9000, 0.0, "s1")
    clock_then = index.clock("a")
    assert placement.move("s1", "a", head, ["a", "b"], index, 400.0, 400.0, clock_then) is None  # still cached
    index.routed("a", placement.head_blocks(CC), 60_000, 400.0, "s2")  # 60k tokens of others since
    assert placement.move("s1", "a", head, ["a", "b"], index, 10.0 + 400, 10.0, clock_then) is None  # not idle
    assert placement.move("s1", "a", head, ["a", "b"], index, 800.0, 400.0, clock_then) == ("b", "expired")


async def test_a_removed_deployment_moves_its_sessions_and_leaves_the_index():
    clock, events = Clock(), []
    affinity, deps = make(clock=clock, events=events), deployments(3)
    home = {i: await turn(affinity, request("pi" if i % 2 else "cc", i), deps) for i in range(6)}
    index, _ = await affinity.index("pool")
    assert set(index.replicas) == {"dep-0", "dep-1", "dep-2"}
    fewer = [d for d in deps if d["model_info"]["id"] != "dep-2"]
    for i in range(6):
        kind = "pi" if i % 2 else "cc"
        assert await turn(affinity, request(kind, i), fewer) in ("dep-0", "dep-1")
    assert {e["reason"] for e in events} == {"failed"} and len(events) == sum(d == "dep-2" for d in home.values())
    clock.now += affinity.settings_of().placement_load_seconds + 1
    await turn(affinity, request("pi", 100), fewer)
    index, _ = await affinity.index("pool")
    assert set(index.replicas) == {"dep-0", "dep-1"}
    record = json.loads((await affinity.store.load(affinity._index_key("pool"))).journal)
    assert "dep-2" not in json.dumps(record) and affinity.stats["affinity_replicas_forgotten"] == 1


async def test_the_index_is_bounded():
    affinity, deps = make(), deployments(2)
    for i in range(40):  # 40 distinct long heads
        system = claude_code_prompt(random.Random(100 + i))
        req = chat_request(system, [{"role": "user", "content": f"task {i}"}], TOOLS, metadata={})
        await turn(affinity, req, deps)
    index, _ = await affinity.index("pool")
    assert all(len(r["b"]) <= placement.BLOCKS_PER_REPLICA for r in index.replicas.values())


async def _two_processes_place_alike(a: SessionAffinity, b: SessionAffinity, single: SessionAffinity) -> None:
    deps = deployments(2)
    order = [(kind, i) for i in range(4) for kind in ("pi", "cc")]
    shared = [await turn((a, b)[n % 2], request(kind, i), deps) for n, (kind, i) in enumerate(order)]
    alone = [await turn(single, request(kind, i), deps) for kind, i in order]
    assert shared == alone
    assert (await a.index("pool"))[0].record() == (await b.index("pool"))[0].record()
    for n, (kind, i) in enumerate(order):  # each process follows the other's pins
        assert await turn((b, a)[n % 2], request(kind, i), deps) == shared[n]


async def test_two_gateway_processes_over_one_store_agree():
    store = MemoryStore(1000, 3600)
    clock = Clock()
    await _two_processes_place_alike(make(store=store, clock=clock), make(store=store, clock=clock), make(clock=clock))


def test_the_fleet_example_configs_are_four_replicas_with_affinity_and_the_default_placement():
    import yaml

    config_dir = ROOT / "config"
    config = yaml.safe_load((config_dir / "proxy.fleet.yaml").read_text())
    assert Counter(m["model_name"] for m in config["model_list"]) == {"local": 4}
    assert len({m["model_info"]["id"] for m in config["model_list"]}) == 4
    assert config["router_settings"]["optional_pre_call_checks"] == ["session_affinity"]
    settings = Settings(**json.loads((config_dir / "litellm-prefix.fleet.json").read_text()))
    assert settings.store.startswith("redis://")
    for name in Settings.model_fields:  # the example spells out the defaults the benchmark chose
        if name.startswith("placement_"):
            assert getattr(settings, name) == Settings.model_fields[name].default, name
