"""The plugin under load: latency, proxy CPU, errors and store fallbacks, with one and two replicas.

32 concurrent pi-like agent sessions (10-30k-token prompts: a sectioned system prompt,
35 tools, a growing history with tool calls; a memory write, a notification run whose
patch removes an extension section, a memory deletion) run 10 turns each through real
LiteLLM proxy processes in front of the recording upstream:

- ``baseline``: a proxy without the plugin;
- ``memory``: a proxy with the plugin, ``store: memory`` (the default install);
- ``redis``: a proxy with the plugin, ``store: redis://`` (a local redis-server from the
  virtualenv), default time budget (``storeTimeoutMs`` 50);
- ``replicas``: two proxies with the plugin sharing that Redis, each session's turns
  alternating between them, against ``baseline-2``: two proxies without the plugin
  taking turns the same way (two processes share a wave, so they compare with two);
- ``calibration``: a proxy without the plugin whose pre-call hook spends a known CPU time
  per request (``--calibration-ms``, default 2.0; ``bench/proxy_gc.py``), measured like
  the plugin.

Each of the last four has a switched-off twin, ``memory-off``, ``redis-off``,
``replicas-off`` and ``calibration-off``: sessions of their own sent by the same proxy
processes to a second model group for the same upstream, for which the plugin is switched
off (``model_info.litellm_prefix.enabled: false``; the calibration hook skips that group).
The target (CPU per request +10% at most, p50 1.10x at most) is printed against the twin,
the ``CPU vs same process, off`` and ``p50 vs same process, off`` columns (the same process
with and without the plugin's work, its two waves sent back to back in either order), and
against another process without the plugin, as the issue that set it reads it. Two
processes differ by about the target: in a four-round run two plain proxies read 19.05
ms per request against a third's 17.02 (+12%, no plugin anywhere), while ``memory`` minus
``memory-off``, round by round, followed the plugin's own hook time and both moved together
against ``baseline``. The process-against-process columns (``CPU vs another process
without``) read against ``baseline``, or ``baseline-2`` for the replicas; also printed is
what each twin costs against the proxy without the plugin: what two processes differ by,
plus any cost the plugin's work puts on its process's other requests. The switched-off
group still runs the hooks' early return (0.14-0.2 ms per request with the timing wrappers,
printed), so the same-process reading is low by about that much.

Each configuration has proxy processes of its own (eight in all): a proxy that also served
another configuration's waves could come to its own wave warmer (connections, LiteLLM's
short-lived caches) than one that had been idle since its last.

Measured inside the proxies with the plugin, wave by wave: the thread CPU of every plugin
hook of each call (``proxy_gc.timed``, the plugin as the proxy builds it with each hook
timed; the steps of a hook only, not the other requests the event loop runs while one
waits on Redis), against the rest of the same proxy's CPU in the same waves: the plugin's
own share, and how much of the difference is its own steps. CPU added to the request path
can read over in the proxy's total, in the same process too: the calibration hook's 2.0 ms
read +2.7 ms against its twin in one run and +2.0 ms in the next (the rest is the process
doing its other work dearer; not latency, not hosting a hook: ``bench/latency_cpu.py``).
The user and system split and the minor page faults per request are reported too (``/proc``).

Every proxy, with the plugin or without, also loads ``bench/proxy_gc.py``: its start-up heap
is frozen at the first request (a full collection of a LiteLLM proxy's heap costs ~0.5 s of
CPU and lands in an arbitrary wave, in any configuration), and its collections are counted
and reported (``--no-freeze``: left to the collector).

Turn by turn, each configuration sends its 32 requests at once, one configuration after
the other (the order is shuffled every turn, each twin right before or after its
configuration), so all of them see the same machine. Reported, per configuration and
against its twin and another process without the plugin: median and p90 latency,
proxy CPU per request (user + system time of the proxy processes during their own
waves and the second after each, when their after-response work runs; from /proc), errors,
store fallbacks (the plugin's warning lines in the proxy logs), Redis calls per request
(Redis's own EVALSHA count), and whether every session's upstream head was byte-identical on
every turn and identical to the single-proxy head (``heads stable``), with nothing lost and every turn a prefix of the next.

    make bench            # or: .venv/bin/python -m bench.load [--sessions 32 --turns 10 --rounds 1]

``--rounds 4`` runs the workload four times with fresh sessions (40 waves per configuration,
about 14 minutes): each CPU ratio is printed with two standard errors of its turn-by-turn
difference, about ±15% after one round and ±6-8% after four.

``--log``: every proxy with the plugin also writes the JSONL log (``LITELLM_PREFIX_LOG``), as an
operator who reads ``litellm-prefix report`` runs it; the records each wrote are counted.

``--pool RESULT...`` runs nothing: it reads the result files of several runs of the same code
as one (every comparison's waves paired within their run, the CPU ratio with two standard
errors over all of them, the runs' p50 ratios and their mean).

The numbers go to bench/results/load.json. Ratios are what to compare; absolute times
depend on a shared, noisy machine.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import httpx

from harness.procs import Proxy, RedisServer, Upstream, proxy_config
from harness.sessions import PiClient, memory_flip_turn
from litellm_prefix.request.rules.mid_system import SYSTEM_UPDATE_NOTE

ROOT = Path(__file__).resolve().parent.parent

CONFIGS = ("baseline", "memory", "memory-off", "redis", "redis-off", "baseline-2", "replicas", "replicas-off",
           "calibration", "calibration-off")
AGAINST = {"memory": "baseline", "redis": "baseline", "replicas": "baseline-2", "calibration": "baseline"}
# The same proxy processes, sessions of their own sent to the model group that switches the
# plugin off (the calibration hook off): each ratio is printed against these too (module docstring).
SAME_PROCESS = {"memory": "memory-off", "redis": "redis-off", "replicas": "replicas-off",
                "calibration": "calibration-off"}
OFF_GROUP = "chat-model-off"
PLUGIN = ("memory", "redis", "replicas")
REDIS_CONFIGS = ("redis", "redis-off", "replicas", "replicas-off")  # Redis calls counted (none when off)
# Waves sent back to back, in either order: a configuration and its switched-off twin.
UNITS = (("baseline",), ("baseline-2",), *((c, off) for c, off in SAME_PROCESS.items()))
REDIS_PROXIES = ("redis-a", "redis-b", "redis-c")  # redis-a serves ``redis``, the other two ``replicas``
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def proxy_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment every proxy of this benchmark starts from: ``environ`` (this process's)
    without the plugin's own variables (the proxies get only the settings this benchmark gives
    them), no global settings file, the cost map from the installed package, and the repository
    and bench/ (proxy_gc.py) on ``PYTHONPATH``. This process's own environment is left as it is."""
    env = {k: v for k, v in environ.items() if k != "LITELLM_PREFIX" and not k.startswith("LITELLM_PREFIX_")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["LITELLM_PREFIX_CONFIG"] = str(ROOT / "bench" / "no-such-global-settings.json")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "bench"), environ.get("PYTHONPATH")) if p)
    return env


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def plugin_cpu_of(proxy: Proxy) -> tuple[float, float]:
    """(pre-call requests, seconds in the plugin's hooks) so far, from proxy_gc.timed_stabilizer's file."""
    import struct

    path = proxy.log.parent.parent / f"{proxy.log.parent.name}.plugin-cpu"
    try:
        requests, seconds = struct.unpack("2d", path.read_bytes()[:16])
    except (OSError, struct.error):
        return 0.0, 0.0
    return requests, seconds


