"""Stores without a server: the memory store, and the resilient store's fault handling over
the fake shared store (``litellm_prefix/fleet/store/fake.py``: refused, slow and failing calls switched on by name,
a stepping clock). The same stores against a real redis-server: tests/integration/fleet/store/test_store.py.
"""
from __future__ import annotations

import asyncio
import sys
import time

import pytest

from harness.sessions import PiClient
from litellm_prefix.fleet.store import (
    BLOCKED_COOL_DOWN_SECONDS,
    DOWN_COOL_DOWN_SECONDS,
    SLOW_IN_A_ROW,
    Loaded,
    MemoryStore,
    RedisStore,
    ResilientStore,
    WireRedisStore,
)
from litellm_prefix.fleet.store.fake import FakeSharedStore, SteppingClock
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.settings import Settings

pytestmark = pytest.mark.anyio


def _redis_stabilizer(url: str, timeout_ms: int = 2000, io: str = "wire", **kwargs) -> Stabilizer:
    """A stabilizer on Redis: ``io="wire"`` the default client (redis_wire, on the event loop),
    ``io="threads"`` the blocking client on worker threads (a cluster or sentinel, ``store: proxy``)."""
    st = Stabilizer(Settings(path_check="absolute", store=url, store_timeout_ms=timeout_ms, **kwargs))
    assert isinstance(st.store.shared, WireRedisStore)
    st.store.clock = SteppingClock()  # a test skips a cool-down instead of sleeping through it
    if io == "threads":
        st.store.shared = RedisStore.from_url(url, st.settings.session_ttl_seconds, timeout_ms / 1000)
    return st


async def test_memory_store_compare_and_set():
    store = MemoryStore(10, 60)
    first = await store.load("k")
    assert (first.journal, first.version) == (None, 0)
    assert await store.save("k", first, "one", ["h"], {"h": "text"})
    assert not await store.save("k", first, "two")  # a second writer with a stale version loses
    again = await store.load("k")
    assert (again.journal, again.version, again.texts, again.refs) == ("one", 1, {"h": "text"}, frozenset({"h"}))
    assert await store.save("k", again, "two")
    await store.put_texts(None, {"g": "other"})
    assert await store.get_texts(None, ["g", "missing"]) == {"g": "other"}


async def test_memory_store_caps_sessions_lru():
    store = MemoryStore(2, 60)
    for key in ("a", "b", "c"):
        await store.save(key, Loaded(None, 0), key)
    assert len(store) == 2 and (await store.load("a")).journal is None


async def test_a_session_that_is_only_read_stays_alive_in_memory():
    now = [0.0]
    store = MemoryStore(10, 0.6, clock=lambda: now[0])
    await store.save("k", Loaded(None, 0), "journal")
    for _ in range(3):  # 0.9 s in all: past the TTL, but never 0.6 s without a read
        now[0] += 0.3
        assert (await store.load("k")).journal == "journal"
    now[0] += 0.7
    assert (await store.load("k")).journal is None


def _faulty_stabilizer(fake: FakeSharedStore | None = None, budget_ms: int = 50) -> tuple[Stabilizer, FakeSharedStore]:
    """A stabilizer whose shared store is the fake (``fake.fail[call] = "down" | "slow" | "error"``);
    several stabilizers given one fake are replicas sharing one store."""
    st = _redis_stabilizer("redis://127.0.0.1:1", timeout_ms=budget_ms)  # never connected: replaced
    fake = fake or FakeSharedStore(budget_ms / 1000)
    st.store.shared = fake
    return st, fake


async def test_one_slow_answer_costs_that_request_only():
    st, faulty = _faulty_stabilizer()
    client = PiClient(session=f"one-slow-{time.monotonic_ns()}")
    client.user("t0")
    await st.stabilize(client.request())
    faulty.fail["load"] = "slow"
    client.user("t1")
    out = await st.stabilize(client.request())
    assert out["messages"][-1] == {"role": "user", "content": "t1"}  # served from local state
    del faulty.fail["load"]
    assert (st.stats["store_slow"], st.stats["store_skipped"]) == (1, 0)
    loads = faulty.calls["load"]
    for turn in (2, 3):  # the very next requests use Redis again: no proxy-wide switch to local state
        client.user(f"t{turn}")
        await st.stabilize(client.request())
    assert faulty.calls["load"] == loads + 2 and st.stats["store_fallbacks"] == 1


