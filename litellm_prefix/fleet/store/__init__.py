"""Where journals live: in memory (default) or in Redis (shared by proxy replicas).

The interface the transform and affinity use is ``Store`` (``base``): ``load``, a
compare-and-set ``save`` to the store that answered the load, ``get_texts`` and
``put_texts``, all async, around the ``Loaded`` record.

Texts are content-addressed (a hash names exactly one text), so any copy of a text is a
correct copy: each process keeps the texts it saw in a local LRU and tells Redis which of
the journal's texts it already holds, so a load transfers only the texts it lacks.

- ``memory``: ``MemoryStore``, cachetools LRU + TTL for journals (``maxSessions``,
  ``sessionTtlSeconds``); texts in one shared LRU bounded in bytes (identical sections
  of many sessions are stored once).
- ``redis``: one hash per session (``v`` version, ``j`` journal JSON, ``r`` the hashes of the
  texts it refers to), texts under their own keys. Two Lua scripts, so a request costs at
  most two round trips: ``load`` (journal plus the referred texts the caller lacks) and
  ``save`` (compare-and-set plus the new texts, refreshing the TTL of every text the
  journal refers to). Two clients run the same scripts: ``WireRedisStore`` (``store:
  redis://``, ``rediss://``, ``unix://``: ``redis_wire``, on the proxy's event loop) and
  ``RedisStore`` (redis-py's blocking client on worker threads: ``store: proxy`` and URLs
  ``redis_wire`` does not serve).
- Redis deployments, by the ``store`` URL (``kind_of``):

  | URL | client | keys |
  |---|---|---|
  | ``redis[s]://``, ``unix://`` | ``WireRedisStore`` (``redis_wire``, on the loop) | ``j:<session>``, ``t:<digest>`` |
  | ``redis+sentinel://h:p[,h:p]/service[/db]`` | ``RedisStore`` (redis-py's Sentinel, worker threads) | the same |
  | ``redis+cluster://h:p[,h:p]`` | ``ClusterStore`` (valkey-glide, Rust core) | ``j:{<session>}``, ``t:{<session>}:<digest>`` |
  | ``proxy`` | ``LazyProxyStore``: LiteLLM's own Redis settings (below) | as above |

  ``store: proxy`` takes a cluster in LiteLLM's settings (``startup_nodes``) through
  ``ClusterStore``, anything else through LiteLLM's client builder on worker threads.

  In a cluster a script may only touch keys of one hash slot. Every key of a session carries
  the session's hash tag, so both scripts run in its slot and a request still costs one load
  and at most one save. Texts are therefore kept per session: the one cross-session case (a
  derived session's journal seeded from its first request's key) carries the texts it lacks
  on its first save, from this process's local copies (``SharedStore.texts_per_session``).
  ``get_texts``/``put_texts`` take the session key (``Loaded.key``) to find them.
  Measured per call on a busy loop (``bench/store_calls.py``): redis_wire about half the
  process CPU of glide and of redis-py's threads; coredis, whose timeout is a timer on the
  loop, abandoned healthy calls and is not used.
- ``resilient``: ``ResilientStore``, Redis with local state as the fallback; see its
  docstring for the time budget and what a cool-down covers. Failures are classified by
  exception class name (redis-py's, glide's, LiteLLM's ``RedisCircuitBreakerOpenError``).
- ``cipher``: every value the shared store writes, sealed at rest when a key is configured.
- ``fake``: an in-memory shared store with switchable failures, for tests.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from .base import STORE_THREADS, Loaded, SharedStore, Store, StoredJournal, journal_text_refs
from .cipher import Cipher
from .memory import TEXT_CACHE_BYTES, MemoryStore
from .proxy import LazyProxyStore
from .redis import RedisStore, WireRedisStore
from .resilient import BLOCKED_COOL_DOWN_SECONDS, DOWN_COOL_DOWN_SECONDS, SLOW_IN_A_ROW, ResilientStore

__all__ = [
    "BLOCKED_COOL_DOWN_SECONDS", "DOWN_COOL_DOWN_SECONDS", "SLOW_IN_A_ROW", "STORE_THREADS", "TEXT_CACHE_BYTES",
    "LazyProxyStore", "Loaded", "MemoryStore", "RedisStore", "ResilientStore", "SharedStore", "Store",
    "StoredJournal", "WireRedisStore", "build_store", "journal_text_refs",
]


def kind_of(url: str) -> str:
    """``cluster`` (``redis+cluster://``), ``sentinel`` (``redis+sentinel://``) or ``single``."""
    scheme = url.split("://", 1)[0].lower()
    if scheme.endswith("+cluster"):
        return "cluster"
    if scheme.endswith("+sentinel"):
        return "sentinel"
    return "single"


def build_store(settings: Any, stats: Counter[str]) -> tuple[Store, MemoryStore]:
    """(the store to use, the local memory store) for these settings."""
    from . import redis_wire

    local = MemoryStore(settings.max_sessions, settings.session_ttl_seconds)
    if settings.store == "memory":
        return local, local
    timeout = settings.store_timeout_ms / 1000
    cipher = Cipher.from_env()  # raises KeyConfigError, naming the variable, for a malformed key
    shared: SharedStore
    if settings.store == "proxy":
        shared = LazyProxyStore(settings.session_ttl_seconds, timeout, cipher)
    elif redis_wire.supported(settings.store):
        shared = WireRedisStore(settings.store, settings.session_ttl_seconds, timeout, cipher=cipher)
    elif kind_of(settings.store) == "cluster":
        from .cluster import ClusterStore

        shared = ClusterStore(settings.store, settings.session_ttl_seconds, timeout, cipher=cipher)
    elif kind_of(settings.store) == "sentinel":
        shared = RedisStore.from_sentinel_url(settings.store, settings.session_ttl_seconds, timeout, cipher)
    else:
        shared = RedisStore.from_url(settings.store, settings.session_ttl_seconds, timeout, cipher)
    return ResilientStore(shared, local, timeout, stats), local