def listen_overflows() -> int | None:
    """The kernel's count of connections dropped because a listening socket's backlog was full
    (TcpExt ListenOverflows, machine-wide). Each one costs its client a SYN retransmit (1 s, then
    3 s): a run where it grows has waves stalled by a server's backlog, not by the proxies."""
    try:
        with open("/proc/net/netstat") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:") and "ListenOverflows" in names.split():
            return int(values.split()[names.split().index("ListenOverflows")])
    return None


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU of every process in a process group (the proxy and any children)."""
    return group_counters(pgid)[0]


def group_stats(pgid: int):
    """(pid, the fields of ``/proc/<pid>/stat`` after the command) of every process in a process
    group (the proxy and any children): state ppid pgrp ... minflt(7) utime(11) stime(12)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            yield entry, fields


def group_counters(pgid: int) -> tuple[float, float, float, int]:
    """(user + system CPU s, user CPU s, system CPU s, minor page faults) of every process in a
    process group (the proxy and any children)."""
    user = system = faults = 0
    for _, fields in group_stats(pgid):
        user, system, faults = user + int(fields[11]), system + int(fields[12]), faults + int(fields[7])
    return (user + system) / CLOCK_TICKS, user / CLOCK_TICKS, system / CLOCK_TICKS, faults


class Session:
    """One pi-like agent session; ``request(turn)`` is the request of that turn (deterministic)."""

    def __init__(self, index: int, sessions: int, tag: str, model: str | None = None) -> None:
        tokens = 9000 + (18000 * index) // max(1, sessions - 1)  # head 9-27k tokens; with history 10-30k
        self.client = PiClient(memory=["User prefers tabs", "Project uses uv"], extensions={"todo": "- [ ] ship"},
                               session=f"load-{tag}-{index}", seed=100 + index, tokens=tokens)
        self.tag = f"[{tag} {index}]"
        self.model = model
        self.requests: list[dict] = []

    def advance(self, turn: int) -> bytes:
        client = self.client
        memory_flip_turn(client, turn, label=f"{self.tag} ")
        request = client.request()
        del request["metadata"]  # the session id travels in x-session-id, as from a client
        if self.model:
            request["model"] = self.model
        self.requests.append(request)
        client.tool_round()
        client.assistant("ok")
        return json.dumps(request).encode()


