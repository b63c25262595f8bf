"""A shared store for tests: in memory, on the event loop, with failures switched on by name.

``FakeSharedStore`` answers like Redis (the ``SharedStore`` calls: versions, compare-and-set,
only the texts the caller lacks) until a test sets ``fail[call]`` (``"*"``: every call):

- ``"down"``: a refused connection (``ConnectionError``);
- ``"slow"``: no answer within the budget (``TimeoutError`` after ``budget`` seconds);
- ``"error"``: the server refused the command (a ``RuntimeError``, as a CROSSSLOT would be);
- ``"conflict"``: ``save`` only: another replica saved first (compare-and-set lost);
- an exception instance: raised as it is (a client library's own error class).

``calls`` counts the calls made (failed ones too). ``stored(key)`` reads what another replica
would read, never failing; ``put(key, journal)`` writes as another replica would.
``SteppingClock`` is a monotonic clock a test can move forward, past a cool-down, without
sleeping through it.
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterable

from .base import StoredJournal

FAILURES = ("down", "slow", "error", "conflict")


class FakeSharedStore:
    name = "fake"
    on_loop = True
    texts_per_session = False

    def __init__(self, budget: float = 0.05) -> None:
        self.budget = budget
        self.fail: dict[str, str | BaseException] = {}
        self.calls: Counter[str] = Counter()
        self._journals: dict[str, tuple[int, str, tuple[str, ...]]] = {}
        self._texts: dict[str, str] = {}

    async def _enter(self, call: str) -> str | None:
        self.calls[call] += 1
        mode = self.fail.get(call) or self.fail.get("*")
        if isinstance(mode, BaseException):
            raise mode
        if mode not in (None, *FAILURES):
            raise ValueError(f"unknown failure {mode!r}: one of {FAILURES}")
        if mode == "down":
            raise ConnectionError("fake: connection refused")
        if mode == "slow":
            await asyncio.sleep(self.budget)
            raise TimeoutError("fake: no answer within the budget")
        if mode == "error":
            raise RuntimeError("fake: command refused")
        return mode

    # -- SharedStore -------------------------------------------------------------------

    async def load(self, key: str, held: Iterable[str] = ()) -> StoredJournal:
        await self._enter("load")
        return self.stored(key, held)

    async def save(self, key: str, version: int, journal: str, refs: Iterable[str],
                   texts: dict[str, str]) -> bool:
        if await self._enter("save") == "conflict":
            return False
        return self.put(key, journal, refs, texts, expected=version)

    async def get_texts(self, hashes: Iterable[str], key: str | None = None) -> dict[str, str]:
        await self._enter("get_texts")
        return {h: self._texts[h] for h in hashes if h in self._texts}

    async def put_texts(self, texts: dict[str, str], key: str | None = None) -> None:
        await self._enter("put_texts")
        self._texts.update(texts)

    # -- what another replica sees and does --------------------------------------------------

    def stored(self, key: str, held: Iterable[str] = ()) -> StoredJournal:
        entry = self._journals.get(key)
        if entry is None:
            return None, 0, (), {}
        version, journal, refs = entry
        held = set(held)
        return journal, version, refs, {h: self._texts[h] for h in refs if h not in held and h in self._texts}

    def put(self, key: str, journal: str, refs: Iterable[str] = (), texts: dict[str, str] | None = None,
            expected: int | None = None) -> bool:
        """Compare-and-set against ``expected`` (None: whatever is there)."""
        version = self._journals.get(key, (0,))[0]
        if expected is not None and expected != version:
            return False
        self._texts.update(texts or {})
        self._journals[key] = (version + 1, journal, tuple(refs))
        return True


class SteppingClock:
    """``time.monotonic`` plus the time a test skipped."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skipped

    def skip(self, seconds: float) -> None:
        self.skipped += seconds
