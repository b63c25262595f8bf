"""CPU of one shared-store call while the event loop is busy: the wire client against the blocking one
and two maintained asyncio clients (coredis, valkey-glide).

A proxy under load runs its event loop flat out; each request makes one or two calls to the
shared store. This measures, on uvloop (the proxy's loop), 400 concurrent "requests" that
each burn 10 ms of CPU around one ``load`` of a session journal from a local redis-server
(from the virtualenv): the process CPU per request with no store call, with the call through
redis_wire (``store: redis://``), and with the call through redis-py's blocking client on
the store's worker threads (``store: proxy``), and with the same scripts through coredis (pure
Python on the loop, anyio) and valkey-glide (a Rust core on its own threads, answers handed to the
loop) when they are installed, and the store's cluster client (glide) on a real 3-node cluster.
Reported: the extra process CPU per call, and how much of it ran on the loop's thread, for
each of three rounds (the machine is shared: compare within a round), and each client's
store fallbacks (calls the store judged slow: with a healthy local Redis there should be none).

    .venv/bin/python -m bench.store_calls
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

from harness.procs import RedisServer
from litellm_prefix.fleet.store import MemoryStore, RedisStore, ResilientStore, WireRedisStore
from litellm_prefix.fleet.store.redis import _LOAD, _SAVE, _RedisLayout

ROOT = Path(__file__).resolve().parent.parent

REQUESTS = 400
BURN_MS = 5.0  # twice per request: LiteLLM's own work before and after the store call


def burn(ms: float) -> None:
    until, spin = time.thread_time() + ms / 1000, 0
    while time.thread_time() < until:
        for i in range(100):
            spin += i


async def measure(stores: dict[str, ResilientStore | None]) -> list[dict]:
    async def request(i: int, store: ResilientStore | None) -> None:
        burn(BURN_MS)
        if store is not None:
            await store.load(f"session-{i % 64}")
        await asyncio.sleep(0)
        burn(BURN_MS)

    for store in stores.values():  # connect, load the scripts, 64 sessions with a small journal
        if store is not None:
            for k in range(64):
                loaded = await store.load(f"session-{k}")
                if loaded.journal is None:
                    await store.save(f"session-{k}", loaded, json.dumps({"turns": k}))
    rounds = []
    for _ in range(3):
        row = {}
        for name, store in stores.items():
            process, thread = time.process_time(), time.thread_time()
            await asyncio.gather(*(request(i, store) for i in range(REQUESTS)))
            row[name] = (1000 * (time.process_time() - process) / REQUESTS,
                         1000 * (time.thread_time() - thread) / REQUESTS)
        base = row.pop("none")
        rounds.append({name: {"extra_cpu_ms_per_call": round(cpu - base[0], 3),
                              "on_loop_thread_ms": round(loop - base[1], 3)} for name, (cpu, loop) in row.items()})
        print(json.dumps(rounds[-1]), flush=True)
    return rounds


class CoredisStore(_RedisLayout):
    """The store's load and save through coredis (``async with store.client`` around its use)."""

    on_loop = True

    def __init__(self, url: str, ttl_seconds: int, timeout_seconds: float) -> None:
        import coredis

        super().__init__(ttl_seconds, "litellm-prefix:")
        self.client = coredis.Redis.from_url(url, decode_responses=True, stream_timeout=timeout_seconds,
                                             connect_timeout=timeout_seconds)
        self._load, self._save = self.client.register_script(_LOAD), self.client.register_script(_SAVE)

    async def load(self, key, held=()):
        return self._loaded(key, await self._load(keys=[self._journal_key(key)], args=self._load_args(held)))

    async def save(self, key, version, journal, refs, texts):
        return bool(await self._save(keys=[self._journal_key(key)],
                                     args=self._save_args(key, version, journal, refs, texts)))


