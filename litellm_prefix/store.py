"""Where journals live: in memory (default) or in Redis (shared by proxy replicas).

Interface (all async): ``load(key) -> (journal JSON or None, version)``,
``save(key, version, journal JSON) -> bool`` (compare-and-set: False when another request
of the session saved first), ``get_texts(hashes)`` and ``put_texts(texts)`` for the
content-addressed section texts that journals refer to.

- ``MemoryStore``: cachetools LRU + TTL for journals (``maxSessions``,
  ``sessionTtlSeconds``); texts in one shared LRU bounded in bytes (identical sections
  of many sessions are stored once).
- ``RedisStore``: one hash per session (``v`` version, ``j`` JSON) updated by a Lua
  compare-and-set; texts under their own keys with the session TTL.
- ``ResilientStore``: every call to the shared store gets a small time budget
  (``storeTimeoutMs``). On a timeout or error it falls back to local state, logs once
  per outage, counts, and leaves the shared store alone for a short cool-down. The
  request never waits longer than the budget and never fails because of the store.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any, Protocol

from cachetools import LRUCache, TTLCache

logger = logging.getLogger("litellm_prefix")

TEXT_CACHE_BYTES = 256 * 1024 * 1024
COOL_DOWN_SECONDS = 5.0


class Store(Protocol):
    async def load(self, key: str) -> tuple[str | None, int]: ...

    async def save(self, key: str, version: int, journal: str) -> bool: ...

    async def get_texts(self, hashes: Iterable[str]) -> dict[str, str]: ...

    async def put_texts(self, texts: dict[str, str]) -> None: ...


class MemoryStore:
    name = "memory"

    def __init__(self, max_sessions: int, ttl_seconds: float, text_bytes: int = TEXT_CACHE_BYTES) -> None:
        self._journals: TTLCache[str, tuple[int, str]] = TTLCache(maxsize=max_sessions, ttl=ttl_seconds)
        self._texts: LRUCache[str, str] = LRUCache(maxsize=text_bytes, getsizeof=lambda text: len(text) + 64)
        self._lock = threading.Lock()

    async def load(self, key: str) -> tuple[str | None, int]:
        with self._lock:
            entry = self._journals.get(key)
        return (entry[1], entry[0]) if entry else (None, 0)

    async def save(self, key: str, version: int, journal: str) -> bool:
        with self._lock:
            entry = self._journals.get(key)
            if (entry[0] if entry else 0) != version:
                return False
            self._journals[key] = (version + 1, journal)
            return True

    async def get_texts(self, hashes: Iterable[str]) -> dict[str, str]:
        with self._lock:
            return {h: self._texts[h] for h in hashes if h in self._texts}

    async def put_texts(self, texts: dict[str, str]) -> None:
        with self._lock:
            for digest, text in texts.items():
                if len(text) + 64 <= self._texts.maxsize:
                    self._texts[digest] = text

    def journal_bytes(self) -> list[int]:
        with self._lock:
            return [len(j) for _, j in self._journals.values()]

    def __len__(self) -> int:
        return len(self._journals)


_CAS = """
local current = redis.call('HGET', KEYS[1], 'v')
if (current or '0') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'j', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""


class RedisStore:
    name = "redis"

    def __init__(self, client: Any, ttl_seconds: int, prefix: str = "litellm-prefix:") -> None:
        self.client = client
        self.ttl = int(ttl_seconds)
        self.prefix = prefix
        self._cas = client.register_script(_CAS)

    @classmethod
    def from_url(cls, url: str, ttl_seconds: int, timeout_seconds: float) -> "RedisStore":
        import redis.asyncio as redis

        client = redis.Redis.from_url(
            url, socket_timeout=timeout_seconds, socket_connect_timeout=timeout_seconds, decode_responses=True
        )
        return cls(client, ttl_seconds)

    async def load(self, key: str) -> tuple[str | None, int]:
        version, journal = await self.client.hmget(f"{self.prefix}j:{key}", "v", "j")
        return (journal, int(version)) if version is not None else (None, 0)

    async def save(self, key: str, version: int, journal: str) -> bool:
        stored = await self._cas(keys=[f"{self.prefix}j:{key}"], args=[str(version), str(version + 1), journal, self.ttl])
        return bool(stored)

    async def get_texts(self, hashes: Iterable[str]) -> dict[str, str]:
        hashes = list(hashes)
        if not hashes:
            return {}
        values = await self.client.mget([f"{self.prefix}t:{h}" for h in hashes])
        return {h: v for h, v in zip(hashes, values) if v is not None}

    async def put_texts(self, texts: dict[str, str]) -> None:
        if not texts:
            return
        pipe = self.client.pipeline(transaction=False)
        for digest, text in texts.items():
            pipe.set(f"{self.prefix}t:{digest}", text, ex=self.ttl)
        await pipe.execute()


