"""Does a LiteLLM proxy's CPU per request grow with its requests' latency alone, or with hosting the plugin?

``bench/load.py`` reads CPU added to the request path about 1.1-1.8 times over (its
calibration hook's 2.0 ms has measured +1.9 to +3.6 ms). One explanation would be work that
LiteLLM (or the event loop) does for as long as a request is in flight: then anything that
makes requests slower, the plugin included, would cost CPU beyond its own. This bench tells
that apart from the rest. Six proxies in front of the recording upstream (the hooks:
``bench/latency_hooks.py``, ``bench/proxy_gc.py``):

- ``baseline`` and ``baseline-2``: no hook (the second shows what two equal processes differ by);
- ``sleep``: the hook awaits ``--sleep-ms`` (default 300): every request takes that much longer,
  with no CPU spent;
- ``burn``: the hook spends ``--burn-ms`` of CPU (default 2.0), in a loop that touches almost no
  memory, as ``bench/load.py``'s calibration;
- ``hosted-off``: the plugin (``litellm_prefix.proxy_handler``, as users configure it) loaded,
  and switched off for the model group every request goes to (``model_info``): what hosting
  it costs the proxy's other requests (its memos, its hooks' early returns, LiteLLM's work for
  a callback with these hooks);
- ``plugin``: the plugin on, store in memory, no timing wrappers (``bench/load.py`` times
  every hook from inside).

``bench/load.py``'s 32-session waves, the proxies in shuffled order each wave; proxy CPU per
request is user + system time of the proxy during its wave and the second after (``/proc``),
as there. ``--plain-only`` runs three plain proxies instead, the third serving two groups of
sessions (``twice-a``, ``twice-b``) as ``bench/load.py``'s memory proxy serves ``memory`` and
``memory-off``: what identical processes differ by over a whole run. Reported: each row's
CPU per request and p50 against ``baseline``, with two standard errors of the wave-by-wave
difference (which takes the waves as independent: an offset a process keeps for the whole
run is not in it). If CPU followed latency, ``sleep`` would
cost more CPU than ``baseline``; if hosting the plugin cost the proxy's other requests
something, ``hosted-off`` would.

    .venv/bin/python -m bench.latency_cpu [--waves 40 --sleep-ms 300 --burn-ms 2.0] [--plain-only]

Results go to bench/results/latency_cpu.json (``--plain-only``: latency_cpu_plain.json).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
from pathlib import Path

import httpx

from bench import load
from harness.procs import Proxy, Upstream, proxy_config

ROOT = Path(__file__).resolve().parent.parent

SESSIONS = 32
TURNS = 10
SESSION_GROUP = "chat-model"  # the model group bench/load.py's sessions send to


def switched_off(config: dict) -> dict:
    """``config`` with the plugin switched off (``model_info``) for the sessions' model group."""
    return {**config, "model_list": [
        {**m, "model_info": {**m.get("model_info", {}), "litellm_prefix": {"enabled": False}}}
        if m["model_name"] == SESSION_GROUP else m for m in config["model_list"]]}