def head_of(body: dict) -> str:
    head = json.dumps([body["messages"][0], body.get("tools")], sort_keys=True)
    return hashlib.sha256(head.encode()).hexdigest()[:16]


def roles(messages: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if v is not None} for m in messages if m["role"] in ("user", "assistant", "tool")]


def kept(received: list[dict], sent: list[dict]) -> bool:
    """Every user, assistant and tool message the client sent reached the upstream, in order, as
    sent, or (a user message) with the plugin's operator note after its text: a session note (the
    memory correction) placed after it, folded in as a user-turn note where the target takes no
    mid-conversation system message (``rules/mid_system``)."""
    got, want = roles(received), roles(sent)
    return len(got) == len(want) and all(g == w or _noted(g, w) for g, w in zip(got, want))


def _noted(got: dict, want: dict) -> bool:
    text, was = got.get("content"), want.get("content")
    return (got["role"] == want["role"] == "user" and isinstance(text, str) and isinstance(was, str)
            and text.startswith(f"{was}\n\n{SYSTEM_UPDATE_NOTE}")
            and {k: v for k, v in got.items() if k != "content"} == {k: v for k, v in want.items() if k != "content"})


async def warm_up(client: httpx.AsyncClient, proxies: Iterable[Proxy]) -> None:
    """Four sessions' first turn through each proxy: LiteLLM's first requests pay for lazy imports
    and connection set-up, which belong to no configuration's waves."""
    warm = [Session(i, 4, "warm") for i in range(4)]
    bodies = [s.advance(0) for s in warm]
    for proxy in proxies:
        await wave(client, [proxy], bodies, warm, 0)


async def wave(client: httpx.AsyncClient, targets: list[Proxy], bodies: list[bytes], sessions: list[Session],
               turn: int) -> tuple[list[float], int]:
    async def one(i: int) -> float | None:
        proxy = targets[(i + turn) % len(targets)]  # replicas: each session's turns alternate
        started = time.perf_counter()
        try:
            response = await client.post(f"{proxy.url}/v1/chat/completions", content=bodies[i], headers={
                "authorization": f"Bearer {proxy.key}", "content-type": "application/json",
                "x-session-id": sessions[i].client.session})
        except httpx.HTTPError:
            return None
        elapsed = (time.perf_counter() - started) * 1000
        return elapsed if response.status_code == 200 else None

    results = await asyncio.gather(*(one(i) for i in range(len(bodies))))
    return [r for r in results if r is not None], sum(r is None for r in results)


def redis_evalsha(server) -> int:
    """EVALSHA calls the Redis server (or every node of a cluster) has counted."""
    import redis

    total = 0
    for node in getattr(server, "nodes", [server]):
        client = redis.Redis.from_url(node.url)
        try:
            total += client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
        finally:
            client.close()
    return total


def fallback_lines(proxies: list[Proxy]) -> int:
    count = 0
    for proxy in proxies:
        for line in proxy.log.read_text(errors="replace").splitlines():
            if "litellm-prefix: shared store" in line and "shared store answers again" not in line:
                count += 1
    return count


def gc_stats(proxy: Proxy) -> dict | None:
    """The proxy's last ``proxy-gc`` line (proxy_gc.py): collections per generation and their CPU."""
    lines = [line for line in proxy.log.read_text(errors="replace").splitlines() if line.startswith("proxy-gc ")]
    return json.loads(lines[-1][len("proxy-gc "):]) if lines else None


