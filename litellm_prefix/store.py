"""Where journals live: in memory (default) or in Redis (shared by proxy replicas).

The interface the transform uses (all async):

- ``load(key) -> Loaded``: the session's journal JSON (or None), its version, the
  section texts the journal refers to (as far as the store holds them) and which store
  answered;
- ``save(key, loaded, journal, refs, texts) -> True | False | None``: compare-and-set
  against the version ``loaded`` carries, on the store that answered ``load`` and on no
  other, together with the new texts. True: saved; False: another request of the session
  saved first (reload and run again); None: the store did not answer, the decisions of
  this request are not recorded anywhere;
- ``get_texts(loaded, hashes)`` and ``put_texts(loaded, texts)`` for the rare request
  that needs a text the journal does not refer to, or saves texts without a journal.

Texts are content-addressed (a hash names exactly one text), so any copy of a text is a
correct copy: each process keeps the texts it saw in a local LRU and tells Redis which of
the journal's texts it already holds, so a load transfers only the texts it lacks.

- ``MemoryStore``: cachetools LRU + TTL for journals (``maxSessions``,
  ``sessionTtlSeconds``); texts in one shared LRU bounded in bytes (identical sections
  of many sessions are stored once).
- Redis: one hash per session (``v`` version, ``j`` journal JSON, ``r`` the hashes of the
  texts it refers to), texts under their own keys. Two Lua scripts, so a request costs at
  most two round trips: ``load`` (journal plus the referred texts the caller lacks) and
  ``save`` (compare-and-set plus the new texts, refreshing the TTL of every text the
  journal refers to). Two clients run the same scripts: ``WireRedisStore`` (``store:
  redis://``, ``rediss://``, ``unix://``: ``redis_wire``, on the proxy's event loop) and
  ``RedisStore`` (redis-py's blocking client on worker threads: ``store: proxy`` and URLs
  ``redis_wire`` does not serve).
- ``ResilientStore``: Redis with local state as the fallback; see its docstring for
  the time budget and what a cool-down covers.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import queue
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache, TTLCache

from .store_cipher import Cipher, CipherError, open_plain

logger = logging.getLogger("litellm_prefix")

TEXT_CACHE_BYTES = 256 * 1024 * 1024
# A refused or reset connection: the whole store is skipped this long, then tried again.
DOWN_COOL_DOWN_SECONDS = 2.0
# This many calls in a row without an answer within the budget, over at least one budget
# (Redis blocked: a long script, DEBUG SLEEP, a fork on a huge dataset): the whole store
# is skipped this long.
SLOW_IN_A_ROW = 3
BLOCKED_COOL_DOWN_SECONDS = 1.0
STORE_THREADS = 8


@dataclass(frozen=True)
class Loaded:
    """A journal as one store returned it; the save of the same request goes back there."""

    journal: str | None
    version: int
    texts: dict[str, str] = field(default_factory=dict)  # referred texts the store holds
    refs: frozenset[str] = frozenset()  # every text hash the journal refers to (looked up already)
    source: str = "local"  # "local" or "shared"


def journal_text_refs(journal: Any) -> tuple[str, ...]:
    """The hashes of the texts a journal refers to: its head's sections and tools, the pinned head."""
    refs: list[str] = []
    if journal.head is not None:
        refs.extend(h for _, h, _ in journal.head.sections)
        refs.append(journal.head.tools)
    for pinned in (journal.pinned, journal.told):
        if pinned:
            refs.extend(h for _, h in pinned)
    return tuple(dict.fromkeys(refs))


