"""Local state: journals in a cachetools LRU + TTL (``maxSessions``, ``sessionTtlSeconds``),
texts in one shared LRU bounded in bytes (identical sections of many sessions are stored once).

The default store, and the resilient store's fallback: it mirrors every journal the shared
store returned, so an outage starts from the last shared state this process saw.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from cachetools import LRUCache, TTLCache

from .base import Loaded

TEXT_CACHE_BYTES = 256 * 1024 * 1024


class MemoryStore:
    name = "memory"

    def __init__(self, max_sessions: int, ttl_seconds: float, text_bytes: int = TEXT_CACHE_BYTES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        # key -> (version, journal JSON, refs)
        self._journals: TTLCache[str, tuple[int, str, tuple[str, ...]]] = TTLCache(
            maxsize=max_sessions, ttl=ttl_seconds, timer=clock)
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

    def held(self, key: str) -> tuple[str, tuple[str, ...], dict[str, str]] | None:
        """(journal, refs, the referred texts this process holds) of the session, or None."""
        with self._lock:
            entry = self._journals.get(key)
            if entry is None:
                return None
            return entry[1], entry[2], {h: self._texts[h] for h in entry[2] if h in self._texts}

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

    # -- a process's state as a whole: handed to another (a restart, a replica) -----------

    def snapshot(self) -> tuple[dict[str, tuple[int, str, tuple[str, ...]]], dict[str, str]]:
        """A copy of everything held: (session key -> (version, journal JSON, refs), digest -> text)."""
        with self._lock:
            return dict(self._journals.items()), dict(self._texts.items())

    def restore(self, journals: dict[str, tuple[int, str, tuple[str, ...]]], texts: dict[str, str]) -> None:
        """Hold these journals (replacing any under the same keys) and texts, as ``snapshot`` gives them."""
        with self._lock:
            for key, entry in journals.items():
                self._journals[key] = (entry[0], entry[1], tuple(entry[2]))
            self._put(texts)

    def journal_bytes(self) -> list[int]:
        with self._lock:
            return [len(entry[1]) for entry in self._journals.values()]

    def __len__(self) -> int:
        return len(self._journals)

