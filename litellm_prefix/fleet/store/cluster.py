"""Redis Cluster (or Valkey Cluster) through valkey-glide, on the caller's event loop.

Every key of a session carries its hash tag (``j:{session}``, ``t:{session}:<digest>``), so
the load and save scripts touch one hash slot, and a request costs the same round trips as
on a single Redis: one load, at most one save. Texts are kept per session rather than once
for all sessions: a cluster cannot run a script over keys of several slots, and a second,
per-slot fetch would add a round trip to a cold load. A session's head is stored once per
session, not once per cluster; a journal seeded from another session's (a derived session's
second request) carries the texts it refers to on its first save (``texts_per_session``).

glide's I/O and its request timeout (the store's budget) run in its Rust core, off the event
loop: a busy loop does not make a healthy cluster look slow (``bench/store_calls.py``). The
client follows the cluster's topology (MOVED, a failed-over primary) by itself. One client
per event loop (and per process: glide's core does not survive a fork).
"""
from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlparse

from .base import StoredJournal
from .cipher import Cipher
from .redis import _LOAD, _SAVE, _RedisLayout, host_list

# KEYS: text keys of one session (one slot). ARGV[1]: TTL; ARGV[2..]: the texts, in KEYS' order.
_PUT = """
for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[i + 1], 'EX', ARGV[1]) end
return 1
"""


def cluster_nodes(url: str) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """(seed nodes, options) of ``redis+cluster://[user:pass@]h:p,h:p[?tls=1]`` (``valkey+cluster``
    and ``rediss+cluster`` alike)."""
    parsed = urlparse(url)
    userinfo, _, hosts = parsed.netloc.rpartition("@")
    nodes = host_list(hosts, 6379)
    user, _, password = userinfo.partition(":") if userinfo else ("", "", "")
    query = dict(p.split("=", 1) for p in parsed.query.split("&") if "=" in p)
    return nodes, {"username": unquote(user) or None, "password": unquote(password) or None,
                   "tls": parsed.scheme.startswith("rediss") or query.get("tls") in ("1", "true")}


def _text(value: Any) -> Any:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


class ClusterStore(_RedisLayout):
    on_loop = True
    tagged = True
    texts_per_session = True
    name = "redis-cluster"

    def __init__(self, url: str, ttl_seconds: int, timeout_seconds: float, prefix: str = "litellm-prefix:",
                 cipher: Cipher | None = None) -> None:
        from glide import Script

        super().__init__(ttl_seconds, prefix, cipher)
        self.nodes, self.options = cluster_nodes(url)
        self.timeout = timeout_seconds
        self._scripts = {name: Script(code) for name, code in (("load", _LOAD), ("save", _SAVE), ("put", _PUT))}
        self._clients: dict[tuple[int, asyncio.AbstractEventLoop], Any] = {}
        self._connecting: dict[tuple[int, asyncio.AbstractEventLoop], asyncio.Task] = {}

    async def _client(self) -> Any:
        where = (os.getpid(), asyncio.get_running_loop())
        client = self._clients.get(where)
        if client is not None:
            return client
        task = self._connecting.get(where)
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            for gone in [w for w in self._connecting if w[0] != where[0] or w[1].is_closed()]:
                self._connecting.pop(gone, None)  # a closed loop's client, a forked parent's: dropped
                self._clients.pop(gone, None)
            task = self._connecting[where] = asyncio.get_running_loop().create_task(self._connect())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        client = await asyncio.shield(task)
        self._clients[where] = client
        return client

    async def _connect(self) -> Any:
        from glide import GlideClusterClient, GlideClusterClientConfiguration, Logger, LogLevel, NodeAddress, ServerCredentials

        Logger.set_logger_config(LogLevel.ERROR)  # glide's own warnings (slow responses) go to stderr
        credentials = (ServerCredentials(self.options["password"], self.options["username"])
                       if self.options["password"] else None)
        config = GlideClusterClientConfiguration(
            [NodeAddress(host, port) for host, port in self.nodes], use_tls=self.options["tls"],
            credentials=credentials, request_timeout=max(1, int(self.timeout * 1000)))
        # The first connect learns the topology: bounded by the loop's own cap, not the budget.
        return await asyncio.wait_for(GlideClusterClient.create(config), max(1.0, 10 * self.timeout))

    async def _script(self, name: str, keys: list[str], args: list[Any]) -> Any:
        client = await self._client()
        return await client.invoke_script(self._scripts[name], keys=keys, args=[str(a) for a in args])

    async def load(self, key: str, held: Iterable[str] = ()) -> StoredJournal:
        got = await self._script("load", [self._journal_key(key)], self._load_args(held, key))
        return self._loaded(key, [_text(v) for v in got] if got else got)

    async def save(self, key: str, version: int, journal: str, refs: Iterable[str], texts: dict[str, str]) -> bool:
        return bool(await self._script("save", [self._journal_key(key)],
                                       self._save_args(key, version, journal, refs, texts)))

    async def get_texts(self, hashes: Iterable[str], key: str | None = None) -> dict[str, str]:
        hashes = list(hashes)
        if not hashes or key is None:
            return {}
        client = await self._client()
        values = await client.mget([self._text_key(h, key) for h in hashes])  # one slot: one call
        return self._found(hashes, [_text(v) for v in values], key)

    async def put_texts(self, texts: dict[str, str], key: str | None = None) -> None:
        if not texts or key is None:
            return
        keys = [self._text_key(h, key) for h in texts]
        await self._script("put", keys, [self.ttl, *(self._seal(t, k) for t, k in zip(texts.values(), keys))])

    async def close(self) -> None:
        client = self._clients.pop((os.getpid(), asyncio.get_running_loop()), None)
        if client is not None:
            await client.close()