async def run(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="litellm-prefix-load-"))
    upstream = Upstream(work)
    if args.store == "cluster":  # ``--store cluster``: the Redis configurations on a real 3-node cluster
        from harness.procs import RedisClusterServers

        redis_server = RedisClusterServers(work)
    else:
        redis_server = RedisServer(work)
    proxies: dict[str, Proxy] = {}
    try:
        base_config = proxy_config(upstream)
        # ``memory-off``: the memory proxy's own model group with the plugin switched off
        # (``model_info.litellm_prefix.enabled: false``): its requests pass through unchanged.
        chat = next(m for m in base_config["model_list"] if m["model_name"] == "chat-model")
        base_config["model_list"].append({"model_name": OFF_GROUP, "litellm_params": dict(chat["litellm_params"]),
                                          "model_info": {"litellm_prefix": {"enabled": False}}})
        # Every proxy, with and without the plugin, gets the same collector set-up (proxy_gc.py):
        # its start-up heap frozen at the first request (unless --no-freeze), collections counted.
        plain = {**base_config, "litellm_settings": {"callbacks": ["proxy_gc.handler"]}}
        # The plugin as litellm_prefix.proxy_handler builds it, each hook timed in thread CPU
        # (proxy_gc.timed_stabilizer): its own share of the proxy's CPU, read wave by wave.
        base_config = {**base_config, "litellm_settings": {"callbacks": ["proxy_gc.timed", "proxy_gc.handler"]}}
        started = time.monotonic()
        # Unbuffered output, so the plugin's warning lines (store fallbacks) are in the log when counted.
        env = {"PYTHONUNBUFFERED": "1", "BENCH_GC_FREEZE": "0" if args.no_freeze else "1"}
        shared = {**env, "LITELLM_PREFIX_STORE": redis_server.url}
        base = proxy_environment(os.environ)
        proxies["baseline"] = Proxy(work, plain, env, name="baseline", base=base)
        # Every configuration but memory-off has proxies of its own (see the module's docstring).
        proxies["baseline-b"] = Proxy(work, plain, env, name="baseline-b", base=base)
        proxies["baseline-c"] = Proxy(work, plain, env, name="baseline-c", base=base)
        timed = {name: {"BENCH_PLUGIN_CPU_FILE": str(work / f"{name}.plugin-cpu"),
                        # ``--log``: the JSONL log ``litellm-prefix report`` reads, one file per proxy.
                        **({"LITELLM_PREFIX_LOG": str(work / f"{name}.jsonl")} if args.log else {})}
                 for name in ("memory", *REDIS_PROXIES)}
        proxies["memory"] = Proxy(work, base_config, {**env, **timed["memory"]}, name="memory", base=base)
        for name in REDIS_PROXIES:
            proxies[name] = Proxy(work, base_config, {**shared, **timed[name]}, name=name, base=base)
        calibrated = {**plain, "litellm_settings": {"callbacks": ["proxy_gc.calibration", "proxy_gc.handler"]}}
        proxies["calibration"] = Proxy(work, calibrated, {**env, "BENCH_BURN_MS": str(args.calibration_ms),
                                                          "BENCH_BURN_SKIP_MODEL": OFF_GROUP}, name="calibration",
                                          base=base)
        for proxy in proxies.values():
            proxy.wait_ready()
        print(f"{len(proxies)} proxies ready in {time.monotonic() - started:.0f} s", flush=True)
        targets = {"baseline": [proxies["baseline"]], "memory": [proxies["memory"]],
                   "baseline-2": [proxies["baseline-b"], proxies["baseline-c"]],
                   "redis": [proxies["redis-a"]], "replicas": [proxies["redis-b"], proxies["redis-c"]],
                   "calibration": [proxies["calibration"]]}
        targets.update({off: targets[config] for config, off in SAME_PROCESS.items()})
        # ``--rounds``: the same 10-turn workload again with fresh sessions, for more waves per
        # configuration (one configuration's CPU moves ±15-25% from wave to wave).
        sessions = {c: [Session(i, args.sessions, c if r == 0 else f"{c}.{r}", OFF_GROUP if c in SAME_PROCESS.values() else None)
                        for r in range(args.rounds) for i in range(args.sessions)] for c in CONFIGS}
        latencies = {c: [] for c in CONFIGS}
        cpu = {c: 0.0 for c in CONFIGS}
        split = {c: [0.0, 0.0, 0] for c in CONFIGS}  # user s, system s, minor page faults
        per_turn: dict[str, list[tuple[float, float]]] = {c: [] for c in CONFIGS}  # (wave p50 ms, CPU s)
        plugin_cpu = {c: [0.0, 0.0] for c in CONFIGS}  # requests, seconds: inside the plugin's hooks
        errors = {c: 0 for c in CONFIGS}
        evalsha = {c: 0 for c in CONFIGS}
        upstream_bodies: dict[str, dict[int, list[dict]]] = {c: {i: [] for i in range(len(sessions[c]))}
                                                             for c in CONFIGS}
        # A new connection per request: uvicorn closes idle keep-alive connections after 5 s,
        # and a request sent on one just as it closes fails in the client, not the proxy.
        limits = httpx.Limits(max_connections=4 * args.sessions, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=300, limits=limits) as client:
            await warm_up(client, proxies.values())
            upstream.take()
            # A fresh proxy's first calls to Redis open the connection and load the scripts: a slow
            # answer there is part of the warm-up, not of the run (counted apart).
            warm_up_fallbacks = {name: fallback_lines([proxies[name]]) for name in REDIS_PROXIES}
            overflows_before = listen_overflows()
            for round_, turn in ((r, t) for r in range(args.rounds) for t in range(args.turns)):
                # Every configuration runs early and late; its switched-off twin right before or after it.
                shuffler = random.Random(round_ * 1000 + turn)
                units = [list(unit) for unit in UNITS]
                shuffler.shuffle(units)
                for unit in units:
                    shuffler.shuffle(unit)
                order = [config for unit in units for config in unit]
                for config in order:
                    group = sessions[config][round_ * args.sessions:(round_ + 1) * args.sessions]
                    bodies = [s.advance(turn) for s in group]
                    groups = [p.proc.pid for p in targets[config]]
                    counters_before = [group_counters(g) for g in groups]
                    inside_before = [plugin_cpu_of(p) for p in targets[config]]
                    evalsha_before = redis_evalsha(redis_server) if config in REDIS_CONFIGS else 0
                    took, failed = await wave(client, targets[config], bodies, group, turn)
                    # The proxies' after-response work (LiteLLM's logging, the success callbacks) runs
                    # once the responses are out: it belongs to this wave's requests, so the CPU is read
                    # once it is done.
                    await asyncio.sleep(1)
                    counted = [[a - b for a, b in zip(after, before)]
                               for after, before in zip((group_counters(g) for g in groups), counters_before)]
                    spent = sum(c[0] for c in counted)
                    for i in range(3):
                        split[config][i] += sum(c[i + 1] for c in counted)
                    for proxy, before in zip(targets[config], inside_before):
                        after = plugin_cpu_of(proxy)
                        plugin_cpu[config][0] += after[0] - before[0]
                        plugin_cpu[config][1] += after[1] - before[1]
                    cpu[config] += spent
                    per_turn[config].append((statistics.median(took) if took else float("nan"), spent))
                    if config in REDIS_CONFIGS:
                        evalsha[config] += redis_evalsha(redis_server) - evalsha_before
                    latencies[config] += took
                    errors[config] += failed
                    for record in upstream.take():
                        body = json.loads(record["body"])
                        index = next(i for i, s in enumerate(sessions[config]) if s.tag in record["body"])
                        upstream_bodies[config][index].append(body)
                print(f"turn {turn + 1}/{args.turns} done" + (f" (round {round_ + 1}/{args.rounds})"
                                                                if args.rounds > 1 else ""), flush=True)
        overflows_after = listen_overflows()
        requests = args.sessions * args.turns * args.rounds
        reference = upstream_bodies["memory"]
        report: dict = {"sessions": args.sessions, "turns": args.turns, "rounds": args.rounds, "store": args.store,
                        "log": args.log, "configs": {}}
        for config in CONFIGS:
            stable, lost, monotone, most_heads = True, False, True, 0
            for i, bodies in upstream_bodies[config].items():
                sent = sessions[config][i].requests
                lost |= len(bodies) != len(sent) or not all(
                    kept(b["messages"], r["messages"]) for b, r in zip(bodies, sent))
                monotone &= all(later["messages"][: len(earlier["messages"])] == earlier["messages"]
                                for earlier, later in zip(bodies, bodies[1:]))
                most_heads = max(most_heads, len({head_of(b) for b in bodies}))
                if config in PLUGIN:  # one head per session, the same as the single proxy's
                    stable &= len({head_of(b) for b in bodies} | {head_of(b) for b in reference[i]}) == 1
            entry = {
                "requests": len(latencies[config]) + errors[config],
                "p50_ms": statistics.median(latencies[config]) if latencies[config] else None,
                "p90_ms": percentile(latencies[config], 0.9) if latencies[config] else None,
                "cpu_ms_per_request": 1000 * cpu[config] / requests,
                # Where the CPU goes in the kernel's accounting: a page fault is system time.
                "user_ms_per_request": 1000 * split[config][0] / requests,
                "system_ms_per_request": 1000 * split[config][1] / requests,
                "minor_faults_per_request": split[config][2] / requests,
                "errors": errors[config],
                "nothing_lost": not lost,
                "prefix_monotone": monotone,
                "most_heads_in_a_session": most_heads,
            }
            # CPU per request wave by wave: a full collection of the proxy's heap (~0.5 s of CPU
            # for a LiteLLM proxy) shows as one wave far above the others, in any configuration.
            entry["cpu_ms_per_request_by_turn"] = [round(1000 * spent / args.sessions, 1) for _, spent in per_turn[config]]
            if config in PLUGIN:
                entry["heads_stable"] = stable
            if plugin_cpu[config][0]:
                # Measured inside the proxy: the thread CPU of the plugin's hooks, per request, and
                # its share of the proxy's own CPU in the same waves (proxy CPU less the plugin's).
                inside = 1000 * plugin_cpu[config][1] / plugin_cpu[config][0]
                entry["plugin_hooks_cpu_ms_per_request"] = inside
                entry["plugin_hooks_vs_rest_of_proxy"] = inside / (entry["cpu_ms_per_request"] - inside)
            if config in REDIS_CONFIGS:
                entry["redis_calls_per_request"] = evalsha[config] / requests
            report["configs"][config] = entry
        if args.log:  # the log was on and written: its records, per proxy (each request's call record at least)
            report["log_records"] = {name: _lines(work / f"{name}.jsonl") for name in ("memory", *REDIS_PROXIES)}
        report["gc"] = {"frozen_at_start": not args.no_freeze,
                        **{name: gc_stats(proxy) for name, proxy in proxies.items()}}
        report["tcp_listen_overflows"] = (overflows_after - overflows_before
                                          if overflows_before is not None and overflows_after is not None else None)
        report["store_fallbacks_warm_up"] = sum(warm_up_fallbacks.values())
        report["store_fallbacks"] = sum(fallback_lines([proxies[name]]) - before
                                        for name, before in warm_up_fallbacks.items())
        # The count above can only be trusted if a fallback shows up where it is read: stop
        # Redis, send one more request, and look for its line.
        before_check = fallback_lines([proxies["redis-a"]])
        redis_server.stop()
        extra = Session(0, 1, "check")
        async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_keepalive_connections=0)) as client:
            _, failed = await wave(client, [proxies["redis-a"]], [extra.advance(0)], [extra], 0)
        await asyncio.sleep(1)
        after = fallback_lines([proxies["redis-a"]])
        report["fallback_check"] = {"errors": failed, "lines_before": before_check, "lines_after": after,
                                    "detected": after > before_check}
        for config, against in AGAINST.items():
            entry, base = report["configs"][config], report["configs"][against]
            entry["against"] = against
            entry.update(_ratios(entry, base, per_turn[config], per_turn[against]))
        for config, against in SAME_PROCESS.items():
            entry, base = report["configs"][config], report["configs"][against]
            entry["same_process"] = {"against": against, **_ratios(entry, base, per_turn[config], per_turn[against])}
        calibration = report["configs"]["calibration"]
        calibration["known_extra_ms"] = args.calibration_ms
        calibration["measured_extra_ms"] = calibration["cpu_ms_per_request"] - report["configs"]["baseline"]["cpu_ms_per_request"]
        calibration["measured_extra_ms_same_process"] = calibration["same_process"]["extra_cpu_ms_per_request"]
        return report
    finally:
        for proxy in proxies.values():
            proxy.stop()
        redis_server.stop()
        upstream.stop()


