"""``store: proxy``: the LiteLLM proxy's own Redis settings (``redis_usage_cache``), looked up at
first use: a cluster (``startup_nodes``) through ``ClusterStore``, anything else (a single Redis,
Sentinel, IAM) through LiteLLM's own client builder, as a ``RedisStore`` on worker threads.
"""
from __future__ import annotations

from typing import Any

from .cipher import Cipher
from .redis import RedisStore


def _proxy_redis(ttl_seconds: int, timeout_seconds: float, cipher: Cipher | None = None) -> Any:
    """A client for the LiteLLM proxy's own Redis (``redis_usage_cache``), when it has one: a
    cluster (``startup_nodes``) through the cluster store, anything else (a single Redis,
    Sentinel, IAM) through LiteLLM's own client builder."""
    import sys
    from urllib.parse import quote

    proxy_server = sys.modules.get("litellm.proxy.proxy_server")
    cache = getattr(proxy_server, "redis_usage_cache", None)
    if cache is None:
        return None
    settings = dict(getattr(cache, "redis_kwargs", {}) or {})
    if settings.get("startup_nodes"):
        from .cluster import ClusterStore  # valkey-glide: imported only for a cluster

        user, password = settings.get("username") or "", settings.get("password") or ""
        auth = f"{quote(user, safe='')}:{quote(password, safe='')}@" if password else ""
        nodes = ",".join(f"{n['host']}:{n['port']}" for n in settings["startup_nodes"])
        scheme = "rediss+cluster" if settings.get("ssl") else "redis+cluster"
        return ClusterStore(f"{scheme}://{auth}{nodes}", ttl_seconds, timeout_seconds, cipher=cipher)
    from litellm._redis import get_redis_client

    # The proxy's connection settings, with this store's own budget and retry policy.
    options = RedisStore.client_options(timeout_seconds)
    kwargs = {k: v for k, v in dict(getattr(cache, "redis_kwargs", {}) or {}).items()
              if k not in options and k not in ("connection_pool", "max_connections")}
    return RedisStore(get_redis_client(**kwargs, **options), ttl_seconds, cipher=cipher)


class LazyProxyStore:
    """``store: proxy``: the proxy's Redis, looked up at first use (the proxy sets it up after callbacks load)."""

    name = "redis"

    def __init__(self, ttl_seconds: int, timeout_seconds: float, cipher: Cipher | None = None) -> None:
        self.ttl = ttl_seconds
        self.timeout = timeout_seconds
        self.cipher = cipher
        self._store: Any = None

    def _resolve(self) -> Any:
        if self._store is None:
            self._store = _proxy_redis(self.ttl, self.timeout, self.cipher)
            if self._store is None:
                raise ConnectionError("the proxy has no Redis configured")
        return self._store

    # Asked inside the resilient store's failure handling: no Redis configured is a store that is down.
    @property
    def on_loop(self) -> bool:
        return self._resolve().on_loop

    @property
    def texts_per_session(self) -> bool:
        return self._resolve().texts_per_session

    def load(self, key, held=()):
        return self._resolve().load(key, held)

    def save(self, key, version, journal, refs, texts):
        return self._resolve().save(key, version, journal, refs, texts)

    def get_texts(self, hashes, key=None):
        return self._resolve().get_texts(hashes, key)

    def put_texts(self, texts, key=None):
        return self._resolve().put_texts(texts, key)