class MemoryStore:
    name = "memory"

    def __init__(self, max_sessions: int, ttl_seconds: float, text_bytes: int = TEXT_CACHE_BYTES) -> None:
        # key -> (version, journal JSON, refs)
        self._journals: TTLCache[str, tuple[int, str, tuple[str, ...]]] = TTLCache(maxsize=max_sessions, ttl=ttl_seconds)
        self._texts: LRUCache[str, str] = LRUCache(maxsize=text_bytes, getsizeof=lambda text: len(text) + 64)
        self._lock = threading.Lock()

    async def load(self, key: str) -> Loaded:
        with self._lock:
            entry = self._journals.get(key)
            if entry is None:
                return Loaded(None, 0)
            self._journals[key] = entry  # read is use: the session's TTL starts again (a journal is saved only when it changes)
            texts = {h: self._texts[h] for h in entry[2] if h in self._texts}
        return Loaded(entry[1], entry[0], texts, frozenset(entry[2]), "local")

    async def save(self, key: str, loaded: Loaded, journal: str, refs: Iterable[str] = (),
                   texts: dict[str, str] | None = None) -> bool:
        with self._lock:
            entry = self._journals.get(key)
            if (entry[0] if entry else 0) != loaded.version:
                return False
            self._put(texts or {})
            self._journals[key] = (loaded.version + 1, journal, tuple(refs))
            return True

    async def get_texts(self, loaded: Loaded | None, hashes: Iterable[str]) -> dict[str, str]:
        with self._lock:
            return {h: self._texts[h] for h in hashes if h in self._texts}

    async def put_texts(self, loaded: Loaded | None, texts: dict[str, str]) -> None:
        with self._lock:
            self._put(texts)

    # -- for ResilientStore: local copies of what the shared store said ------------

    def mirror(self, key: str, journal: str | None, refs: Iterable[str], texts: dict[str, str]) -> None:
        """Keep the shared store's answer as this session's local state (a new local version)."""
        with self._lock:
            self._put(texts)
            if journal is not None:
                entry = self._journals.get(key)
                self._journals[key] = ((entry[0] if entry else 0) + 1, journal, tuple(refs))

    def held_texts(self, key: str) -> dict[str, str]:
        """The texts this process holds of those the session's journal referred to when last seen here."""
        with self._lock:
            entry = self._journals.get(key)
            return {h: self._texts[h] for h in entry[2] if h in self._texts} if entry else {}

    def remember_texts(self, texts: dict[str, str]) -> None:
        with self._lock:
            self._put(texts)

    def _put(self, texts: dict[str, str]) -> None:
        for digest, text in texts.items():
            if len(text) + 64 <= self._texts.maxsize:
                self._texts[digest] = text

    def journal_bytes(self) -> list[int]:
        with self._lock:
            return [len(entry[1]) for entry in self._journals.values()]

    def __len__(self) -> int:
        return len(self._journals)


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


StoredJournal = tuple[str | None, int, tuple[str, ...], dict[str, str]]  # (journal, version, refs, texts)


class _RedisLayout:
    """What both Redis clients send and how they read the answers: the keys, the scripts'
    arguments, the load script's reply."""

    name = "redis"

    def __init__(self, ttl_seconds: int, prefix: str, cipher: Cipher | None = None) -> None:
        self.ttl = int(ttl_seconds)
        self.prefix = prefix
        self.cipher = cipher  # store_cipher: every value sealed on the way in, opened on the way out

    def _seal(self, value: str, redis_key: str) -> str:
        return value if self.cipher is None else self.cipher.seal(value, redis_key)

    def _open(self, value: str, redis_key: str) -> str:
        return open_plain(value) if self.cipher is None else self.cipher.open(value, redis_key)

    def _journal_key(self, key: str) -> str:
        return f"{self.prefix}j:{key}"

    def _text_key(self, digest: str) -> str:
        return f"{self.prefix}t:{digest}"

    def _load_args(self, held: Iterable[str]) -> list[Any]:
        return [f"{self.prefix}t:", self.ttl, *held]

    def _save_args(self, key: str, version: int, journal: str, refs: Iterable[str],
                   texts: dict[str, str]) -> list[Any]:
        args: list[Any] = [str(version), str(version + 1), self._seal(journal, self._journal_key(key)),
                           " ".join(refs), self.ttl, f"{self.prefix}t:"]
        for digest, text in texts.items():
            args += [digest, self._seal(text, self._text_key(digest))]
        return args

    def _loaded(self, key: str, got: Any) -> StoredJournal:
        """(journal, version, refs, texts the caller lacks) from the load script's reply."""
        if not got:
            return None, 0, (), {}
        journal = got[1] if got[1] is None else self._open(got[1], self._journal_key(key))
        return journal, int(got[0]), tuple(got[2].split()), self._found(got[3::2], got[4::2])

    def _found(self, hashes: list[str], values: list[str | None]) -> dict[str, str]:
        return {h: self._open(v, self._text_key(h)) for h, v in zip(hashes, values) if v is not None}


