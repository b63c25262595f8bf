"""Session affinity's pins in a real Redis, shared by two replicas (the rest of affinity.py:
tests/unit/fleet/test_affinity.py).
"""
from __future__ import annotations

from collections import Counter

import pytest

from litellm_prefix.fleet.store import build_store
from litellm_prefix.settings import Settings
from tests.unit.fleet.test_affinity import deployments, make, placed, request

pytestmark = pytest.mark.anyio


async def test_pins_in_a_real_redis_are_shared(redis_server):
    settings = Settings(path_check="absolute", store=redis_server.url, store_timeout_ms=2000)
    replicas = [make(store=build_store(settings, Counter())[0]) for _ in range(2)]
    deps = deployments(2)
    first = [await placed(replicas[i % 2], request(1000 + i), deps) for i in range(6)]
    assert Counter(first) == {"dep-0": 3, "dep-1": 3}
    assert [await placed(replicas[(i + 1) % 2], request(1000 + i), deps) for i in range(6)] == first
    assert all(r.stats["affinity_unrecorded"] == 0 for r in replicas)
