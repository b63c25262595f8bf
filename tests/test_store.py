"""Stores: memory and a real Redis; compare-and-set, resume in a new process, faults."""
from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from sessions import NOTIFICATION, PiClient, removed

from litellm_prefix.core import Stabilizer
from litellm_prefix.settings import Settings
from litellm_prefix.store import MemoryStore, RedisStore, ResilientStore

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent


async def test_memory_store_compare_and_set():
    store = MemoryStore(10, 60)
    assert await store.load("k") == (None, 0)
    assert await store.save("k", 0, "one")
    assert not await store.save("k", 0, "two")  # a second writer with a stale version loses
    assert await store.load("k") == ("one", 1)
    assert await store.save("k", 1, "two")
    await store.put_texts({"h": "text"})
    assert await store.get_texts(["h", "missing"]) == {"h": "text"}


async def test_memory_store_caps_sessions_lru():
    store = MemoryStore(2, 60)
    for key in ("a", "b", "c"):
        await store.save(key, 0, key)
    assert len(store) == 2 and (await store.load("a")) == (None, 0)


async def test_redis_store_compare_and_set_and_texts(redis_server):
    store = RedisStore.from_url(redis_server.url, 60, 1.0)
    key = f"cas-{time.monotonic_ns()}"
    assert await store.load(key) == (None, 0)
    assert await store.save(key, 0, '{"v":1}')
    assert not await store.save(key, 0, '{"v":1,"n":9}')
    assert await store.load(key) == ('{"v":1}', 1)
    await store.put_texts({"abc": "section text"})
    assert await store.get_texts(["abc", "nope"]) == {"abc": "section text"}
    assert int(redis_server.command("TTL", f"litellm-prefix:j:{key}").split(b"\r\n")[0][1:]) > 0
    await store.client.aclose()


def _session_requests():
    """A pi session with a notification-run flip and a memory deletion; yields each turn's request."""
    client = PiClient(memory=["A fact", "B fact"], extensions={"todo": "- [ ] a"}, session="resume-me")
    for turn in range(8):
        if turn == 3:
            client.user(NOTIFICATION)
            client.system(removed("todo"))
        else:
            client.user(f"typed {turn}")
        if turn == 5:
            client.memory.remove("A fact")
        yield client.request()
        client.assistant()


async def test_concurrent_requests_of_one_session_keep_one_consistent_journal(redis_server):
    st = Stabilizer(Settings(path_check="absolute", store=redis_server.url, store_timeout_ms=2000))
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
sys.path.insert(0, "tests")
from test_store import _session_requests
from litellm_prefix.core import Stabilizer
from litellm_prefix.settings import Settings
import asyncio
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
    st = Stabilizer(Settings(path_check="absolute", store=redis_server.url, store_timeout_ms=2000))
    in_process = [(await st.stabilize(r))["messages"] for r in _session_requests()]
    # A fresh process (a restarted or second replica) replays turns 4..7 from Redis alone.
    done = subprocess.run([sys.executable, "-c", RESUME_SCRIPT, redis_server.url, "4"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == in_process[4:]
    assert any("Memory correction" in str(m.get("content")) for m in in_process[-1])
    assert all(removed("todo") != m.get("content") for m in in_process[-1])


class _Slow:
    def __init__(self, inner, delay):
        self.inner, self.delay = inner, delay

    def __getattr__(self, name):
        async def call(*args):
            await asyncio.sleep(self.delay)
            return await getattr(self.inner, name)(*args)
        return call


async def test_slow_shared_store_falls_back_within_the_budget():
    stats: Counter[str] = Counter()
    store = ResilientStore(_Slow(MemoryStore(10, 60), 1.0), MemoryStore(10, 60), 0.05, stats)
    st = Stabilizer(Settings(path_check="absolute"), store=store)
    st.stats = stats
    client = PiClient(memory=["A"])
    client.user("hi")
    started = time.monotonic()
    out = await st.stabilize(client.request())
    assert time.monotonic() - started < 0.5  # one budget, then the cool-down skips the slow store
    assert out["messages"][1] == {"role": "user", "content": "hi"}
    assert stats["store_fallbacks"] >= 1 and st.stats["errors"] == 0


async def test_redis_stopped_mid_run_and_restarted(tmp_path, caplog):
    from procs import RedisServer

    server = RedisServer(tmp_path)
    try:
        st = Stabilizer(Settings(path_check="absolute", store=server.url, store_timeout_ms=200))
        requests = list(_session_requests())
        outs = [(await st.stabilize(copy.deepcopy(r)))["messages"] for r in requests[:3]]
        server.stop()
        outs += [(await st.stabilize(copy.deepcopy(r)))["messages"] for r in requests[3:5]]  # Redis down
        assert st.stats["store_fallbacks"] > 0 and st.stats["errors"] == 0
        assert "shared store unavailable" in caplog.text
        server.start()
        st.store._down_until = 0  # skip the cool-down instead of sleeping through it
        outs += [(await st.stabilize(copy.deepcopy(r)))["messages"] for r in requests[5:]]
        assert len(outs) == len(requests)
        for request, out in zip(requests, outs):  # nothing lost, in every phase
            assert [m for m in out if m["role"] in ("user", "assistant", "tool")] == [
                m for m in request["messages"] if m["role"] in ("user", "assistant", "tool")]
        assert "shared store answers again" in caplog.text
    finally:
        server.stop()


async def test_redis_answering_slowly(redis_server):
    st = Stabilizer(Settings(path_check="absolute", store=redis_server.url, store_timeout_ms=100))
    client = PiClient(session=f"slow-{time.monotonic_ns()}")
    client.user("hi")
    await st.stabilize(client.request())
    import threading

    sleeper = threading.Thread(target=redis_server.command, args=("DEBUG", "SLEEP", "1.5"))
    sleeper.start()
    try:
        await asyncio.sleep(0.2)
        client.user("again")
        started = time.monotonic()
        out = await st.stabilize(client.request())
        assert time.monotonic() - started < 0.8
        assert out["messages"][-1] == {"role": "user", "content": "again"}
        assert st.stats["store_fallbacks"] >= 1 and st.stats["errors"] == 0
    finally:
        sleeper.join(timeout=10)


async def test_store_proxy_uses_the_proxys_own_redis(redis_server, monkeypatch):
    import types

    import redis.asyncio as redis

    class FakeRedisCache:  # stands in for litellm's RedisCache (redis_usage_cache)
        def init_async_client(self):
            return redis.Redis.from_url(redis_server.url, decode_responses=True)

    fake = types.ModuleType("litellm.proxy.proxy_server")
    fake.redis_usage_cache = FakeRedisCache()
    monkeypatch.setitem(sys.modules, "litellm.proxy.proxy_server", fake)
    st = Stabilizer(Settings(path_check="absolute", store="proxy", store_timeout_ms=2000))
    client = PiClient(session=f"proxy-store-{time.monotonic_ns()}")
    client.user("hi")
    await st.stabilize(client.request())
    keys = redis_server.command("KEYS", "litellm-prefix:j:*")
    assert b"litellm-prefix:j:" in keys and st.stats["store_fallbacks"] == 0


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
