"""A LiteLLM callback the load benchmark puts in *every* proxy it starts, with and without the plugin.

At its first request (the warm-up wave) it moves the proxy's start-up heap out of the
cyclic collector's reach (``gc.collect(); gc.freeze()``, as large Python services do after
start-up), and from then on it counts the collections of each generation and the CPU time
they take, printed to the proxy's log as ``proxy-gc {json}`` every 16 requests.

Why: a full collection of a LiteLLM proxy's heap (about a million start-up objects) costs
about 0.5 s of CPU and comes at an arbitrary wave, once or twice per run, in any proxy,
with or without the plugin: one such collection moves a configuration's CPU per request
by 10-25% in a 320-request run, more than the difference being measured. Frozen, the
start-up objects are never traversed again; what the plugin allocates and keeps (its
memos, journals, metrics) is created after the freeze and stays in every collection, so
its share of the collector's work is still measured, and the counts are reported.
``bench/load.py --no-freeze`` runs the proxies without it (the counts are still reported).

``calibration``: a callback that spends a known CPU time per request in the pre-call hook
(``BENCH_BURN_MS``, in a loop that touches almost no memory), so that each run shows how
well it measures a known cost next to the plugin's.
"""
from __future__ import annotations

import gc
import json
import os
import sys
import time

from litellm.integrations.custom_logger import CustomLogger

_counts = [0, 0, 0]
_seconds = [0.0, 0.0, 0.0]
_started = [0.0]


def _on_collection(phase: str, info: dict) -> None:
    if phase == "start":
        _started[0] = time.thread_time()
    else:
        generation = info.get("generation", 2)
        _counts[generation] += 1
        _seconds[generation] += time.thread_time() - _started[0]


class ProxyGc(CustomLogger):
    def __init__(self) -> None:
        super().__init__()
        self.requests = 0
        self.frozen = False

    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
        if self.requests == 0:
            if os.environ.get("BENCH_GC_FREEZE", "1") == "1":
                gc.collect()
                gc.freeze()
                self.frozen = True
            _counts[:] = [0, 0, 0]
            _seconds[:] = [0.0, 0.0, 0.0]
            gc.callbacks.append(_on_collection)
        self.requests += 1
        if self.requests % 16 == 0:
            sys.stderr.write("proxy-gc " + json.dumps({
                "requests": self.requests, "frozen": self.frozen, "collections": list(_counts),
                "cpu_ms": [round(s * 1000, 1) for s in _seconds]}) + "\n")
            sys.stderr.flush()
        return data


handler = ProxyGc()


class Burn(CustomLogger):
    def __init__(self) -> None:
        super().__init__()
        self.seconds = float(os.environ.get("BENCH_BURN_MS", "0")) / 1000

    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
        until = time.thread_time() + self.seconds
        spin = 0
        while time.thread_time() < until:
            for i in range(100):
                spin += i
        return data


calibration = Burn()