async def run(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="litellm-prefix-latency-"))
    upstream = Upstream(work)
    config = proxy_config(upstream)
    env = {"PYTHONUNBUFFERED": "1", "BENCH_GC_FREEZE": "1"}

    def with_hook(*hooks: str) -> dict:
        return {**config, "litellm_settings": {"callbacks": [*hooks, "proxy_gc.handler"]}}

    proxies: dict[str, Proxy] = {}
    try:
        proxies["baseline"] = Proxy(work, with_hook(), env, name="baseline")
        proxies["baseline-2"] = Proxy(work, with_hook(), env, name="baseline-2")
        # Rows: each sends its own sessions to one proxy (``twice-a``/``twice-b``: two groups of
        # sessions to one plain proxy, as bench/load.py's memory proxy serves two).
        rows = {"baseline": "baseline", "baseline-2": "baseline-2"}
        if args.plain_only:
            proxies["twice"] = Proxy(work, with_hook(), env, name="twice")
            rows.update({"twice-a": "twice", "twice-b": "twice"})
        else:
            proxies["sleep"] = Proxy(work, with_hook("latency_hooks.sleep"),
                                     {**env, "BENCH_SLEEP_MS": str(args.sleep_ms)}, name="sleep")
            proxies["burn"] = Proxy(work, with_hook("proxy_gc.calibration"),
                                    {**env, "BENCH_BURN_MS": str(args.burn_ms)}, name="burn")
            proxies["hosted-off"] = Proxy(work, switched_off(with_hook("litellm_prefix.proxy_handler")), env,
                                          name="hosted-off")
            proxies["plugin"] = Proxy(work, with_hook("litellm_prefix.proxy_handler"), env, name="plugin")
            rows.update({name: name for name in ("sleep", "burn", "hosted-off", "plugin")})
        for proxy in proxies.values():
            proxy.wait_ready()
        cpu: dict[str, list[float]] = {name: [] for name in rows}
        p50: dict[str, list[float]] = {name: [] for name in rows}
        errors = {name: 0 for name in rows}
        # Upstream heads per session: the plugin's proxy sends one per session, the others the
        # client's (three: the sessions' memory flip), so each row shows the plugin was on or off.
        heads: dict[str, dict[str, set[str]]] = {name: {} for name in rows}
        sessions: dict[str, list[load.Session]] = {}
        limits = httpx.Limits(max_connections=4 * SESSIONS, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=300, limits=limits) as client:
            for wave in range(args.waves + 1):  # wave 0 warms every proxy up, uncounted
                order = list(rows)
                random.Random(wave).shuffle(order)
                turn = wave % TURNS
                for name in order:
                    if turn == 0:  # fresh sessions every ten turns: prompts stay 10-30k tokens
                        sessions[name] = [load.Session(i, SESSIONS, f"{name}.{wave}") for i in range(SESSIONS)]
                    bodies = [s.advance(turn) for s in sessions[name]]
                    proxy = proxies[rows[name]]
                    pid = proxy.proc.pid
                    before = load.group_cpu_seconds(pid)
                    took, failed = await load.wave(client, [proxy], bodies, sessions[name], turn)
                    await asyncio.sleep(1)  # the after-response work, as in bench/load.py
                    spent = load.group_cpu_seconds(pid) - before
                    for record in upstream.take():
                        body = json.loads(record["body"])
                        tag = next((s.tag for s in sessions[name] if s.tag in record["body"]), "")
                        heads[name].setdefault(tag, set()).add(load.head_of(body))
                    if wave:
                        cpu[name].append(1000 * spent / len(bodies))
                        p50[name].append(statistics.median(took) if took else float("nan"))
                        errors[name] += failed
                print(f"wave {wave}/{args.waves}", flush=True)
        report: dict = {"waves": args.waves, "sessions": SESSIONS, "sleep_ms": args.sleep_ms,
                        "burn_ms": args.burn_ms, "plain_only": args.plain_only, "proxies": {}}
        for name in rows:
            extra = [a - b for a, b in zip(cpu[name], cpu["baseline"])]
            report["proxies"][name] = {
                "cpu_ms_per_request": round(statistics.mean(cpu[name]), 2),
                "p50_ms": round(statistics.median(p50[name]), 1),
                "errors": errors[name],
                "extra_cpu_ms_vs_baseline": round(statistics.mean(extra), 2),
                "two_se_ms": round(2 * statistics.stdev(extra) / len(extra) ** 0.5, 2) if len(extra) > 1 else None,
                "p50_vs_baseline": round(statistics.median(p50[name]) / statistics.median(p50["baseline"]), 3),
                "most_heads_in_a_session": max((len(h) for h in heads[name].values()), default=0),
            }
        return report
    finally:
        for proxy in proxies.values():
            proxy.stop()
        upstream.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waves", type=int, default=40)
    parser.add_argument("--sleep-ms", type=float, default=300.0)
    parser.add_argument("--burn-ms", type=float, default=2.0)
    parser.add_argument("--plain-only", action="store_true",
                        help="three plain proxies, the third serving two groups of sessions (twice-a, twice-b): "
                             "what identical processes differ by over a whole run")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.out is None:
        name = "latency_cpu_plain.json" if args.plain_only else "latency_cpu.json"
        args.out = str(ROOT / "bench" / "results" / name)
    report = asyncio.run(run(args))
    print("| row | CPU ms/request | vs baseline | p50 ms | p50 vs baseline | errors | heads per session |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, row in report["proxies"].items():
        print(f"| {name} | {row['cpu_ms_per_request']} | {row['extra_cpu_ms_vs_baseline']:+.2f} ms "
              f"±{row['two_se_ms']} | {row['p50_ms']} | {row['p50_vs_baseline']}x | {row['errors']} "
              f"| {row['most_heads_in_a_session']} |")
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
