"""The plugin's own CPU per request, on the traffic agents really send, in one process (no proxy, no network).

Two workloads, each through every hook a proxy calls for a call, as the proxy calls them:

- ``real`` (the default): the recorded hook inputs of the real agent CLIs (pi 0.73 and 1.6,
  Claude Code, Codex, opencode, Qwen Code, Gemini CLI: ``harness/hook_record.py``, every scenario
  of ``harness/real_agents``) and aider's recorded requests, mixed: each agent's calls in order in
  a lane of its own, four lanes per agent (32 concurrent sessions), each lane a tenant of its own,
  so its sessions are its own and the same bytes reach the plugin as from four users of that
  agent. Long runs of appended tool-call turns, a user prompt now and then, rare context changes.
- ``pi-like``: ``bench/load.py``'s 32 pi-like sessions (10-30k-token prompts, 35 tools, a memory
  write, a notification-run flip and a memory deletion in 10 turns): far more head and journal
  changes than agents make. Reported beside the first; its figure is stated, not a target.

A call, in the proxy's order: the pre-call hook on the client's request (parsed from JSON afresh),
the router's placement filter (``--affinity``: two deployments, ``sessionAffinity: always``),
the deployment hook (on the pre-call output with the deployment's fields; a ``/v1/messages`` or
``/v1/responses`` call a chat deployment serves reaches it a second time, translated: as recorded),
the response-headers hook, the success callback with the answer's usage. Between the steps the
CPU caches are flushed (``--flush MB``: that many megabytes written and 20,000 objects a MB
touched), as LiteLLM's own ~15-20 ms of work per request does in a proxy. The JSONL log is on (a
file in a temporary directory), so the log writer's thread runs too.

**Plugin on and off alternate in the same process**: each round replays every lane once with
the plugin (new tenants: new sessions) and once without it (the same driver: the same parsing,
flushes and objects, no hook called), the two in random order, after a warm-up round of each.
Reported per workload:

- ``on_minus_off_ms``: the process's CPU per call (every thread: the log writer, collections)
  with the plugin minus without, mean over the rounds with two standard errors of the
  round-by-round difference;
- ``hooks``: per call, the thread CPU inside the plugin's hooks (mean, p50, p99), by stage and in
  all; plus the log writer thread's CPU per call;
- ``paths``: how the pre-call hooks' turns went: the incremental path (``appended``: the stream's
  last request with messages appended; ``reused``: the same request again) or the full path, and
  why (the stream's first request; the journal changed since its last; its head changed; a body
  that does not only append; none taken: a derived session's first or second request, a trace due).

``--runs N`` runs the whole measurement N times, each in a fresh process, and pools them (the
runs' rounds together). ``--stages`` adds where the time goes inside the hooks (``Stages``: timing
wrappers, which inflate the totals; one extra run with them). ``--store redis`` runs the plugin on
a redis-server from the virtualenv; ``--replicas 2`` gives each lane's calls to two plugins in turn,
sharing the store (both in this process: they share the module-level memos two proxies would hold
each). ``--memory`` measures the resident memory per active session instead (``memory``).

    .venv/bin/python -m bench.hooks_cpu [--workload real,pi-like --runs 3 --rounds 4 --flush 8]
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import types
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
import orjson

import litellm_prefix.request.target as target_module
from bench.load import Session
from litellm_prefix.hook import PrefixStabilizer
from litellm_prefix.request import core as core_module
from litellm_prefix.settings import Settings

ROOT = Path(__file__).resolve().parent.parent

GROUP = "scripted-agents"
PI_DEPLOYMENT = {"model": "openai/upstream-chat", "custom_llm_provider": "openai", "api_base": "http://127.0.0.1:9/v1"}
REAL_DEPLOYMENT = {"model": "hosted_vllm/scripted", "custom_llm_provider": "hosted_vllm",
                   "api_base": "http://127.0.0.1:9/v1"}
COPIES = 4  # lanes per agent in the real workload: 8 agents x 4 = 32 concurrent sessions
STAGES = ("pre_call", "placement", "deployment", "headers", "success")


class Flush:
    """Writes ``megabytes`` of memory and touches 20,000 objects a megabyte: the CPU caches as
    LiteLLM's own work between two hooks leaves them. Nothing is allocated (a fresh 8 MB buffer
    each time cost page faults, system time and noise); its CPU is left out of every figure."""

    def __init__(self, megabytes: int) -> None:
        self.buffer = bytearray(megabytes << 20)
        self.pattern = bytes(range(256)) * (4096 * megabytes)
        self.objects = [object() for _ in range(megabytes * 20_000)]

    spent = 0.0  # thread CPU spent flushing since the caller last reset it

    def __call__(self) -> None:
        if self.buffer:
            started = time.thread_time()
            self.buffer[:] = self.pattern
            deque(map(type, self.objects), maxlen=0)  # reads each object's header
            self.spent += time.thread_time() - started


# -- the workloads ---------------------------------------------------------------------


@dataclass
class Call:
    """One client call: the pre-call hook's input, the deployment hooks' (None: the pre-call output
    with the deployment's fields, as LiteLLM hands it on; else the translated request, as
    recorded), the answer's usage."""

    call_type: str
    headers: dict[str, str]
    body: bytes  # the client's request as JSON: parsed afresh on every replay, as LiteLLM does
    # (call type, None: the pre-call output with the deployment's fields, as LiteLLM hands it on;
    # else the request as the hook got it translated, recorded; whether under a call id of its own:
    # a Gemini route's inner chat completion)
    deployments: list[tuple[str, bytes | None, bool]]
    deployment: dict[str, Any]  # the deployment's own fields (model, api_base, model_info, ...)
    prompt_tokens: int = 1000
    cached_tokens: int = 0
    lane: str = ""


