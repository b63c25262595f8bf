"""What a store is: the interface the transform and affinity use (``Store``), the one a shared
store's client offers the resilient store (``SharedStore``), and the record a load returns.

- ``Store.load(key) -> Loaded``: the session's journal JSON (or None), its version, the
  section texts the journal refers to (as far as the store holds them) and which store
  answered;
- ``Store.save(key, loaded, journal, refs, texts) -> True | False | None``: compare-and-set
  against the version ``loaded`` carries, on the store that answered ``load`` and on no
  other, together with the new texts. True: saved; False: another request of the session
  saved first (reload and run again); None: the store did not answer, the decisions of
  this request are not recorded anywhere;
- ``Store.get_texts(loaded, hashes)`` and ``Store.put_texts(loaded, texts)`` for the rare
  request that needs a text the journal does not refer to, or saves texts without a journal.

A shared store's client (``SharedStore``) has no fallback and no ``Loaded``: it answers with
``StoredJournal`` tuples and raises on any failure; ``ResilientStore`` turns it into a ``Store``.
Its calls are coroutines when ``on_loop`` is true (they run on the caller's event loop and
judge the budget themselves), plain blocking calls otherwise (run on the store's worker
threads, the budget being the client's socket timeout).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

# Blocking shared-store calls run on this many worker threads (one set per process); the
# blocking client's connection pool is sized to match.
STORE_THREADS = 8

# (journal, version, refs, texts the caller lacks): a shared store's answer to ``load``.
StoredJournal = tuple[str | None, int, tuple[str, ...], dict[str, str]]


@dataclass(frozen=True)
class Loaded:
    """A journal as one store returned it; the save of the same request goes back there."""

    journal: str | None
    version: int
    texts: dict[str, str] = field(default_factory=dict)  # referred texts the store holds
    refs: frozenset[str] = frozenset()  # every text hash the journal refers to (looked up already)
    source: str = "local"  # "local" or "shared"
    key: str | None = None  # the session key it was loaded under (a shared store's texts may live under it)


@runtime_checkable
class Store(Protocol):
    """The store the transform and affinity use (``MemoryStore``, ``ResilientStore``)."""

    name: str

    async def load(self, key: str) -> Loaded: ...

    async def save(self, key: str, loaded: Loaded, journal: str, refs: Iterable[str] = (),
                   texts: dict[str, str] | None = None) -> bool | None: ...

    async def get_texts(self, loaded: Loaded | None, hashes: Iterable[str]) -> dict[str, str]: ...

    async def put_texts(self, loaded: Loaded | None, texts: dict[str, str]) -> None: ...


@runtime_checkable
class SharedStore(Protocol):
    """A shared store's client, behind ``ResilientStore``: raises on any failure. Coroutines
    when ``on_loop``, blocking calls for the store's worker threads otherwise."""

    name: str
    on_loop: bool
    # True: texts are kept per session (a Redis Cluster), so a save must carry every text its
    # journal refers to that the session's own copy may lack; the texts calls take the session key.
    texts_per_session: bool

    def load(self, key: str, held: Iterable[str] = ()) -> Any: ...  # StoredJournal

    def save(self, key: str, version: int, journal: str, refs: Iterable[str],
             texts: dict[str, str]) -> Any: ...  # bool

    def get_texts(self, hashes: Iterable[str], key: str | None = None) -> Any: ...  # dict[str, str]

    def put_texts(self, texts: dict[str, str], key: str | None = None) -> Any: ...  # None


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
