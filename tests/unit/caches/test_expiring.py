"""caches.Expiring: the per-call records (applied, written, reports, pending) are kept at least
their time and at most twice it, within their size, and read like the TTLCache they replaced."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from litellm_prefix.caches import Expiring
from tests.support import examples


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_reads_like_a_mapping():
    cache = Expiring(maxsize=8, seconds=10, clock=Clock())
    cache["a"] = 1
    assert cache["a"] == 1 and cache.get("a") == 1 and "a" in cache and len(cache) == 1
    assert cache.get("b") is None and cache.get("b", 2) == 2 and "b" not in cache
    with pytest.raises(KeyError):
        cache["b"]
    assert cache.pop("a") == 1 and cache.pop("a", "gone") == "gone" and "a" not in cache
    cache["none"] = None  # a stored None is an entry
    assert "none" in cache and cache.pop("none", "x") is None


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["set", "get", "pop"]), st.integers(0, 5),
                          st.floats(0, 25, allow_nan=False)), max_size=60))
def test_entries_live_at_least_their_time_and_at_most_twice_it(steps):
    clock = Clock()
    cache = Expiring(maxsize=1000, seconds=10, clock=clock)
    set_at: dict[int, float] = {}  # key -> when last set (and not popped since)
    for op, key, wait in steps:
        clock.now += wait
        if op == "set":
            cache[key] = clock.now
            set_at[key] = clock.now
        elif op == "pop":
            value = cache.pop(key, None)
            if key in set_at:
                age = clock.now - set_at.pop(key)
                assert value is not None if age < 10 else True
                assert value is None if age >= 20 else True
            else:
                assert value is None
        else:
            value = cache.get(key)
            if key in set_at:
                age = clock.now - set_at[key]
                if age < 10:
                    assert value == set_at[key]
                if age >= 20:
                    assert value is None
            else:
                assert value is None


def test_size_is_bounded_oldest_out():
    cache = Expiring(maxsize=10, seconds=1000, clock=Clock())
    for i in range(100):
        cache[i] = i
        assert len(cache) <= 10
    assert 99 in cache and 0 not in cache
