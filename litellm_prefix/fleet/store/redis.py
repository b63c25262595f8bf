"""Redis as the shared store: one hash per session, texts under their own keys, two Lua scripts.

``RedisStore`` (redis-py's blocking client, for the worker threads) and ``WireRedisStore``
(``redis_wire``, on the caller's event loop) send the same scripts, keys and arguments
(``_RedisLayout``).
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from .base import STORE_THREADS, StoredJournal
from .cipher import Cipher, open_plain

# KEYS[1]: the session's journal hash. ARGV[1]: the text key prefix; ARGV[2]: TTL; ARGV[3..]: text hashes
# the caller already holds. Returns {} for a new session, else {version, journal, refs,
# hash1, text1, ...} with the referred texts the caller lacks (those Redis still has).
# A read is use: the TTL of the journal and of every text it refers to starts again (ARGV[2];
# a journal is saved only when it changes).
_LOAD = """
local got = redis.call('HMGET', KEYS[1], 'v', 'j', 'r')
if not got[1] then return {} end
redis.call('EXPIRE', KEYS[1], ARGV[2])
local out = {got[1], got[2], got[3] or ''}
if got[3] then
  local held = {}
  for i = 3, #ARGV do held[ARGV[i]] = true end
  for h in string.gmatch(got[3], '%S+') do
    redis.call('EXPIRE', ARGV[1] .. h, ARGV[2])
    if not held[h] then
      local text = redis.call('GET', ARGV[1] .. h)
      if text then out[#out + 1] = h; out[#out + 1] = text end
    end
  end
end
return out
"""

# KEYS[1]: the journal hash. ARGV: expected version, new version, journal, refs, TTL,
# text key prefix, then hash, text pairs. Compare-and-set; on success also writes the
# texts and refreshes the TTL of every text the journal refers to.
_SAVE = """
local current = redis.call('HGET', KEYS[1], 'v')
if (current or '0') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'j', ARGV[3], 'r', ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
for i = 7, #ARGV, 2 do redis.call('SET', ARGV[6] .. ARGV[i], ARGV[i + 1], 'EX', ARGV[5]) end
for h in string.gmatch(ARGV[4], '%S+') do redis.call('EXPIRE', ARGV[6] .. h, ARGV[5]) end
return 1
"""


class _RedisLayout:
    """What the Redis clients send and how they read the answers: the keys, the scripts'
    arguments, the load script's reply.

    ``tagged`` (a Redis Cluster): every key of a session carries the session's hash tag, so
    both scripts touch one hash slot, and texts are kept per session (``t:{session}:<digest>``)
    instead of once for all sessions (``t:<digest>``)."""

    name = "redis"
    tagged = False
    texts_per_session = False

    def __init__(self, ttl_seconds: int, prefix: str, cipher: Cipher | None = None) -> None:
        self.ttl = int(ttl_seconds)
        self.prefix = prefix
        self.cipher = cipher  # cipher.py: every value sealed on the way in, opened on the way out

    def _seal(self, value: str, redis_key: str) -> str:
        return value if self.cipher is None else self.cipher.seal(value, redis_key)

    def _open(self, value: str, redis_key: str) -> str:
        return open_plain(value) if self.cipher is None else self.cipher.open(value, redis_key)

    def _journal_key(self, key: str) -> str:
        return f"{self.prefix}j:{{{key}}}" if self.tagged else f"{self.prefix}j:{key}"

    def _text_prefix(self, key: str | None) -> str:
        return f"{self.prefix}t:{{{key}}}:" if self.tagged else f"{self.prefix}t:"

    def _text_key(self, digest: str, key: str | None = None) -> str:
        return self._text_prefix(key) + digest

    def _load_args(self, held: Iterable[str], key: str | None = None) -> list[Any]:
        return [self._text_prefix(key), self.ttl, *held]

    def _save_args(self, key: str, version: int, journal: str, refs: Iterable[str],
                   texts: dict[str, str]) -> list[Any]:
        args: list[Any] = [str(version), str(version + 1), self._seal(journal, self._journal_key(key)),
                           " ".join(refs), self.ttl, self._text_prefix(key)]
        for digest, text in texts.items():
            args += [digest, self._seal(text, self._text_key(digest, key))]
        return args

    def _loaded(self, key: str, got: Any) -> StoredJournal:
        """(journal, version, refs, texts the caller lacks) from the load script's reply."""
        if not got:
            return None, 0, (), {}
        journal = got[1] if got[1] is None else self._open(got[1], self._journal_key(key))
        return journal, int(got[0]), tuple(got[2].split()), self._found(got[3::2], got[4::2], key)

    def _found(self, hashes: list[str], values: list[str | None], key: str | None = None) -> dict[str, str]:
        return {h: self._open(v, self._text_key(h, key)) for h, v in zip(hashes, values) if v is not None}


def host_list(hosts: str, default_port: int) -> list[tuple[str, int]]:
    """``h:p,h,[v6]:p`` as (host, port) pairs."""
    nodes = []
    for part in hosts.split(","):
        part = part.strip()
        host, port = part, default_port
        if part.startswith("["):
            host, _, rest = part[1:].partition("]")
            port = int(rest[1:]) if rest.startswith(":") else default_port
        elif ":" in part:
            host, _, number = part.rpartition(":")
            port = int(number)
        nodes.append((host or "localhost", port))
    return nodes


def sentinel_nodes(url: str) -> tuple[list[tuple[str, int]], str, int, dict[str, Any]]:
    """(sentinels, service name, database, credentials) of a ``redis+sentinel://`` URL."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(url)
    userinfo, _, hosts = parsed.netloc.rpartition("@")
    nodes = host_list(hosts, 26379)
    path = [p for p in parsed.path.split("/") if p]
    if not path:
        raise ValueError("a redis+sentinel:// URL names the service: redis+sentinel://host:port/service_name")
    user, _, password = userinfo.partition(":") if userinfo else ("", "", "")
    options = {k: v for k, v in (("username", unquote(user)), ("password", unquote(password))) if v}
    if parsed.scheme.startswith("rediss"):
        options["ssl"] = True
    return nodes, unquote(path[0]), int(path[1]) if len(path) > 1 else 0, options


class RedisStore(_RedisLayout):
    """Blocking Redis calls (one round trip each), meant for worker threads.

    The socket timeout is the time budget: the kernel measures it from the moment the
    command is on the wire, so a busy event loop or a busy interpreter cannot make a
    healthy Redis look slow.
    """

    on_loop = False

    def __init__(self, client: Any, ttl_seconds: int, prefix: str = "litellm-prefix:",
                 cipher: Cipher | None = None) -> None:
        super().__init__(ttl_seconds, prefix, cipher)
        self.client = client
        self._load = client.register_script(_LOAD)
        self._save = client.register_script(_SAVE)

    @staticmethod
    def client_options(timeout_seconds: float) -> dict[str, Any]:
        from redis.backoff import NoBackoff
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.retry import Retry

        # One immediate retry on a dropped connection (a restarted Redis leaves stale pooled
        # connections); never on a timeout: a blocked Redis costs one budget, not four.
        return {"socket_timeout": timeout_seconds, "socket_connect_timeout": timeout_seconds,
                "retry": Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
                "max_connections": STORE_THREADS + 2, "decode_responses": True}

    @classmethod
    def from_url(cls, url: str, ttl_seconds: int, timeout_seconds: float, cipher: Cipher | None = None) -> RedisStore:
        import redis

        return cls(redis.Redis.from_url(url, **cls.client_options(timeout_seconds)), ttl_seconds, cipher=cipher)

    @classmethod
    def from_sentinel_url(cls, url: str, ttl_seconds: int, timeout_seconds: float,
                          cipher: Cipher | None = None) -> RedisStore:
        """``redis+sentinel://[user:pass@]host:port[,host:port]/service[/db]``: the primary Sentinel
        names. redis-py asks the sentinels again whenever a connection to the primary fails (a
        failover), and treats a primary turned replica (READONLY) as a lost connection."""
        from redis.sentinel import Sentinel

        nodes, service, db, options = sentinel_nodes(url)
        timeouts = {"socket_timeout": timeout_seconds, "socket_connect_timeout": timeout_seconds}
        sentinel = Sentinel(nodes, sentinel_kwargs={**timeouts, "ssl": options.get("ssl", False)}, **options)
        client = sentinel.master_for(service, db=db, **cls.client_options(timeout_seconds))
        return cls(client, ttl_seconds, cipher=cipher)

    def load(self, key: str, held: Iterable[str] = ()) -> StoredJournal:
        """(journal, version, refs, texts the caller lacks): one round trip."""
        return self._loaded(key, self._load(keys=[self._journal_key(key)], args=self._load_args(held)))

    def save(self, key: str, version: int, journal: str, refs: Iterable[str], texts: dict[str, str]) -> bool:
        return bool(self._save(keys=[self._journal_key(key)],
                               args=self._save_args(key, version, journal, refs, texts)))

    def get_texts(self, hashes: Iterable[str], key: str | None = None) -> dict[str, str]:
        hashes = list(hashes)
        if not hashes:
            return {}
        return self._found(hashes, self.client.mget([self._text_key(h) for h in hashes]))

    def put_texts(self, texts: dict[str, str], key: str | None = None) -> None:
        if not texts:
            return
        pipe = self.client.pipeline(transaction=False)
        for digest, text in texts.items():
            pipe.set(self._text_key(digest), self._seal(text, self._text_key(digest)), ex=self.ttl)
        pipe.execute()


class WireRedisStore(_RedisLayout):
    """The same calls as ``RedisStore`` (the same scripts, keys and round trips), async, on the
    caller's event loop (``redis_wire``): the budget is judged on the wire there."""

    on_loop = True

    def __init__(self, url: str, ttl_seconds: int, timeout_seconds: float, prefix: str = "litellm-prefix:",
                 cipher: Cipher | None = None) -> None:
        from . import redis_wire

        super().__init__(ttl_seconds, prefix, cipher)
        self.wire = redis_wire.RedisWire(url, timeout_seconds, max(1.0, 10 * timeout_seconds))
        self._scripts = {script: hashlib.sha1(script.encode()).hexdigest() for script in (_LOAD, _SAVE)}

    async def _script(self, script: str, key: str, args: list[Any]) -> Any:
        try:
            return await self.wire.call("EVALSHA", self._scripts[script], 1, key, *args)
        except Exception as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
        return await self.wire.call("EVAL", script, 1, key, *args)  # loads it into Redis's script cache

    async def load(self, key: str, held: Iterable[str] = ()) -> StoredJournal:
        return self._loaded(key, await self._script(_LOAD, self._journal_key(key), self._load_args(held)))

    async def save(self, key: str, version: int, journal: str, refs: Iterable[str], texts: dict[str, str]) -> bool:
        return bool(await self._script(_SAVE, self._journal_key(key),
                                       self._save_args(key, version, journal, refs, texts)))

    async def get_texts(self, hashes: Iterable[str], key: str | None = None) -> dict[str, str]:
        hashes = list(hashes)
        if not hashes:
            return {}
        return self._found(hashes, await self.wire.call("MGET", *map(self._text_key, hashes)))

    async def put_texts(self, texts: dict[str, str], key: str | None = None) -> None:
        if texts:
            await self.wire.pipeline(*(("SET", self._text_key(digest), self._seal(text, self._text_key(digest)),
                                        "EX", self.ttl) for digest, text in texts.items()))