class GlideStore(_RedisLayout):
    """The store's load and save through valkey-glide (bytes back: decoded here, as the store must)."""

    on_loop = True

    def __init__(self, client, ttl_seconds: int) -> None:
        from glide import Script

        super().__init__(ttl_seconds, "litellm-prefix:")
        self.client = client
        self._load, self._save = Script(_LOAD), Script(_SAVE)

    @classmethod
    async def create(cls, port: int, ttl_seconds: int, timeout_seconds: float) -> GlideStore:
        from glide import GlideClient, GlideClientConfiguration, NodeAddress

        config = GlideClientConfiguration([NodeAddress("127.0.0.1", port)],
                                          request_timeout=int(timeout_seconds * 1000))
        return cls(await GlideClient.create(config), ttl_seconds)

    async def load(self, key, held=()):
        got = await self.client.invoke_script(self._load, keys=[self._journal_key(key)],
                                              args=[str(a) for a in self._load_args(held)])
        if got:
            got = [g.decode("utf-8", "surrogatepass") if isinstance(g, bytes) else g for g in got]
        return self._loaded(key, got)

    async def save(self, key, version, journal, refs, texts):
        return bool(await self.client.invoke_script(self._save, keys=[self._journal_key(key)], args=[
            str(a) for a in self._save_args(key, version, journal, refs, texts)]))


async def run_all(server: RedisServer, stats: dict[str, Counter[str]], cluster=None) -> list[dict]:
    import contextlib

    def resilient(name: str, shared) -> ResilientStore:
        stats[name] = Counter()
        return ResilientStore(shared, MemoryStore(100, 600), 0.05, stats[name])

    stores: dict[str, ResilientStore | None] = {
        "none": None,
        "wire": resilient("wire", WireRedisStore(server.url, 600, 0.05)),
        "threads": resilient("threads", RedisStore.from_url(server.url, 600, 0.05)),
    }
    async with contextlib.AsyncExitStack() as stack:
        try:
            coredis_store = CoredisStore(server.url, 600, 0.05)
            await stack.enter_async_context(coredis_store.client)
            stores["coredis"] = resilient("coredis", coredis_store)
        except ImportError:
            pass
        try:
            stores["glide"] = resilient("glide", await GlideStore.create(server.port, 600, 0.05))
        except ImportError:
            pass
        if cluster is not None:  # the store's own cluster client (valkey-glide) on a 3-node cluster
            from litellm_prefix.fleet.store.cluster import ClusterStore

            stores["cluster"] = resilient("cluster", ClusterStore(cluster.url, 600, 0.05))
        return await measure(stores)


def main() -> None:
    import uvloop

    work = Path(tempfile.mkdtemp(prefix="litellm-prefix-store-calls-"))
    server = RedisServer(work)
    cluster = None
    try:
        try:
            import glide  # noqa: F401  (only whether it imports: the cluster is measured with valkey-glide installed)

            from harness.procs import RedisClusterServers

            cluster = RedisClusterServers(work)
        except ImportError:
            pass
        stats: dict[str, Counter[str]] = {}
        logging.getLogger("litellm_prefix").setLevel(logging.ERROR)  # counted below instead
        rounds = uvloop.run(run_all(server, stats, cluster))
        fallbacks = {name: counts["store_fallbacks"] for name, counts in stats.items()}
        kinds = {name: {k: v for k, v in counts.items() if k != "store_fallbacks"} for name, counts in stats.items()}
        print(f"by kind: {kinds}")
        print(f"store fallbacks in {3 * REQUESTS} calls each: {fallbacks}")
        out = ROOT / "bench" / "results" / "store_calls.json"
        out.write_text(json.dumps({"requests": REQUESTS, "burn_ms": 2 * BURN_MS, "rounds": rounds,
                                   "store_fallbacks": fallbacks,
                                   "store_failures_by_kind": kinds}, indent=2) + "\n")
        print(f"written to {out.relative_to(ROOT)}")
    finally:
        server.stop()
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