async def test_slow_answers_in_a_row_skip_redis_briefly_and_refused_connections_longer():
    st, faulty = _faulty_stabilizer()
    store: ResilientStore = st.store
    faulty.fail["*"] = "slow"
    for _ in range(SLOW_IN_A_ROW):
        await store.load("any")
    assert 0 < store.cool_down_left <= BLOCKED_COOL_DOWN_SECONDS  # blocked: the whole store cools down, briefly
    loads, skipped = faulty.calls["load"], st.stats["store_skipped"]
    loaded = await store.load("any")
    # skipped, no wait: the store was not asked (a slow answer is the only wait there is), local state answered
    assert faulty.calls["load"] == loads and st.stats["store_skipped"] == skipped + 1 and loaded.source == "local"
    store.clock.skip(BLOCKED_COOL_DOWN_SECONDS)
    faulty.fail["*"] = "down"
    await store.load("any")  # one refused connection: whole store, the longer cool-down
    assert BLOCKED_COOL_DOWN_SECONDS < store.cool_down_left <= DOWN_COOL_DOWN_SECONDS
    assert st.stats["store_down"] == 1 and st.stats["store_slow"] == SLOW_IN_A_ROW


async def test_a_load_from_local_state_is_never_saved_to_redis():
    """Shared version 1 and local version 1 name different journals: a save after a local load
    goes to local state even when Redis answers again in between."""
    st, faulty = _faulty_stabilizer()
    store: ResilientStore = st.store
    key = f"mix-{time.monotonic_ns()}"
    assert await store.save(key, await store.load(key), '{"shared":1}') is True
    faulty.fail["load"] = "down"
    local = await store.load(key)
    assert local.source == "local" and local.journal == '{"shared":1}'  # the mirror of the last shared state
    while faulty.stored(key)[1] < local.version:  # another replica moves Redis on to the same number
        assert faulty.put(key, f'{{"shared":{faulty.stored(key)[1] + 1}}}')
    newer = faulty.stored(key)[:2]
    assert newer[1] == local.version
    faulty.fail.clear()
    store.clock.skip(store.cool_down_left)
    assert await store.save(key, local, '{"local":1}') is True  # recorded, but locally
    assert faulty.stored(key)[:2] == newer  # Redis untouched
    again = await store.load(key)  # Redis is back: its journal wins, the local one is dropped
    assert (again.source, again.journal) == ("shared", newer[0])


async def test_a_load_from_redis_whose_save_fails_is_not_saved_locally():
    st, faulty = _faulty_stabilizer()
    store: ResilientStore = st.store
    key = f"mix2-{time.monotonic_ns()}"
    loaded = await store.load(key)
    assert loaded.source == "shared"
    faulty.fail["save"] = "slow"
    assert await store.save(key, loaded, '{"lost":1}') is None
    assert (await store.local.load(key)).journal is None and faulty.stored(key)[0] is None


async def test_a_restore_redis_does_not_answer_runs_on_local_state():
    st, faulty = _faulty_stabilizer()
    store: ResilientStore = st.store
    key = f"restore-{time.monotonic_ns()}"
    assert await store.save(key, await store.load(key), '{"kept":1}', ("h1",), {"h1": "text one"})
    faulty._journals.clear()  # Redis comes back empty
    faulty._texts.clear()
    faulty.fail["save"] = "down"
    loaded = await store.load(key)
    assert (loaded.source, loaded.journal, loaded.texts) == ("local", '{"kept":1}', {"h1": "text one"})
    assert st.stats["store_restored"] == 0 and st.stats["store_down"] == 1 and faulty.stored(key)[0] is None
    faulty.fail.clear()
    store.clock.skip(store.cool_down_left)
    loaded = await store.load(key)  # Redis answers again: the journal and its text go back
    assert (loaded.source, loaded.journal, loaded.version) == ("shared", '{"kept":1}', 1)
    assert st.stats["store_restored"] == 1 and faulty.stored(key) == ('{"kept":1}', 1, ("h1",), {"h1": "text one"})