class ResilientStore:
    """A shared store with a time budget per call and local state as the fallback."""

    name = "resilient"

    def __init__(self, shared: Any, local: MemoryStore, timeout_seconds: float, stats: Counter[str]) -> None:
        self.shared = shared
        self.local = local
        self.timeout = timeout_seconds
        self.stats = stats
        self._down_until = 0.0
        self._outage_logged = False

    def _available(self) -> bool:
        return time.monotonic() >= self._down_until

    async def _call(self, method: str, *args: Any) -> Any:
        if self._available():
            try:
                result = await asyncio.wait_for(getattr(self.shared, method)(*args), self.timeout)
            except Exception as exc:  # timeout, connection refused, script error: all fall back
                self.stats["store_fallbacks"] += 1
                self._down_until = time.monotonic() + COOL_DOWN_SECONDS
                if not self._outage_logged:
                    self._outage_logged = True
                    logger.warning(
                        "litellm-prefix: shared store unavailable (%s); using local state for %.0f s at a time "
                        "until it answers again", type(exc).__name__, COOL_DOWN_SECONDS,
                    )
            else:
                if self._outage_logged:
                    self._outage_logged = False
                    logger.warning("litellm-prefix: shared store answers again")
                return result
        else:
            self.stats["store_fallbacks"] += 1
        return await getattr(self.local, method)(*args)

    async def load(self, key: str) -> tuple[str | None, int]:
        return await self._call("load", key)

    async def save(self, key: str, version: int, journal: str) -> bool:
        return await self._call("save", key, version, journal)

    async def get_texts(self, hashes: Iterable[str]) -> dict[str, str]:
        return await self._call("get_texts", list(hashes))

    async def put_texts(self, texts: dict[str, str]) -> None:
        await self._call("put_texts", texts)


def _proxy_redis(ttl_seconds: int) -> RedisStore | None:
    """The LiteLLM proxy's own Redis (``redis_usage_cache``), when the proxy has one configured."""
    import sys

    proxy_server = sys.modules.get("litellm.proxy.proxy_server")
    cache = getattr(proxy_server, "redis_usage_cache", None)
    if cache is None:
        return None
    client = cache.init_async_client()
    return RedisStore(client, ttl_seconds)


class LazyProxyStore:
    """``store: proxy``: the proxy's Redis, looked up at first use (the proxy sets it up after callbacks load)."""

    def __init__(self, ttl_seconds: int) -> None:
        self.ttl = ttl_seconds
        self._store: Any = None

    def _resolve(self) -> Any:
        if self._store is None:
            self._store = _proxy_redis(self.ttl)
            if self._store is None:
                raise ConnectionError("the proxy has no Redis configured")
        return self._store

    async def load(self, key):
        return await self._resolve().load(key)

    async def save(self, key, version, journal):
        return await self._resolve().save(key, version, journal)

    async def get_texts(self, hashes):
        return await self._resolve().get_texts(hashes)

    async def put_texts(self, texts):
        return await self._resolve().put_texts(texts)


def build_store(settings: Any, stats: Counter[str]) -> tuple[Any, MemoryStore]:
    """(the store to use, the local memory store) for these settings."""
    local = MemoryStore(settings.max_sessions, settings.session_ttl_seconds)
    if settings.store == "memory":
        return local, local
    timeout = settings.store_timeout_ms / 1000
    if settings.store == "proxy":
        shared: Any = LazyProxyStore(settings.session_ttl_seconds)
    else:
        shared = RedisStore.from_url(settings.store, settings.session_ttl_seconds, timeout)
    return ResilientStore(shared, local, timeout, stats), local