def pool(reports: list[dict]) -> dict:
    """Several runs' results read as one: each comparison's waves paired turn by turn within
    their run, the CPU ratio and its two standard errors over all of them, and the runs' p50
    ratios with their mean. One four-round run resolves a CPU ratio to about ±5-7%; the
    readings of runs of the same code scatter by about as much (README, "Under load")."""
    pooled: dict = {}
    comparisons = [(c, against, "another_process") for c, against in AGAINST.items()]
    comparisons += [(c, off, "same_process") for c, off in SAME_PROCESS.items()]
    for config, against, key in comparisons:
        waves, base_waves, p50s = [], [], []
        for report in reports:
            entry, base = report["configs"][config], report["configs"][against]
            pairs = list(zip(entry["cpu_ms_per_request_by_turn"], base["cpu_ms_per_request_by_turn"]))
            waves += [a for a, _ in pairs]
            base_waves += [b for _, b in pairs]
            p50s.append(entry["p50_ms"] / base["p50_ms"])
        mean_base = statistics.fmean(base_waves)
        extra = statistics.fmean(waves) - mean_base
        pooled.setdefault(config, {})[key] = {
            "against": against, "waves": len(waves), "runs": len(reports),
            "cpu_ratio": 1 + extra / mean_base, "extra_cpu_ms_per_request": extra,
            **_cpu_ratio_interval(waves, base_waves),
            "p50_ratio_mean": statistics.fmean(p50s), "p50_ratios": p50s,
        }
    return pooled