class RedisStore(_RedisLayout):
    """Blocking Redis calls (one round trip each), meant for worker threads.

    The socket timeout is the time budget: the kernel measures it from the moment the
    command is on the wire, so a busy event loop or a busy interpreter cannot make a
    healthy Redis look slow.
    """

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
    def from_url(cls, url: str, ttl_seconds: int, timeout_seconds: float, cipher: Cipher | None = None) -> "RedisStore":
        import redis

        return cls(redis.Redis.from_url(url, **cls.client_options(timeout_seconds)), ttl_seconds, cipher=cipher)

    def load(self, key: str, held: Iterable[str] = ()) -> StoredJournal:
        """(journal, version, refs, texts the caller lacks): one round trip."""
        return self._loaded(key, self._load(keys=[self._journal_key(key)], args=self._load_args(held)))

    def save(self, key: str, version: int, journal: str, refs: Iterable[str], texts: dict[str, str]) -> bool:
        return bool(self._save(keys=[self._journal_key(key)],
                               args=self._save_args(key, version, journal, refs, texts)))

    def get_texts(self, hashes: Iterable[str]) -> dict[str, str]:
        hashes = list(hashes)
        if not hashes:
            return {}
        return self._found(hashes, self.client.mget([self._text_key(h) for h in hashes]))

    def put_texts(self, texts: dict[str, str]) -> None:
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

    async def get_texts(self, hashes: Iterable[str]) -> dict[str, str]:
        hashes = list(hashes)
        if not hashes:
            return {}
        return self._found(hashes, await self.wire.call("MGET", *map(self._text_key, hashes)))

    async def put_texts(self, texts: dict[str, str]) -> None:
        if texts:
            await self.wire.pipeline(*(("SET", self._text_key(digest), self._seal(text, self._text_key(digest)),
                                        "EX", self.ttl) for digest, text in texts.items()))


class _Workers:
    """``STORE_THREADS`` daemon threads running blocking store calls from one queue (C's
    ``SimpleQueue``); each call hands its outcome to the event loop with one
    ``call_soon_threadsafe``. (A ``ThreadPoolExecutor`` with ``asyncio.wrap_future`` and
    ``asyncio.wait`` spent about 0.25 ms of CPU per call on the hand-over alone: two kinds of
    futures, a condition variable, a timeout handle and their callbacks.) One set per process,
    shared by every store (``_WORKERS``): started at the first call, again in a forked child."""

    def __init__(self, count: int, name: str) -> None:
        self.count, self.name = count, name
        self._forked()

    def _forked(self) -> None:
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self._started = False
        self._lock = threading.Lock()

    def submit(self, call: "_Call") -> None:
        if not self._started:
            with self._lock:
                if not self._started:
                    for i in range(self.count):
                        threading.Thread(target=_work, args=(self.queue,), name=f"{self.name}_{i}",
                                         daemon=True).start()
                    self._started = True
        self.queue.put(call)


