"""``bench/latency_cpu.py``'s hook that only waits (its hook that only spends CPU is
``proxy_gc.calibration``)."""
from __future__ import annotations

import asyncio
import os

from litellm.integrations.custom_logger import CustomLogger


class Sleep(CustomLogger):
    """Every request waits ``BENCH_SLEEP_MS`` in the pre-call hook, spending no CPU."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds = float(os.environ.get("BENCH_SLEEP_MS", "0")) / 1000

    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
        await asyncio.sleep(self.seconds)
        return data


sleep = Sleep()