def print_pool(pooled: dict, paths: list[str]) -> None:
    print(f"{len(paths)} runs pooled ({', '.join(paths)}):")
    print("| config | CPU vs same process, off | p50 vs it (mean; each run) | CPU vs another process without "
          "| p50 vs it (mean; each run) |")
    print("|---|---|---|---|---|")
    for config, readings in pooled.items():
        cells = []
        for key in ("same_process", "another_process"):
            r = readings.get(key)
            if r is None:
                cells += ["-", "-"]
                continue
            cells.append(f"{(r['cpu_ratio'] - 1) * 100:+.1f}% ±{r.get('cpu_ratio_two_se', float('nan')) * 100:.1f}% "
                         f"({r['extra_cpu_ms_per_request']:+.2f} ms, {r['waves']} waves)")
            cells.append(f"{r['p50_ratio_mean']:.3f}x; " + ", ".join(f"{x:.3f}x" for x in r["p50_ratios"]))
        print(f"| {config} | " + " | ".join(cells) + " |")


def _cpu_cell(e: dict) -> str:
    if "cpu_ratio" not in e:
        return "-"
    return (f"{(e['cpu_ratio'] - 1) * 100:+.0f}% ±{e.get('cpu_ratio_two_se', float('nan')) * 100:.0f}% "
            f"({(e['cpu_ratio_turn_median'] - 1) * 100:+.0f}%)")