@dataclass
class Lane:
    name: str
    calls: list[Call]


def _deployment_fields(recorded: dict | None, default: dict) -> dict[str, Any]:
    if not recorded:
        return dict(default)
    data = recorded.get("data") or {}
    out = {k: data[k] for k in ("model", "api_base", "custom_llm_provider", "model_info") if k in data}
    out.setdefault("custom_llm_provider", default["custom_llm_provider"])
    return {**default, **out}


def real_lanes(copies: int = COPIES, agents: list[str] | None = None) -> list[Lane]:
    """The recorded real-agent traffic (``harness/hook_record.py``'s fixture), ``copies`` lanes per agent."""
    from harness import hook_record

    recorded = hook_record.load()
    lanes = []
    for agent, calls in recorded.items():
        if agents and agent not in agents:
            continue
        out: list[Call] = []
        previous = 0
        for call in calls:
            pre = call["pre_call"]
            data = dict(pre["data"])
            data["model"] = GROUP
            data.pop("stream_options", None)
            deps = call.get("deployment") or []
            own = [d for d in deps if d["call_type"] == pre["call_type"]]
            deployments: list[tuple[str, bytes | None, bool]] = [(pre["call_type"], None, False)]
            for dep in deps:
                if dep["call_type"] != pre["call_type"] or dep.get("inner"):  # translated: as recorded
                    translated = {k: v for k, v in dep["data"].items()
                                  if k not in ("model", "api_base", "custom_llm_provider", "model_info")}
                    deployments.append((dep["call_type"], orjson.dumps(translated), bool(dep.get("inner"))))
            usage = (call.get("success") or {}).get("usage") or {}
            prompt = int(usage.get("prompt_tokens") or 1000)
            # The scripted model reports its record's sequence number as cached tokens: a cache
            # that kept the previous call's prompt is assumed instead.
            cached = min(previous, prompt)
            previous = prompt
            out.append(Call(pre["call_type"], dict(pre.get("headers") or {}), orjson.dumps(data), deployments,
                            _deployment_fields(own[0] if own else (deps[0] if deps else None), REAL_DEPLOYMENT),
                            prompt, cached, agent))
        for copy in range(copies):
            lanes.append(Lane(f"{agent}#{copy}", out))
    return lanes


def pi_lanes(sessions: int = 32, turns: int = 10) -> list[Lane]:
    """``bench/load.py``'s pi-like sessions, one lane each."""
    lanes = []
    for i in range(sessions):
        session = Session(i, sessions, "cpu")
        calls = []
        for turn in range(turns):
            body = orjson.loads(session.advance(turn))
            body["model"] = GROUP
            headers = {"x-session-id": session.client.session}
            body["metadata"] = {"headers": headers}
            calls.append(Call("acompletion", headers, orjson.dumps(body), [("acompletion", None, False)],
                              dict(PI_DEPLOYMENT), 20000, 19000 if turn else 0, "pi-like"))
        lanes.append(Lane(f"pi-like#{i}", calls))
    return lanes


def waves(lanes: list[Lane]):
    """The calls in the order 32 concurrent sessions send them: each wave the next call of every
    lane that has one (each lane's calls in order)."""
    longest = max(len(lane.calls) for lane in lanes)
    for step in range(longest):
        for index, lane in enumerate(lanes):
            if step < len(lane.calls):
                yield index, lane.calls[step]


# -- the replay -------------------------------------------------------------------------


