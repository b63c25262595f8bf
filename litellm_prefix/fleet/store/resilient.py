"""A shared store with a time budget per call and local state as the fallback (``ResilientStore``).

Blocking clients run on ``STORE_THREADS`` worker threads; clients with ``on_loop`` run on the
caller's event loop and judge the budget on the wire themselves.
"""
from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from .base import STORE_THREADS, Loaded, SharedStore
from .cipher import CipherError
from .memory import MemoryStore

logger = logging.getLogger("litellm_prefix")

# A refused or reset connection: the whole store is skipped this long, then tried again.
DOWN_COOL_DOWN_SECONDS = 2.0
# This many calls in a row without an answer within the budget, over at least one budget
# (Redis blocked: a long script, DEBUG SLEEP, a fork on a huge dataset): the whole store
# is skipped this long.
SLOW_IN_A_ROW = 3
BLOCKED_COOL_DOWN_SECONDS = 1.0


class _Workers:
    """``STORE_THREADS`` daemon threads running blocking store calls from one queue (C's
    ``SimpleQueue``); each call hands its outcome to the event loop with one
    ``call_soon_threadsafe``. (Not a ``ThreadPoolExecutor`` with ``asyncio.wrap_future`` and
    ``asyncio.wait``: its hand-over alone takes two kinds of futures, a condition variable, a
    timeout handle and their callbacks.) One set per process,
    shared by every store (``_WORKERS``): started at the first call, again in a forked child."""

    def __init__(self, count: int, name: str) -> None:
        self.count, self.name = count, name
        self._forked()

    def _forked(self) -> None:
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self._started = False
        self._lock = threading.Lock()

    def submit(self, call: _Call) -> None:
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


# Failures by class name, so that no client library is imported to classify its errors:
# redis-py's and valkey-glide's TimeoutError and ConnectionError, glide's ClosingError (its
# client was closed) and CircuitBreakerError, and LiteLLM's RedisCircuitBreakerOpenError
# (its own Redis client refuses calls for a while after failures: Redis is down for it).
_SLOW_NAMES = frozenset({"TimeoutError"})
_DOWN_NAMES = frozenset({"ConnectionError", "ClosingError", "CircuitBreakerError", "RedisCircuitBreakerOpenError"})


def _failure_kind(exc: BaseException) -> str:
    """``slow`` (no answer within the budget), ``down`` (no connection) or ``error``."""
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return "slow"
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _SLOW_NAMES:
        return "slow"
    if isinstance(exc, (ConnectionError, OSError)) or names & _DOWN_NAMES:
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
    - A Redis that answers "no journal" for a session local state still holds (Redis
      restarted empty, flushed, failed over to an empty node; or the session expired there
      by TTL while this process kept it) gets the local journal back: it is written to Redis
      by compare-and-set at the version Redis answered, with every referred text this
      process holds (an empty Redis lacks them too), and the request continues from it, so
      pinned values stay and the session pays no re-prefill (``store_restored``). If another
      process restored or wrote first, the compare-and-set fails and this load answers with
      what Redis holds then (``store_restore_conflicts``). Referred texts this process no
      longer holds are fetched as for any evicted text. If Redis does not answer the write,
      the request runs on local state.
    """

    name = "resilient"

    def __init__(self, shared: SharedStore, local: MemoryStore, timeout_seconds: float, stats: Counter[str],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.shared = shared
        self.local = local
        self.timeout = timeout_seconds
        self.stats = stats
        self.clock = clock  # monotonic seconds: the cool-downs and "a budget after the first failure"
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
        if self.clock() < self._down_until:  # tripped while this call waited for a worker
            raise _Skipped()
        return getattr(self.shared, method)(*args)

    async def _shared_call(self, method: str, *args: Any) -> Any:
        if self.clock() < self._down_until:
            raise _Skipped()
        if self.shared.on_loop:  # its own budget, on the wire
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

    @property
    def cool_down_left(self) -> float:
        """Seconds until the shared store is tried again (0: it is in use)."""
        return max(0.0, self._down_until - self.clock())

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
                now = self.clock()
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
            self._down_until = self.clock() + cool_down
            self._slow_in_a_row = 0
            if self._outage is None:
                self._outage = kind
                logger.warning("litellm-prefix: shared store unavailable (%s, %s); using local state for %.0f s "
                               "at a time until it answers again", kind, type(exc).__name__, cool_down)

    # -- the interface -----------------------------------------------------------------

    async def load(self, key: str, restore: bool = True) -> Loaded:
        held = self.local.held_texts(key)
        try:
            journal, version, refs, fetched = await self._shared_call("load", key, tuple(held))
        except Exception as exc:
            self._failed("load", exc)
            return await self.local.load(key)
        if journal is None and restore:
            restored = await self._restore(key, version)
            if restored is not None:
                return restored
        texts = {h: held[h] for h in refs if h in held}
        texts.update(fetched)
        self.local.mirror(key, journal, refs, fetched)
        return Loaded(journal, version, texts, frozenset(refs), "shared", key)

    async def _restore(self, key: str, version: int) -> Loaded | None:
        """The shared store has no journal under ``key``: write back the one local state holds
        (None: it holds none; the shared answer stands)."""
        held = self.local.held(key)
        if held is None:
            return None
        journal, refs, texts = held
        try:
            saved = await self._shared_call("save", key, version, journal, refs, texts)
        except Exception as exc:
            self._failed("save", exc)
            return await self.local.load(key)  # this request runs on local state, as after a failed load
        if not saved:  # another process restored or wrote first: follow what Redis holds now
            self.stats["store_restore_conflicts"] += 1
            return await self.load(key, restore=False)
        self.stats["store_restored"] += 1
        logger.info("litellm-prefix: session %s journal restored to the shared store from local state "
                    "(shared version %d, %d of %d texts)", key[:16], version + 1, len(texts), len(refs))
        return Loaded(journal, version + 1, texts, frozenset(refs), "shared", key)

    async def save(self, key: str, loaded: Loaded, journal: str, refs: Iterable[str] = (),
                   texts: dict[str, str] | None = None) -> bool | None:
        refs = tuple(refs)
        texts = texts or {}
        if loaded.source != "shared":
            return await self.local.save(key, loaded, journal, refs, texts)
        try:
            if self.shared.texts_per_session:  # a journal seeded from another session's: its texts come along
                lacking = [h for h in refs if h not in loaded.refs and h not in texts]
                if lacking:
                    texts = {**await self.local.get_texts(None, lacking), **texts}
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
            texts = await self._shared_call("get_texts", hashes, loaded.key)
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
            await self._shared_call("put_texts", texts, loaded.key)
        except Exception as exc:
            self._failed("put_texts", exc)