def _p50_cell(e: dict) -> str:
    return f"{e['p50_ratio']:.2f}x ({e['p50_ratio_turn_median']:.2f}x)" if "p50_ratio" in e else "-"


def _ratios(entry: dict, base: dict, turns: list[tuple[float, float]], base_turns: list[tuple[float, float]]) -> dict:
    pairs = list(zip(turns, base_turns))
    return {
        "p50_ratio": entry["p50_ms"] / base["p50_ms"],
        "cpu_ratio": entry["cpu_ms_per_request"] / base["cpu_ms_per_request"],
        "extra_cpu_ms_per_request": entry["cpu_ms_per_request"] - base["cpu_ms_per_request"],
        # The same ratios turn by turn (waves minutes apart see different machine load): their medians.
        "p50_ratio_turn_median": statistics.median(a[0] / b[0] for a, b in pairs),
        "cpu_ratio_turn_median": statistics.median(a[1] / b[1] for a, b in pairs if b[1] > 0),
        **_cpu_ratio_interval([a[1] for a in turns], [b[1] for b in base_turns]),
    }


def _cpu_ratio_interval(waves: list[float], base_waves: list[float]) -> dict:
    """How far the run resolves the CPU ratio: the mean of the turn-by-turn differences (the two
    waves of a turn carry the same turn of the same sessions, minutes apart at most), plus or
    minus two standard errors of it, over the base's mean. Wave to wave, one configuration's CPU
    for the same work moves by ±15-25% on a shared machine."""
    pairs = list(zip(waves, base_waves))
    if len(pairs) < 2 or not statistics.fmean(base_waves):
        return {}
    base = statistics.fmean(b for _, b in pairs)
    differences = [a - b for a, b in pairs]
    mean, error = statistics.fmean(differences), 2 * statistics.stdev(differences) / len(differences) ** 0.5
    return {"cpu_ratio_two_se": error / base,
            "cpu_ratio_interval": [1 + (mean - error) / base, 1 + (mean + error) / base]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the sessions x turns workload this many times, with fresh sessions each time "
                             "(more waves per configuration: a narrower interval on the CPU ratios)")
    parser.add_argument("--calibration-ms", type=float, default=2.0,
                        help="CPU the calibration proxy's hook spends per request (a known cost, measured like the plugin's)")
    parser.add_argument("--no-freeze", action="store_true",
                        help="leave every proxy's start-up heap to the collector (see bench/proxy_gc.py)")
    parser.add_argument("--store", choices=("redis", "cluster"), default="redis",
                        help="the shared store of the redis and replicas configurations: one redis-server, or a "
                             "3-node Redis Cluster (redis+cluster://, valkey-glide)")
    parser.add_argument("--log", action="store_true",
                        help="every proxy with the plugin writes the JSONL log (LITELLM_PREFIX_LOG), "
                             "as an operator who reads `report` runs it")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "load.json"))
    parser.add_argument("--pool", nargs="+", metavar="RESULT",
                        help="run nothing: read these result files (of runs of the same code) as one")
    args = parser.parse_args()
    if args.pool:
        print_pool(pool([json.loads(Path(p).read_text()) for p in args.pool]), args.pool)
        return
    started = time.monotonic()
    report = asyncio.run(run(args))
    report["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                         "seconds": round(time.monotonic() - started)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{args.sessions} concurrent sessions x {args.turns} turns"
          + (f", {args.rounds} rounds of fresh sessions" if args.rounds > 1 else "") + ", one run "
          f"({report['machine']['seconds']} s, {os.cpu_count()} CPUs):")
    print("| config | p50 ms | p90 ms | proxy CPU ms/request | **CPU vs same process, off** | **p50 vs same "
          "process, off** | CPU vs another process without | p50 vs it | errors | Redis calls/request | "
          "heads per session | heads stable |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for config, e in report["configs"].items():
        same = e.get("same_process") or {}
        calls = f"{e['redis_calls_per_request']:.2f}" if "redis_calls_per_request" in e else "-"
        stable = {True: "yes", False: "NO"}.get(e.get("heads_stable"), "-")
        print(f"| {config} | {e['p50_ms']:.0f} | {e['p90_ms']:.0f} | {e['cpu_ms_per_request']:.1f} | "
              f"{_cpu_cell(same)} | {_p50_cell(same)} | {_cpu_cell(e)} | {_p50_cell(e)} | {e['errors']} | {calls} | "
              f"{e['most_heads_in_a_session']} | {stable} |")
    print("(±: two standard errors of the CPU difference, turn by turn; in brackets: the median "
          "over the turns of the same ratio, turn by turn)")
    print("user / system CPU ms and minor page faults per request: " + "; ".join(
        f"{c} {e['user_ms_per_request']:.1f} / {e['system_ms_per_request']:.1f}, {e['minor_faults_per_request']:.0f}"
        for c, e in report["configs"].items()))
    print("\nThe plugin's hooks inside the proxy (thread CPU, every hook of the call), per request:")
    for config, e in report["configs"].items():
        if "plugin_hooks_cpu_ms_per_request" in e:
            print(f"  {config}: {e['plugin_hooks_cpu_ms_per_request']:.2f} ms, "
                  f"{100 * e['plugin_hooks_vs_rest_of_proxy']:+.1f}% on the rest of the proxy's CPU")
    configs = report["configs"]
    print("the switched-off requests of the plugin's processes against the proxy without the plugin (what two "
          "processes differ by, and any cost the plugin's work puts on its process's other requests): " + ", ".join(
              f"{off} {configs[off]['cpu_ms_per_request'] - configs[AGAINST[c]]['cpu_ms_per_request']:+.1f} ms"
              for c, off in SAME_PROCESS.items() if c in PLUGIN))
    plugin = [e for c, e in report["configs"].items() if c in PLUGIN]
    cal = report["configs"]["calibration"]
    print(f"calibration (a hook known to spend {cal['known_extra_ms']:.1f} ms of CPU per request, no plugin): "
          f"measured {cal['measured_extra_ms_same_process']:+.1f} ms per request against the same process "
          f"({(cal['same_process']['cpu_ratio'] - 1) * 100:+.0f}%), {cal['measured_extra_ms']:+.1f} ms against "
          f"another process ({(cal['cpu_ratio'] - 1) * 100:+.0f}%)")
    print(f"store fallbacks logged (redis proxies): {report['store_fallbacks']} during the run, "
          f"{report['store_fallbacks_warm_up']} in the warm-up (a stopped Redis afterwards: "
          f"detected {report['fallback_check']['detected']}, errors {report['fallback_check']['errors']}); nothing lost: "
          f"{all(e['nothing_lost'] for e in report['configs'].values())}; every turn a prefix of the next "
          f"(plugin): {all(e['prefix_monotone'] for e in plugin)}")
    print(f"connections dropped by a full listen backlog during the run (machine-wide): "
          f"{report['tcp_listen_overflows']}")
    gcs = {name: g for name, g in report["gc"].items() if isinstance(g, dict)}
    print("full collections during the run (CPU ms): " + ", ".join(
        f"{name} {g['collections'][2]} ({g['cpu_ms'][2]:.0f})" for name, g in gcs.items())
          + f"; start-up heap frozen: {report['gc']['frozen_at_start']}")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