@dataclass
class Samples:
    """One mode's measurements over a round."""

    process_cpu: float = 0.0  # seconds of the driver's thread's CPU over the round, the flushes left out
    calls: int = 0
    per_call: list[float] = field(default_factory=list)  # the driver thread's CPU per call, flushes left out
    hooks: dict[str, list[float]] = field(default_factory=dict)  # stage -> thread CPU per call
    writer: float = 0.0  # the log writer thread's CPU over the round
    reasons: list[str] = field(default_factory=list)  # the path each call's pre-call transform took


class PathCounter:
    """Why each pre-call turn took the path it took (a wrapper around ``Stabilizer._probe``)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.by_agent: dict[str, dict[str, int]] = {}
        self.agent = ""
        self.trace: list[tuple[str, str]] = []  # (lane, reason) per call, in order
        self.seen: set[str] = set()
        self._in_pre_call = False
        self._probed: str | None = None
        original = core_module.Stabilizer._probe
        counter = self

        def probe(stabilizer, key, view, ctx, loaded, reuse=True):
            record = stabilizer.streams.get(key)
            before = stabilizer.stats["incremental_appended"], stabilizer.stats["incremental_reused"]
            out = original(stabilizer, key, view, ctx, loaded, reuse=reuse)
            if not reuse:
                reason = "full: a derived session's seeded second request"
            elif out is None:
                reason = "full: body not plain JSON or a marked tool"
            elif out[0] is not None:
                reason = "appended" if stabilizer.stats["incremental_appended"] > before[0] else "reused"
            elif record is None:
                reason = "full: the stream's first request" if key not in counter.seen else \
                    "full: the stream's last request changed the journal (or was not kept)"
            elif record.head != out[2]:
                reason = "full: head changed"
            elif record.journal_in != loaded.journal or record.texts != loaded.texts.keys():
                reason = "full: journal changed elsewhere"
            else:
                reason = "full: not only appended"
            counter.seen.add(key)
            if counter._in_pre_call and counter._probed is None:
                counter._probed = reason
            return out

        core_module.Stabilizer._probe = probe
        run_with_journal = core_module.Stabilizer._run_with_journal

        async def run(stabilizer, view, ctx, key, fresh=False, seeds=(), preloaded=None, advance=None):
            if counter._in_pre_call and counter._probed is None and fresh:
                counter._probed = "full: a derived session's first request (fresh)"
            out = await run_with_journal(stabilizer, view, ctx, key, fresh=fresh, seeds=seeds, preloaded=preloaded,
                                         advance=advance)
            if counter._in_pre_call and counter._probed is None:
                counter._probed = "full: no incremental path (switched off)"
            return out

        core_module.Stabilizer._run_with_journal = run

    def pre_call(self, active: bool) -> None:
        self._in_pre_call, self._probed = active, None

    def done(self, lane: str = "") -> None:
        reason = self._probed or "none: no transform (another shape, or switched off)"
        self.counts[reason] = self.counts.get(reason, 0) + 1
        agent = self.by_agent.setdefault(lane.split("#")[0], {})
        agent[reason] = agent.get(reason, 0) + 1
        self.trace.append((lane, reason))
        self._in_pre_call = False


def _thread_cpu(thread) -> float:
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    except (OSError, AttributeError, TypeError, ProcessLookupError):
        return 0.0


class Replay:
    """The lanes' calls through ``args.replicas`` plugins, round by round (``run_round``), or
    through the same driver without them."""

    def __init__(self, args, lanes: list[Lane], log_dir: Path, paths: PathCounter | None) -> None:
        self.args, self.lanes, self.paths = args, lanes, paths
        self.flush = Flush(args.flush)
        self.store = None
        if args.store == "redis":
            from harness.procs import RedisServer

            self.store = RedisServer(Path(tempfile.mkdtemp(prefix="hooks-cpu-")))
        kwargs: dict[str, Any] = {"log": str(log_dir / "prefix.jsonl")}
        if self.store is not None:
            kwargs["store"] = self.store.url
        if args.affinity:
            kwargs["session_affinity"] = "always"
        self.settings = Settings(**kwargs)
        self.plugins = [PrefixStabilizer(self.settings) for _ in range(args.replicas)]
        self.round = 0
        first = lanes[0].calls[0].deployment

        def proxy_deployment(group: str):  # the proxy's router is not loaded: answer as it would
            d = first
            return {"litellm_params": {k: d[k] for k in ("model", "custom_llm_provider", "api_base") if k in d},
                    "model_info": d.get("model_info") or {}}

        target_module.proxy_deployment = proxy_deployment
        self.deployments = [{"model_name": GROUP, "litellm_params": {"model": "hosted_vllm/scripted"},
                             "model_info": {"id": f"d{i}"}} for i in range(2)]

    def close(self) -> None:
        for plugin in self.plugins:
            plugin.core.sinks.flush()
        if self.store is not None:
            self.store.stop()

    def writer_cpu(self) -> float:
        total = 0.0
        for plugin in self.plugins:
            writer = plugin.core.sinks._log_writer
            if writer is not None:
                total += _thread_cpu(writer._thread)
        return total

    async def run_round(self, on: bool) -> Samples:
        self.round += 1
        samples = Samples(hooks={s: [] for s in STAGES})
        writer_before = self.writer_cpu()
        flush = self.flush
        for index, call in waves(self.lanes):
            tenant = f"r{self.round}-{self.lanes[index].name}"
            plugin = self.plugins[samples.calls % len(self.plugins)] if on else None
            flush.spent = 0.0
            call_started = time.thread_time()
            spent = await self._call(call, tenant, plugin, self.lanes[index].name)
            samples.per_call.append(time.thread_time() - call_started - flush.spent)
            for stage in STAGES:
                samples.hooks[stage].append(spent.get(stage, 0.0))
            if plugin is not None and self.paths is not None and self.paths.trace:
                samples.reasons.append(self.paths.trace[-1][1])
            samples.calls += 1
        started = time.thread_time()
        for plugin in self.plugins if on else ():
            plugin.core.sinks.flush()  # (the writer's own CPU is counted on its thread's clock)
        samples.process_cpu = sum(samples.per_call) + time.thread_time() - started
        samples.writer = self.writer_cpu() - writer_before if on else 0.0
        if on:
            for plugin in self.plugins:
                assert plugin.core.stats["errors"] == 0, dict(plugin.core.stats)
                assert plugin.core.stats["store_fallbacks"] == 0, dict(plugin.core.stats)
        return samples

    async def _call(self, call: Call, tenant: str, plugin: PrefixStabilizer | None, lane: str = "") -> dict[str, float]:
        spent: dict[str, float] = {}
        clock = time.thread_time
        flush = self.flush
        data = orjson.loads(call.body)  # LiteLLM parses the client's body
        call_id = str(uuid.uuid4())
        data["litellm_call_id"] = call_id
        data["proxy_server_request"] = {"headers": call.headers}
        user = types.SimpleNamespace(api_key=tenant, team_id=None)
        flush()
        if plugin is not None:
            if self.paths is not None:  # the call's first transform (a Gemini route's: its inner call's)
                self.paths.pre_call(True)
            t = clock()
            data = await plugin.async_pre_call_hook(user, None, data, call.call_type)
            spent["pre_call"] = clock() - t
        flush()
        if plugin is not None and self.args.affinity:
            t = clock()
            await plugin.async_filter_deployments(GROUP, self.deployments, data.get("messages"), request_kwargs=data)
            spent["placement"] = clock() - t
        kwargs: dict[str, Any] = {}
        for call_type, translated, inner in call.deployments:
            if translated is None:  # LiteLLM hands the deployment hook a copy of the tools list
                kwargs = {**data, "tools": [dict(t) for t in data.get("tools") or []], **call.deployment}
                if "tools" not in data:
                    kwargs.pop("tools")
            else:
                if inner:  # LiteLLM's inner chat completion for a Gemini route: a call id of its own
                    call_id = str(uuid.uuid4())
                kwargs = {**orjson.loads(translated), **call.deployment, "litellm_call_id": call_id}
                if inner:
                    kwargs["proxy_server_request"] = {"headers": call.headers}
            kwargs["metadata"] = {**(kwargs.get("metadata") or {}), "model_group": GROUP}
            flush()
            if plugin is not None:
                t = clock()
                kwargs = await plugin.async_pre_call_deployment_hook(kwargs, call_type)
                spent["deployment"] = spent.get("deployment", 0.0) + clock() - t
        if plugin is not None and self.paths is not None:
            self.paths.done(lane)
        response = litellm.ModelResponse(model="m", usage={
            "prompt_tokens": call.prompt_tokens, "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": call.cached_tokens}})
        if plugin is not None:
            t = clock()
            await plugin.async_post_call_response_headers_hook(data, None, response)
            spent["headers"] = clock() - t
        deployment_id = "d0"
        logged = {**kwargs, "litellm_call_id": call_id, "litellm_params": {"metadata": {"model_group": GROUP}},
                  "standard_logging_object": {
                      "metadata": {"usage_object": response.usage.model_dump()}, "model_id": deployment_id,
                      "model_group": GROUP, "litellm_call_id": call_id,
                      "custom_llm_provider": call.deployment.get("custom_llm_provider"),
                      "model": call.deployment.get("model"), "api_base": call.deployment.get("api_base")}}
        flush()
        if plugin is not None:
            t = clock()
            await plugin.async_log_success_event(logged, response, None, None)
            spent["success"] = clock() - t
        return spent


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


def _ms(seconds: float) -> float:
    return round(1000 * seconds, 4)


async def one_run(args, workload: str) -> dict:
    lanes = real_lanes(args.copies) if workload == "real" else pi_lanes(args.sessions, args.turns)
    stages = Stages() if args.stages else None
    if stages:
        stages.install()
    paths = PathCounter()
    with tempfile.TemporaryDirectory(prefix="hooks-cpu-log-") as log_dir:
        replay = Replay(args, lanes, Path(log_dir), paths)
        if stages:
            for plugin in replay.plugins:
                stages.install_store(plugin.core.store)
        # The set-up's objects (the flush's among them) out of the collector's reach, as
        # bench/load.py's proxies freeze their start-up heap.
        gc.collect()
        gc.freeze()
        try:
            await replay.run_round(True)  # warm-up: LiteLLM's and the plugin's lazy imports, first heads
            await replay.run_round(False)
            paths.counts.clear()
            paths.by_agent.clear()
            paths.trace.clear()
            if stages:
                stages.seconds.clear()
                stages.counts.clear()
            rng = random.Random(args.seed)
            rounds = []
            for _ in range(args.rounds):
                order = [True, False] if rng.random() < 0.5 else [False, True]
                pair = {}
                for on in order:
                    pair[on] = await replay.run_round(on)
                rounds.append(pair)
            stats = {k: v for k, v in replay.plugins[0].core.stats.items() if v}
        finally:
            replay.close()
    calls = rounds[0][True].calls
    out = {
        "workload": workload, "lanes": len(lanes), "calls_per_round": calls, "rounds": args.rounds,
        "flush_mb": args.flush, "store": args.store, "replicas": args.replicas, "affinity": args.affinity,
        # with the plugin: the driver's thread and the log writer's (its batches of the round)
        "on_process_cpu_ms": [_ms((r[True].process_cpu + r[True].writer) / calls) for r in rounds],
        "off_process_cpu_ms": [_ms(r[False].process_cpu / calls) for r in rounds],
        "writer_ms": [_ms(r[True].writer / calls) for r in rounds],
        "hooks_ms": {s: [_ms(x) for r in rounds for x in r[True].hooks[s]] for s in STAGES},
        "per_call_on_ms": [_ms(x) for r in rounds for x in r[True].per_call],
        "reasons": [x for r in rounds for x in r[True].reasons],
        "per_call_off_ms": [_ms(x) for r in rounds for x in r[False].per_call],
        "paths": dict(sorted(paths.counts.items(), key=lambda kv: -kv[1])),
        "paths_by_agent": paths.by_agent,
        "stats": stats,
    }
    if stages:
        out["stages_ms_per_call"] = stages.report(calls * args.rounds)
    return out


def summary(runs: list[dict]) -> dict:
    """The runs of one workload pooled: every round's on-minus-off difference, every call's hooks."""
    diffs = [on - off for r in runs for on, off in zip(r["on_process_cpu_ms"], r["off_process_cpu_ms"])]
    mean = statistics.mean(diffs)
    se2 = 2 * statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else 0.0
    hooks = {s: [x for r in runs for x in r["hooks_ms"][s]] for s in STAGES}
    total = [sum(v) for v in zip(*hooks.values())]
    writer = statistics.mean(x for r in runs for x in r["writer_ms"])
    paths: dict[str, int] = {}
    for r in runs:
        for k, v in r["paths"].items():
            paths[k] = paths.get(k, 0) + v
    turns = sum(paths.values())
    by_path: dict[str, list[float]] = {}  # all hooks' CPU of each call, by the path its transform took
    for r in runs:
        calls = [sum(v) for v in zip(*(r["hooks_ms"][s] for s in STAGES))]
        for reason, ms in zip(r.get("reasons") or [], calls):
            by_path.setdefault(reason, []).append(ms)
    by_stage = {s: {"mean": round(statistics.mean(v), 4), "p50": round(_pct(v, 0.5), 4), "p99": round(_pct(v, 0.99), 4)}
                for s, v in hooks.items() if any(v)}
    return {
        "workload": runs[0]["workload"], "runs": len(runs), "rounds": sum(r["rounds"] for r in runs),
        "calls_per_round": runs[0]["calls_per_round"], "lanes": runs[0]["lanes"],
        "on_minus_off_ms": round(mean, 4), "on_minus_off_2se_ms": round(se2, 4),
        "off_ms_per_call": round(statistics.mean(x for r in runs for x in r["off_process_cpu_ms"]), 4),
        "hooks_ms": {**by_stage, "all hooks": {"mean": round(statistics.mean(total), 4),
                                               "p50": round(_pct(total, 0.5), 4), "p99": round(_pct(total, 0.99), 4)},
                     "log writer thread": {"mean": round(writer, 4)}},
        "appended_share": round(paths.get("appended", 0) / turns, 4) if turns else None,
        "incremental_share": round((paths.get("appended", 0) + paths.get("reused", 0)) / turns, 4) if turns else None,
        "paths": dict(sorted(paths.items(), key=lambda kv: -kv[1])),
        "hooks_ms_by_path": {k: {"calls": len(v), "mean": round(statistics.mean(v), 4), "p99": round(_pct(v, 0.99), 4)}
                             for k, v in sorted(by_path.items(), key=lambda kv: -len(kv[1]))},
        **({"stages_ms_per_call": runs[0]["stages_ms_per_call"]} if "stages_ms_per_call" in runs[0] else {}),
    }


class Stages:
    """``--stages``: thread CPU per call of the steps inside the hooks (each rule, the store calls,
    profile detection, the measured shape, the tools' first encoding, the reporting), by wrappers
    this bench puts around them (the package is not changed). Nested steps are counted in their
    callers too; the wrappers' own cost (~1 µs each) inflates the totals."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def wrap(self, name: str, fn):
        import functools
        import inspect

        seconds, counts = self.seconds, self.counts
        if inspect.iscoroutinefunction(fn):
            async def timed(*a, **k):
                started = time.thread_time()
                try:
                    return await fn(*a, **k)
                finally:
                    seconds[name] = seconds.get(name, 0.0) + time.thread_time() - started
                    counts[name] = counts.get(name, 0) + 1
        else:
            def timed(*a, **k):
                started = time.thread_time()
                try:
                    return fn(*a, **k)
                finally:
                    seconds[name] = seconds.get(name, 0.0) + time.thread_time() - started
                    counts[name] = counts.get(name, 0) + 1
        return functools.wraps(fn)(timed)

    def install(self) -> None:
        from litellm_prefix.fleet import affinity
        from litellm_prefix.measure import prefix, sinks
        from litellm_prefix.request import core, drift, pipeline, profiles, wire

        pipeline.RULES[:] = [self.wrap(f"rule {rule.__name__}", rule) for rule in pipeline.RULES]
        pipeline.STATELESS_RULES[:] = [self.wrap(f"stateless rule {rule.__name__}", rule)
                                       for rule in pipeline.STATELESS_RULES]
        core.pipeline = _Module(pipeline, run=self.wrap("pipeline.run", pipeline.run),
                                run_hints=self.wrap("pipeline.run_hints (provider hints)", pipeline.run_hints))
        core.identify = self.wrap("session.identify", core.identify)
        for adapter in (wire.chat, wire.anthropic, wire.responses):
            adapter.read = self.wrap(f"wire read ({adapter.__name__.rsplit('.', 1)[-1]})", adapter.read)
            adapter.write = self.wrap(f"wire write ({adapter.__name__.rsplit('.', 1)[-1]})", adapter.write)
        core.profiles = _Module(profiles, detect=self.wrap("profile detection", profiles.detect))
        sinks.prefix = _Module(prefix, measure=self.wrap("measured shape (prefix.measure)", prefix.measure))
        drift._encode_tools = self.wrap("tools' first encoding (drift._encode_tools)", drift._encode_tools)
        target_module.resolve = self.wrap("deployment target (target.resolve)", target_module.resolve)
        affinity.head_blocks_of = self.wrap("head blocks (affinity.head_blocks_of)", affinity.head_blocks_of)
        for cls, names in ((core.Stabilizer, ("_run_with_journal", "_unchanged_since_applied", "_probe", "_remember",
                                              "_generation", "_first_keys", "_compaction_links", "_apply_hints")),
                           (sinks.Sinks, ("transformed", "completed", "_remember")),
                           (affinity.SessionAffinity, ("filter", "answered", "session_of")),
                           (PrefixStabilizer, ("async_pre_call_hook", "async_pre_call_deployment_hook",
                                               "async_log_success_event", "async_filter_deployments"))):
            for name in names:
                if hasattr(cls, name):
                    setattr(cls, name, self.wrap(f"{cls.__name__}.{name}", getattr(cls, name)))

    def install_store(self, store) -> None:
        for name in ("load", "save", "put_texts", "get_texts"):
            setattr(store, name, self.wrap(f"store.{name}", getattr(store, name)))

    def report(self, calls: int) -> dict[str, float]:
        return {f"{name} ({self.counts.get(name, 0) / calls:.2f}/call)": round(1000 * seconds / calls, 4)
                for name, seconds in sorted(self.seconds.items(), key=lambda kv: -kv[1])}


class _Module:
    """A module with some of its functions replaced, for the modules that call them by attribute."""

    def __init__(self, module, **replaced) -> None:
        self._module, self._replaced = module, replaced

    def __getattr__(self, name: str):
        return self._replaced[name] if name in self._replaced else getattr(self._module, name)


# -- memory per active session ----------------------------------------------------------


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _pi_memory_lanes(sessions: int, turns: int, head_tokens: int) -> list[Lane]:
    import harness.sessions as hs

    lanes = []
    for i in range(sessions):
        s = Session(i, sessions, "mem")
        s.client = hs.PiClient(memory=["User prefers tabs", "Project uses uv"], extensions={"todo": "- [ ] ship"},
                               session=f"mem-{i}", seed=100 + i, tokens=head_tokens)
        calls = []
        for turn in range(turns):
            body = orjson.loads(s.advance(turn))
            body["model"] = GROUP
            headers = {"x-session-id": s.client.session}
            body["metadata"] = {"headers": headers}
            calls.append(Call("acompletion", headers, orjson.dumps(body), [("acompletion", None, False)],
                              dict(PI_DEPLOYMENT), head_tokens, head_tokens - 100 if turn else 0, "pi-like"))
        lanes.append(Lane(s.tag, calls))
    return lanes


async def memory_run(args, on: bool, workload: str) -> dict:
    """RSS growth while sessions are active at once (``--memory``), in this process with the plugin
    (``on``) or the same driver without it: ``pi-like``, ``--sessions`` sessions with
    ``--head-tokens`` heads, each past its ``--turns``-th turn and none ended; ``real``, the
    real-agent lanes (``--copies`` per agent), each through all its calls (a lane is one user of
    that agent: its sessions one after another)."""
    if workload == "real":
        lanes = real_lanes(args.copies)
    else:
        lanes = _pi_memory_lanes(args.sessions, args.turns, args.head_tokens)
    args.flush = 0
    with tempfile.TemporaryDirectory(prefix="hooks-mem-log-") as log_dir:
        replay = Replay(args, lanes, Path(log_dir), None)
        # warm: another lane's first calls through first (imports, the process's first memos)
        warm = [Lane("warm", (_pi_memory_lanes(1, 2, 2000) if workload != "real" else lanes)[0].calls[:2])]
        saved, replay.lanes = replay.lanes, warm
        await replay.run_round(on)
        replay.lanes = saved
        gc.collect()
        before = _rss()
        await replay.run_round(on)
        gc.collect()
        after = _rss()
        held = {}
        if on:
            core = replay.plugins[0].core
            held = {"streams": len(core.streams), "stream_record_bytes": core.streams._records.currsize,
                    "seen": len(core.sinks.seen), "measured_sessions": len(core.sinks.sessions)}
        replay.close()
    return {"on": on, "workload": workload, "active": len(lanes), "turns": args.turns, "head_tokens": args.head_tokens,
            "rss_growth_bytes": after - before, "held": held}


# -- main ------------------------------------------------------------------------------


def _child(args, extra: list[str]) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = fh.name
    cmd = [sys.executable, "-m", "bench.hooks_cpu", "--one", "--out", out, *extra]
    subprocess.run(cmd, check=True, cwd=ROOT)
    result = json.loads(Path(out).read_text())
    os.unlink(out)
    return result


def _common(args) -> list[str]:
    return ["--rounds", str(args.rounds), "--flush", str(args.flush), "--store", args.store,
            "--replicas", str(args.replicas), "--copies", str(args.copies), "--sessions", str(args.sessions),
            "--turns", str(args.turns), *(["--affinity"] if args.affinity else [])]


def show(report: dict) -> None:
    for s in report["workloads"]:
        print(f"{s['workload']}: {s['lanes']} lanes, {s['calls_per_round']} calls a round, {s['runs']} runs, "
              f"{s['rounds']} rounds pooled")
        print(f"  plugin on - off, process CPU per call: {s['on_minus_off_ms']:.3f} ms ±{s['on_minus_off_2se_ms']:.3f}"
              f" (off: {s['off_ms_per_call']:.2f} ms of driver a call)")
        for stage, v in s["hooks_ms"].items():
            print(f"  {stage:<18} mean {v['mean']:.3f} ms" + (f", p50 {v['p50']:.3f}, p99 {v['p99']:.3f}" if "p50" in v else ""))
        print(f"  appended path: {s['appended_share']:.1%} of turns; incremental (appended or reused): "
              f"{s['incremental_share']:.1%}")
        by_path = s.get("hooks_ms_by_path") or {}
        for reason, n in s["paths"].items():
            cost = by_path.get(reason)
            print(f"    {n:5d}  {reason}" + (f"  (all hooks {cost['mean']:.3f} ms mean, p99 {cost['p99']:.3f})"
                                              if cost else ""))
        for name, ms in (s.get("stages_ms_per_call") or {}).items():
            print(f"    {ms:7.3f} ms  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="real,pi-like", help="real, pi-like, or both (comma-separated)")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes, pooled")
    parser.add_argument("--rounds", type=int, default=4, help="on/off round pairs per run (after a warm-up pair)")
    parser.add_argument("--copies", type=int, default=COPIES, help="real workload: lanes per agent")
    parser.add_argument("--sessions", type=int, default=32, help="pi-like sessions (--memory: active sessions)")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--flush", type=int, default=8, help="megabytes written between hooks (0: warm caches)")
    parser.add_argument("--store", choices=("memory", "redis"), default="memory")
    parser.add_argument("--replicas", type=int, default=1, help="plugins sharing the store, calls alternating")
    parser.add_argument("--affinity", action="store_true", help="sessionAffinity: always, two deployments")
    parser.add_argument("--stages", action="store_true", help="where the time goes inside the hooks (wrappers)")
    parser.add_argument("--memory", action="store_true", help="resident memory per active session, plugin vs none")
    parser.add_argument("--head-tokens", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.one:  # one run in this process (a child of the pooled run)
        if args.memory:
            mode, workload = args.workload.split(":")
            result = asyncio.run(memory_run(args, mode == "on", workload))
        else:
            result = asyncio.run(one_run(args, args.workload))
        Path(args.out).write_text(json.dumps(result) + "\n")
        return
    if args.memory:
        out = args.out or str(ROOT / "bench" / "results" / "hooks_memory.json")
        report = {"runs_each": args.runs, "workloads": []}
        for workload in [w.strip() for w in args.workload.split(",") if w.strip()]:
            pairs = []
            for run in range(args.runs):
                for on in ((True, False) if run % 2 == 0 else (False, True)):
                    pairs.append(_child(args, ["--memory", "--workload", f"{'on' if on else 'off'}:{workload}",
                                               "--head-tokens", str(args.head_tokens), *_common(args)]))
            on = [p["rss_growth_bytes"] for p in pairs if p["on"]]
            off = [p["rss_growth_bytes"] for p in pairs if not p["on"]]
            active = pairs[0]["active"]
            per = (statistics.median(on) - statistics.median(off)) / active
            report["workloads"].append({"workload": workload, "active_sessions": active,
                                        "head_tokens": args.head_tokens if workload != "real" else None,
                                        "per_active_session_bytes": round(per), "runs": pairs})
            print(f"{workload}: {active} active sessions" + (f" at {args.head_tokens}-token heads" if workload != "real"
                                                              else "") +
                  f": RSS growth with the plugin {[round(x / 1e6, 1) for x in on]} MB, without "
                  f"{[round(x / 1e6, 1) for x in off]} MB: {per / 1000:.0f} KB per active session (medians); "
                  f"held: {next(p for p in pairs if p['on'])['held']}")
        Path(out).write_text(json.dumps(report, indent=1) + "\n")
        return
    out = args.out or str(ROOT / "bench" / "results" / "hooks_cpu.json")
    report = {"flush_mb": args.flush, "store": args.store, "replicas": args.replicas, "affinity": args.affinity,
              "workloads": []}
    for workload in [w.strip() for w in args.workload.split(",") if w.strip()]:
        runs = [_child(args, ["--workload", workload, "--seed", str(args.seed + i), *_common(args)])
                for i in range(args.runs)]
        if args.stages:
            runs[0]["stages_ms_per_call"] = _child(args, ["--workload", workload, "--stages",
                                                          *_common(args)])["stages_ms_per_call"]
        pooled = summary(runs)
        pooled["per_run"] = [{"on_minus_off_ms": round(statistics.mean(
            a - b for a, b in zip(r["on_process_cpu_ms"], r["off_process_cpu_ms"])), 4), "paths": r["paths"],
            "stats": r["stats"]} for r in runs]
        report["workloads"].append(pooled)
    Path(out).write_text(json.dumps(report, indent=1) + "\n")
    show(report)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
