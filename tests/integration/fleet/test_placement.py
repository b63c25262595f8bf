"""Placement over a real Redis: two gateways sharing one store place alike (the rest of
placement.py: tests/unit/fleet/test_placement.py).
"""
from __future__ import annotations

from collections import Counter

import pytest

from litellm_prefix.fleet.store import build_store
from litellm_prefix.settings import Settings
from tests.unit.fleet.test_affinity import Clock
from tests.unit.fleet.test_placement import _two_processes_place_alike, make

pytestmark = pytest.mark.anyio


async def test_two_gateway_processes_over_one_redis_agree(redis_server):
    settings = Settings(path_check="absolute", store=redis_server.url, store_timeout_ms=2000)
    clock = Clock()
    a, b = (make(store=build_store(settings, Counter())[0], clock=clock) for _ in range(2))
    await _two_processes_place_alike(a, b, make(clock=clock))
    assert a.stats["affinity_unrecorded"] == b.stats["affinity_unrecorded"] == 0
