"""The plugin's own CPU per request, hook by hook, in one process (no proxy, no network).

The requests of ``bench/load.py``'s sessions (32 pi-like sessions, 10 turns) go through the
three hooks a proxy calls for a chat completion, as a proxy calls them: the pre-call hook on
the parsed body, the deployment hook on a copy with the deployment's fields (LiteLLM copies
the tools list), the success callback with a usage object. Reported: the median and mean
thread CPU of each hook, and the pre-call hook's mean turn by turn (turn 1 is every
session's first request).

``--flush MB`` (default 8) writes that many megabytes and touches 20,000 objects per MB
between requests: in a proxy, LiteLLM's own ~15-20 ms of work per request leaves the CPU
caches cold for the plugin, and with the flush this bench reproduced the proxy's own thread
time inside each hook within 1% (measured there with per-hook timers). ``--flush 0`` gives
the warm figure. ``--store redis`` runs the plugin on a redis-server from the virtualenv
(``bench/load.py``'s ``redis`` row); ``--replicas 2`` gives each session's turns to two
plugins in turn, sharing the store (its ``replicas`` row; both plugins in this one process,
so they share the module-level memos that two proxies would each hold for themselves).
``--stages`` adds where the time goes inside the hooks (``Stages``). Compare two versions of the code by running this file from each checkout
in turn (the machine's speed drifts: alternate, and repeat).

    .venv/bin/python -m bench.hooks_cpu [--sessions 32 --turns 10 --flush 8 --store memory --replicas 1]
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent

import litellm  # noqa: E402
from bench.load import Session  # noqa: E402  (its import clears LITELLM_PREFIX_*: default settings, as its proxies)

import litellm_prefix.target as target_module  # noqa: E402
from litellm_prefix.hook import PrefixStabilizer  # noqa: E402
from litellm_prefix.settings import Settings  # noqa: E402

DEPLOYMENT = {"model": "openai/upstream-chat", "custom_llm_provider": "openai", "api_base": "http://127.0.0.1:9/v1"}


class Flush:
    def __init__(self, megabytes: int) -> None:
        self.buffer = bytearray(megabytes << 20)
        self.objects = [object() for _ in range(megabytes * 20_000)]

    def __call__(self) -> None:
        if self.buffer:
            self.buffer[:] = bytes(len(self.buffer))
            for item in self.objects:
                id(item)


class Stages:
    """``--stages``: thread CPU per request of the steps inside the hooks (each rule, the store
    calls, profile detection, the measured shape, the tools' first encoding, the reporting),
    by wrappers this bench puts around them (the package is not changed). Nested steps are
    counted in their callers too; the wrappers' own cost (~1 µs each) inflates the totals."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, name: str, fn):
        import functools
        import inspect

        seconds = self.seconds
        if inspect.iscoroutinefunction(fn):
            async def timed(*a, **k):
                started = time.thread_time()
                try:
                    return await fn(*a, **k)
                finally:
                    seconds[name] = seconds.get(name, 0.0) + time.thread_time() - started
        else:
            def timed(*a, **k):
                started = time.thread_time()
                try:
                    return fn(*a, **k)
                finally:
                    seconds[name] = seconds.get(name, 0.0) + time.thread_time() - started
        return functools.wraps(fn)(timed)

    def install(self) -> None:
        from litellm_prefix import core, drift, pipeline, profiles, sinks
        from litellm_prefix.measure import prefix

        pipeline.RULES[:] = [self.wrap(f"rule {rule.__name__}", rule) for rule in pipeline.RULES]
        core.profiles = _Module(profiles, detect=self.wrap("profile detection", profiles.detect))
        sinks.prefix = _Module(prefix, measure=self.wrap("measured shape (prefix.measure)", prefix.measure))
        drift._encode_tools = self.wrap("tools' first encoding (drift._encode_tools)", drift._encode_tools)
        target_module.resolve = self.wrap("deployment target (target.resolve)", target_module.resolve)
        for cls, names in ((core.Stabilizer, ("_run_with_journal", "_unchanged_since_applied")),
                           (sinks.Sinks, ("transformed", "completed")),
                           (PrefixStabilizer, ("async_pre_call_hook", "async_pre_call_deployment_hook",
                                               "async_log_success_event"))):
            for name in names:
                setattr(cls, name, self.wrap(f"{cls.__name__}.{name}", getattr(cls, name)))

    def install_store(self, store) -> None:
        for name in ("load", "save", "put_texts", "get_texts"):
            setattr(store, name, self.wrap(f"store.{name}", getattr(store, name)))

    def report(self, requests: int) -> dict[str, float]:
        return {name: round(1000 * seconds / requests, 3)
                for name, seconds in sorted(self.seconds.items(), key=lambda kv: -kv[1])}


class _Module:
    """A module with some of its functions replaced, for the modules that call them by attribute."""

    def __init__(self, module, **replaced) -> None:
        self._module, self._replaced = module, replaced

    def __getattr__(self, name: str):
        return self._replaced[name] if name in self._replaced else getattr(self._module, name)


async def run(args) -> dict:
    stages = Stages() if args.stages else None
    if stages:
        stages.install()
    # The proxy's router is not loaded here: the pre-call hook's deployment lookup answers as the proxy's would.
    target_module.proxy_deployment = lambda group: {"litellm_params": dict(DEPLOYMENT)}
    store = None
    if args.store == "redis":
        import tempfile

        from harness.procs import RedisServer

        store = RedisServer(Path(tempfile.mkdtemp(prefix="hooks-cpu-")))
    settings = Settings(store=store.url) if store else Settings()
    # ``--replicas 2``: two plugins (two proxies' worth) sharing the store, each session's turns
    # alternating between them, as bench/load.py's ``replicas`` row.
    plugins = [PrefixStabilizer(settings) for _ in range(args.replicas)]
    if stages:
        for plugin in plugins:
            stages.install_store(plugin.core.store)
    flush = Flush(args.flush)
    sessions = [Session(i, args.sessions, "cpu") for i in range(args.sessions)]
    # As bench/load.py's proxies: the set-up's objects (the flush's 160,000 among them) out of
    # the collector's reach, so that a full collection does not land in one turn's hooks.
    gc.collect()
    gc.freeze()
    try:
        report = await _turns(args, plugins, sessions, flush)
        if stages:
            report["stages_ms_per_request"] = stages.report(args.sessions * args.turns)
        return report
    finally:
        if store is not None:
            store.stop()


async def _turns(args, plugins, sessions, flush) -> dict:
    spent: dict[str, list[float]] = {"pre_call": [], "deployment": [], "success": []}
    by_turn: list[float] = []
    for turn in range(args.turns):
        plugin = plugins[turn % len(plugins)]
        bodies = [s.advance(turn) for s in sessions]
        first = len(spent["pre_call"])
        for session, body in zip(sessions, bodies):
            data = json.loads(body)
            flush()
            data["litellm_call_id"] = str(uuid.uuid4())
            headers = {"x-session-id": session.client.session}
            data["proxy_server_request"] = {"headers": headers}
            data["metadata"] = {"headers": headers}
            started = time.thread_time()
            data = await plugin.async_pre_call_hook(None, None, data, "acompletion")
            spent["pre_call"].append(time.thread_time() - started)
            kwargs = {**data, "tools": [dict(t) for t in data.get("tools") or []], **DEPLOYMENT}
            started = time.thread_time()
            kwargs = await plugin.async_pre_call_deployment_hook(kwargs, "acompletion")
            spent["deployment"].append(time.thread_time() - started)
            response = litellm.ModelResponse(model="m", usage={
                "prompt_tokens": 20000, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 19000}})
            logged = {**kwargs, "standard_logging_object": {
                "metadata": {"usage_object": response.usage.model_dump()}, "model_id": "d1", "model_group": "m"}}
            started = time.thread_time()
            await plugin.async_log_success_event(logged, response, None, None)
            spent["success"].append(time.thread_time() - started)
        by_turn.append(round(1000 * statistics.mean(spent["pre_call"][first:]), 3))
    for plugin in plugins:
        assert plugin.core.stats["errors"] == 0, plugin.core.stats
        assert plugin.core.stats["store_fallbacks"] == 0, plugin.core.stats
    report = {name: {"median_ms": round(1000 * statistics.median(v), 3), "mean_ms": round(1000 * statistics.mean(v), 3)}
              for name, v in spent.items()}
    report["pre_call_mean_ms_by_turn"] = by_turn
    report["total_median_ms"] = round(sum(report[n]["median_ms"] for n in spent), 3)
    return {"sessions": args.sessions, "turns": args.turns, "flush_mb": args.flush, "store": args.store,
            "replicas": args.replicas, **report}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--flush", type=int, default=8, help="megabytes written between requests (0: warm caches)")
    parser.add_argument("--store", choices=("memory", "redis"), default="memory",
                        help="redis: a redis-server from the virtualenv, as bench/load.py's")
    parser.add_argument("--replicas", type=int, default=1, help="plugins sharing the store, turns alternating")
    parser.add_argument("--stages", action="store_true",
                        help="also the thread CPU per request of the steps inside the hooks (timing wrappers)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "hooks_cpu.json"))
    args = parser.parse_args()
    report = asyncio.run(run(args))
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"{args.sessions} sessions x {args.turns} turns, caches flushed with {args.flush} MB between requests:")
    for name in ("pre_call", "deployment", "success"):
        print(f"  {name:<10} median {report[name]['median_ms']:.3f} ms, mean {report[name]['mean_ms']:.3f} ms")
    print(f"  all hooks  {report['total_median_ms']:.3f} ms (sum of medians); pre-call mean by turn: "
          f"{report['pre_call_mean_ms_by_turn']}")
    for name, ms in report.get("stages_ms_per_request", {}).items():
        print(f"  {ms:7.3f} ms  {name}")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