def _work(calls: queue.SimpleQueue) -> None:
    while True:
        call = calls.get()
        try:
            call.result = call.fn(*call.args)
        except BaseException as exc:  # handed to the caller
            call.error = exc
        call.answered = True
        try:
            call.loop.call_soon_threadsafe(call.settle)
        except RuntimeError:  # the caller's loop is closed: nobody waits for this answer
            pass


_WORKERS = _Workers(STORE_THREADS, "litellm-prefix-store")
# A forked child (a server that forks its workers) has none of the parent's threads.
os.register_at_fork(after_in_child=_WORKERS._forked)


class _Call:
    """One blocking store call, its outcome, and the loop future its caller awaits."""

    __slots__ = ("fn", "args", "loop", "future", "result", "error", "answered")

    def __init__(self, fn: Any, args: tuple, loop: asyncio.AbstractEventLoop) -> None:
        self.fn, self.args, self.loop = fn, args, loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.result: Any = None
        self.error: BaseException | None = None
        self.answered = False  # set by the worker before it hands the outcome to the loop

    def settle(self) -> None:
        future = self.future
        if future.done():  # cancelled (the caller went away) or past the safety cap
            return
        if self.error is not None:
            future.set_exception(self.error)
        else:
            future.set_result(self.result)

    def cap(self, seconds: float) -> None:
        # The loop's own cap, for a worker that hangs: a worker that answered in time (the loop
        # only ran this late) is not a slow store, its answer is on its way.
        if not self.answered and not self.future.done():
            self.future.set_exception(TimeoutError(f"no answer from the store worker within {seconds:.1f} s"))


class _Skipped(Exception):
    """The shared store is cooling down: not tried."""


def _failure_kind(exc: BaseException) -> str:
    """``slow`` (no answer within the budget), ``down`` (no connection) or ``error``."""
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:  # pragma: no cover - redis is a dependency
        RedisConnectionError = RedisTimeoutError = ()  # type: ignore[assignment]
    if isinstance(exc, (RedisTimeoutError, TimeoutError, asyncio.TimeoutError)):
        return "slow"
    if isinstance(exc, (RedisConnectionError, ConnectionError, OSError)):
        return "down"
    return "error"


