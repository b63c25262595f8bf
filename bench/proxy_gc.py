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

``timed``: the plugin with each hook timed (``BENCH_PLUGIN_CPU_FILE``), see ``timed_stabilizer``.
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
    """Spends ``BENCH_BURN_MS`` of thread CPU in the pre-call hook, except for requests to the
    model group ``BENCH_BURN_SKIP_MODEL`` names (the same process without the known cost)."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds = float(os.environ.get("BENCH_BURN_MS", "0")) / 1000
        self.skip = os.environ.get("BENCH_BURN_SKIP_MODEL") or None

    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
        if self.skip is not None and data.get("model") == self.skip:
            return data
        until = time.thread_time() + self.seconds
        spin = 0
        while time.thread_time() < until:
            for i in range(100):
                spin += i
        return data


calibration = Burn()


class _CpuFile:
    """Cumulative plugin CPU, written to a memory-mapped file the benchmark reads between waves
    (no syscall per request): requests seen by the pre-call hook, and seconds of thread CPU
    in every plugin hook."""

    def __init__(self, path: str) -> None:
        import mmap

        self.values = [0.0, 0.0]
        with open(path, "wb") as fh:
            fh.write(bytes(16))
        self.fh = open(path, "r+b")
        self.map = mmap.mmap(self.fh.fileno(), 16)

    def add(self, seconds: float, request: bool = False) -> None:
        import struct

        self.values[0] += request
        self.values[1] += seconds
        self.map[:] = struct.pack("2d", *self.values)


class _OwnCpu:
    """Awaits a coroutine, adding up the thread CPU of its own steps only: while it waits (on
    Redis, say) the event loop runs other requests on this thread, and that is not its time."""

    def __init__(self, coro, add) -> None:
        self.coro, self.add = coro, add

    def __await__(self):
        steps = self.coro.__await__()
        value, error, total = None, None, 0.0
        while True:
            started = time.thread_time()
            try:
                yielded = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as stop:
                self.add(total + time.thread_time() - started)
                return stop.value
            except BaseException:
                self.add(total + time.thread_time() - started)
                raise
            total += time.thread_time() - started
            value, error = None, None
            try:
                value = yield yielded
            except BaseException as exc:  # thrown in by the loop (a cancellation): hand it on
                error = exc


def timed_stabilizer(path: str):
    """The plugin as ``litellm_prefix.proxy_handler`` builds it, each of its hooks timed in thread
    CPU (its own steps only, see ``_OwnCpu``), the totals in ``path``: the plugin's own share of
    the proxy's CPU, read from inside the proxy, wave by wave."""
    from litellm_prefix.hook import PrefixStabilizer

    cpu = _CpuFile(path)

    class Timed(PrefixStabilizer):
        async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
            return await _OwnCpu(super().async_pre_call_hook(user_api_key_dict, cache, data, call_type),
                                 lambda s: cpu.add(s, request=True))

        async def async_pre_call_deployment_hook(self, kwargs, call_type):
            return await _OwnCpu(super().async_pre_call_deployment_hook(kwargs, call_type), cpu.add)

        async def async_filter_deployments(self, model, healthy_deployments, messages, request_kwargs=None,
                                           parent_otel_span=None):
            return await _OwnCpu(super().async_filter_deployments(model, healthy_deployments, messages,
                                                                  request_kwargs, parent_otel_span), cpu.add)

        async def async_post_call_failure_deployment_hook(self, request_data, exception, call_type,
                                                          fallback_depth=None):
            return await _OwnCpu(super().async_post_call_failure_deployment_hook(
                request_data, exception, call_type, fallback_depth), cpu.add)

        async def async_post_call_response_headers_hook(self, data, user_api_key_dict, response,
                                                        request_headers=None, litellm_call_info=None):
            return await _OwnCpu(super().async_post_call_response_headers_hook(
                data, user_api_key_dict, response, request_headers, litellm_call_info), cpu.add)

        async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
            return await _OwnCpu(super().async_log_success_event(kwargs, response_obj, start_time, end_time),
                                 cpu.add)

    return Timed()


# ``proxy_gc.timed`` in a proxy's callbacks (bench/load.py's proxies with the plugin).
timed = timed_stabilizer(os.environ["BENCH_PLUGIN_CPU_FILE"]) if os.environ.get("BENCH_PLUGIN_CPU_FILE") else None