async def test_a_replica_back_from_local_state_keeps_newer_shared_decisions():
    """Replica A loses Redis and serves a turn from local state (snapshotting memory that
    now holds a new entry); replica B keeps the shared journal. When A is back, it sends
    the shared decision, and Redis still holds B's snapshot: A's outage decision was dropped."""
    a, faulty = _faulty_stabilizer()
    b, _ = _faulty_stabilizer(faulty)  # the other replica; failures are switched on for A's calls only
    client = PiClient(memory=["A fact", "B fact"], session=f"back-{time.monotonic_ns()}")
    client.user("t0")
    head0 = (await b.stabilize(client.request()))["messages"][0]
    client.assistant()
    faulty.fail["*"] = "down"
    client.memory.append("C fact")
    client.user("t1")
    head1 = (await a.stabilize(client.request()))["messages"][0]
    faulty.fail.clear()
    assert "C fact" in head1["content"] and a.stats["store_down"] == 1  # A alone, from local state
    client.assistant()
    client.user("t2")
    head2 = (await b.stabilize(client.request()))["messages"][0]
    assert head2 == head0  # B: the shared snapshot, the write is not re-rendered
    client.assistant()
    a.store.clock.skip(a.store.cool_down_left)
    client.user("t3")
    head3 = (await a.stabilize(client.request()))["messages"][0]
    assert head3 == head0 and a.stats["store_fallbacks"] == 1
    fresh, _ = _faulty_stabilizer(faulty)  # what Redis holds now
    client.assistant()
    client.user("t4")
    assert (await fresh.stabilize(client.request()))["messages"][0] == head0


async def test_store_proxy_without_redis_falls_back_to_memory(monkeypatch, caplog):
    import types

    fake = types.ModuleType("litellm.proxy.proxy_server")
    fake.redis_usage_cache = None
    monkeypatch.setitem(sys.modules, "litellm.proxy.proxy_server", fake)
    st = Stabilizer(Settings(path_check="absolute", store="proxy"))
    client = PiClient()
    client.user("hi")
    out = await st.stabilize(client.request())
    assert out["messages"][-1] == {"role": "user", "content": "hi"}
    assert st.stats["store_fallbacks"] >= 1 and "shared store unavailable" in caplog.text


async def test_errors_in_a_row_cool_down_instead_of_logging_every_call(caplog):
    st, faulty = _faulty_stabilizer()
    store: ResilientStore = st.store
    faulty.fail["load"] = "error"  # a refused command, as a CROSSSLOT would be
    for _ in range(SLOW_IN_A_ROW + 5):
        assert (await store.load("any")).source == "local"
    assert st.stats["store_error"] == SLOW_IN_A_ROW and st.stats["store_skipped"] == 5
    assert caplog.text.count("litellm-prefix: shared store") == SLOW_IN_A_ROW  # 2 call lines, then the outage once


async def test_litellms_circuit_breaker_error_is_a_store_that_is_down():
    """LiteLLM's own Redis client refuses calls for a while after failures
    (``RedisCircuitBreakerOpenError``): the request uses local state and the store cools down as
    for a refused connection."""
    from litellm.caching.redis_cache import RedisCircuitBreakerOpenError

    st, faulty = _faulty_stabilizer()
    store: ResilientStore = st.store
    faulty.fail["load"] = RedisCircuitBreakerOpenError("breaker open")
    assert (await store.load("breaker")).source == "local"
    assert st.stats["store_down"] == 1 and BLOCKED_COOL_DOWN_SECONDS < store.cool_down_left <= DOWN_COOL_DOWN_SECONDS
    store.clock.skip(store.cool_down_left)
    faulty.fail.clear()
    assert (await store.load("breaker")).source == "shared"


async def test_calls_caught_together_in_one_short_stall_cost_only_themselves():
    """Several calls in flight during one stall all time out at once: each falls back, the
    store stays in use (a blocked Redis shows as failures that go on for longer)."""
    st, faulty = _faulty_stabilizer()
    store: ResilientStore = st.store
    faulty.fail["load"] = "slow"
    await asyncio.gather(*(store.load(f"stall-{i}") for i in range(SLOW_IN_A_ROW + 2)))
    assert st.stats["store_slow"] == SLOW_IN_A_ROW + 2 and store.cool_down_left == 0
    faulty.fail.clear()
    assert (await store.load("stall-after")).source == "shared"