class ResilientStore:
    """A shared store with a time budget per call and local state as the fallback.

    - The budget (``storeTimeoutMs``) is the shared store's own latency, measured once the
      command is on the wire: ``WireRedisStore`` abandons a call only after a whole budget
      in which Redis sent nothing back (``redis_wire``); ``RedisStore`` uses the blocking
      client's socket timeout on a worker thread, which the event loop awaits without a
      timer of its own (a safety cap far above the budget stays, for a worker that hangs).
      Either way a busy loop never abandons a Redis that answered in time.
    - What a failure covers depends on its kind. A refused or dropped connection: the
      whole store is skipped for ``DOWN_COOL_DOWN_SECONDS``. One call without an answer
      within the budget: that call only (that request runs on local state); the next
      call tries Redis again. ``SLOW_IN_A_ROW`` such calls in a row, the last one at
      least a budget after the first (not calls that were in flight together during
      one short stall), mean Redis is blocked: the whole store is skipped for
      ``BLOCKED_COOL_DOWN_SECONDS``, so no request waits more than a few budgets. Other errors (a script
      refused) count the same way: one costs that call, several in a row a cool-down.
    - One request never mixes stores: ``save`` goes to the store that answered ``load``.
      A save to Redis is a compare-and-set against the version read from Redis, so a
      replica coming back from local state never overwrites newer shared decisions;
      whatever it decided locally during the outage is dropped, and the rules re-seed
      from the shared journal on the next request. A save that Redis does not answer
      is not written locally either.
    - Local state mirrors every journal Redis returned, so an outage starts from the
      last shared state this process saw.
    """

    name = "resilient"

    def __init__(self, shared: Any, local: MemoryStore, timeout_seconds: float, stats: Counter[str]) -> None:
        self.shared = shared
        self.local = local
        self.timeout = timeout_seconds
        self.stats = stats
        self._down_until = 0.0
        self._slow_in_a_row = 0
        self._first_failure_at = 0.0
        self._outage: str | None = None  # the failure kind logged for the current outage
        self._key_warned = False  # a value that no configured key opens has been logged
        self._state_lock = threading.Lock()
        # A hung worker (a DNS lookup is not bounded by the socket timeout) cannot hold a request longer.
        self.safety_cap = max(1.0, 10 * timeout_seconds)

    # -- the worker side -------------------------------------------------------------

    def _on_wire(self, method: str, args: tuple) -> Any:
        if time.monotonic() < self._down_until:  # tripped while this call waited for a worker
            raise _Skipped()
        return getattr(self.shared, method)(*args)

    async def _shared_call(self, method: str, *args: Any) -> Any:
        if time.monotonic() < self._down_until:
            raise _Skipped()
        if getattr(self.shared, "on_loop", False):  # its own budget, on the wire (redis_wire)
            result = await getattr(self.shared, method)(*args)
            self._answered()
            return result
        loop = asyncio.get_running_loop()
        call = _Call(self._on_wire, (method, args), loop)
        _WORKERS.submit(call)
        timer = loop.call_later(self.safety_cap, call.cap, self.safety_cap)
        try:
            result = await call.future
        finally:
            timer.cancel()
        self._answered()
        return result

    # -- failure bookkeeping -----------------------------------------------------------

    def _answered(self) -> None:
        self._slow_in_a_row = 0
        if self._outage is not None:
            with self._state_lock:
                if self._outage is not None:
                    self._outage = None
                    logger.warning("litellm-prefix: shared store answers again")

    def _failed(self, method: str, exc: BaseException) -> None:
        self.stats["store_fallbacks"] += 1
        if isinstance(exc, _Skipped):
            self.stats["store_skipped"] += 1
            return
        kind = _failure_kind(exc)
        self.stats[f"store_{kind}"] += 1
        if isinstance(exc, CipherError) and not self._key_warned:
            self._key_warned = True
            logger.error("litellm-prefix: a shared store value could not be decrypted (%s): check "
                         "LITELLM_PREFIX_STORE_KEY and LITELLM_PREFIX_STORE_OLD_KEYS on every gateway; requests "
                         "use local state meanwhile", exc)
        budget_ms = self.timeout * 1000
        with self._state_lock:
            if kind in ("slow", "error"):
                now = time.monotonic()
                if self._slow_in_a_row == 0:
                    self._first_failure_at = now
                self._slow_in_a_row += 1
                # Blocked means failing for a while: calls that were in flight together during one
                # short stall all fail at once, and must not switch every session to local state.
                lasting = kind == "error" or now - self._first_failure_at >= self.timeout
                if self._slow_in_a_row < SLOW_IN_A_ROW or not lasting:
                    if kind == "slow":
                        logger.warning("litellm-prefix: shared store slow: no answer to %s within %.0f ms on the "
                                       "wire; this request uses local state", method, budget_ms)
                    else:
                        logger.warning("litellm-prefix: shared store error on %s (%s); this request uses local state",
                                       method, type(exc).__name__)
                    return
                # Redis blocked, or failing every call (e.g. a cluster refusing the scripts' keys).
                kind, cool_down = ("blocked" if kind == "slow" else "failing"), BLOCKED_COOL_DOWN_SECONDS
            else:
                cool_down = DOWN_COOL_DOWN_SECONDS
            self._down_until = time.monotonic() + cool_down
            self._slow_in_a_row = 0
            if self._outage is None:
                self._outage = kind
                logger.warning("litellm-prefix: shared store unavailable (%s, %s); using local state for %.0f s "
                               "at a time until it answers again", kind, type(exc).__name__, cool_down)

    # -- the interface -----------------------------------------------------------------

    async def load(self, key: str) -> Loaded:
        held = self.local.held_texts(key)
        try:
            journal, version, refs, fetched = await self._shared_call("load", key, tuple(held))
        except Exception as exc:
            self._failed("load", exc)
            return await self.local.load(key)
        texts = {h: held[h] for h in refs if h in held}
        texts.update(fetched)
        self.local.mirror(key, journal, refs, fetched)
        return Loaded(journal, version, texts, frozenset(refs), "shared")

    async def save(self, key: str, loaded: Loaded, journal: str, refs: Iterable[str] = (),
                   texts: dict[str, str] | None = None) -> bool | None:
        refs = tuple(refs)
        texts = texts or {}
        if loaded.source != "shared":
            return await self.local.save(key, loaded, journal, refs, texts)
        try:
            saved = await self._shared_call("save", key, loaded.version, journal, refs, texts)
        except Exception as exc:
            self._failed("save", exc)
            return None
        if saved:
            self.local.mirror(key, journal, refs, texts)
        return saved

    async def get_texts(self, loaded: Loaded | None, hashes: Iterable[str]) -> dict[str, str]:
        hashes = list(hashes)
        if loaded is None or loaded.source != "shared":
            return await self.local.get_texts(loaded, hashes)
        try:
            texts = await self._shared_call("get_texts", hashes)
        except Exception as exc:
            self._failed("get_texts", exc)
            return {}
        self.local.remember_texts(texts)
        return texts

    async def put_texts(self, loaded: Loaded | None, texts: dict[str, str]) -> None:
        self.local.remember_texts(texts)
        if loaded is None or loaded.source != "shared":
            return
        try:
            await self._shared_call("put_texts", texts)
        except Exception as exc:
            self._failed("put_texts", exc)


def _proxy_redis(ttl_seconds: int, timeout_seconds: float, cipher: Cipher | None = None) -> RedisStore | None:
    """A client for the LiteLLM proxy's own Redis (``redis_usage_cache``), when it has one."""
    import sys

    proxy_server = sys.modules.get("litellm.proxy.proxy_server")
    cache = getattr(proxy_server, "redis_usage_cache", None)
    if cache is None:
        return None
    from litellm._redis import get_redis_client

    # The proxy's connection settings, with this store's own budget and retry policy.
    options = RedisStore.client_options(timeout_seconds)
    kwargs = {k: v for k, v in dict(getattr(cache, "redis_kwargs", {}) or {}).items()
              if k not in options and k not in ("connection_pool", "max_connections")}
    return RedisStore(get_redis_client(**kwargs, **options), ttl_seconds, cipher=cipher)


class LazyProxyStore:
    """``store: proxy``: the proxy's Redis, looked up at first use (the proxy sets it up after callbacks load)."""

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

    def load(self, key, held=()):
        return self._resolve().load(key, held)

    def save(self, key, version, journal, refs, texts):
        return self._resolve().save(key, version, journal, refs, texts)

    def get_texts(self, hashes):
        return self._resolve().get_texts(hashes)

    def put_texts(self, texts):
        return self._resolve().put_texts(texts)


def build_store(settings: Any, stats: Counter[str]) -> tuple[Any, MemoryStore]:
    """(the store to use, the local memory store) for these settings."""
    from . import redis_wire

    local = MemoryStore(settings.max_sessions, settings.session_ttl_seconds)
    if settings.store == "memory":
        return local, local
    timeout = settings.store_timeout_ms / 1000
    cipher = Cipher.from_env()  # raises KeyConfigError, naming the variable, for a malformed key
    if settings.store == "proxy":
        shared: Any = LazyProxyStore(settings.session_ttl_seconds, timeout, cipher)
    elif redis_wire.supported(settings.store):
        shared = WireRedisStore(settings.store, settings.session_ttl_seconds, timeout, cipher=cipher)
    else:
        shared = RedisStore.from_url(settings.store, settings.session_ttl_seconds, timeout, cipher)
    return ResilientStore(shared, local, timeout, stats), local
