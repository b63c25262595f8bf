"""Where a proxy's CPU goes, with the plugin and without it: the whole process, sampled.

``bench/load.py`` measures what the plugin adds to a proxy's CPU per request; its hooks
are timed from the inside (``proxy_gc.timed``). What else the plugin makes the process do
(LiteLLM's callback machinery, logging of larger metadata, headers, garbage, the event
loop's bookkeeping for the plugin's awaits) is in neither. This benchmark samples the two
processes whole with py-spy (a sampling profiler that reads the process from outside:
nothing in the proxy is wrapped or slowed), on the same load as ``bench/load.py`` (pi-like
sessions of 10-30k tokens, a memory write, a notification-run flip and a memory deletion
in each session's ten turns), and splits each process's samples per request:

- by where the sample's stack runs: inside the plugin (any frame in ``litellm_prefix``),
  else by the innermost frame's package (``litellm.proxy``, ``litellm.litellm_core_utils``,
  ``litellm.router``, ``starlette``/``fastapi``/``uvicorn``, ``httpx``/``httpcore``/
  ``aiohttp``, ``asyncio``, ``pydantic``, ...);
- and, outside the plugin, the functions whose samples per request grow the most with the
  plugin on: the work the plugin causes elsewhere.

Two proxies, each its own process and the same collector set-up (``bench/proxy_gc.py``:
start-up heap frozen): ``plain`` (no plugin) and ``plugin`` (``store: memory``, as
``litellm_prefix.proxy_handler`` builds it: no timing wrappers). Each turn both get their
32 requests at once, one after the other, in alternating order. The profiler samples
``--rate`` times a second per process, without stopping it (``--nonblocking``); the
processes' own CPU (``/proc``) is reported beside the samples.

    .venv/bin/python -m bench.proxy_profile [--sessions 32 --turns 10 --rounds 1 --rate 200]

py-spy comes from PyPI (the ``bench`` extra). Results: bench/results/proxy_profile.json.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import httpx

from bench.load import Session, group_counters, proxy_environment, warm_up, wave
from harness.procs import Proxy, Upstream, proxy_config

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("plain", "plugin")

# A frame's package, by the start of its path as py-spy prints it (relative to ``sys.path``:
# ``litellm/proxy/proxy_server.py``, ``asyncio/tasks.py``); the innermost frame that matches
# names the bucket.
PACKAGES = (
    ("litellm/proxy/", "litellm.proxy"),
    ("litellm/litellm_core_utils/", "litellm.litellm_core_utils"),
    ("litellm/router", "litellm.router"),
    ("litellm/llms/", "litellm.llms"),
    ("litellm/integrations/", "litellm.integrations"),
    ("litellm/caching/", "litellm.caching"),
    ("litellm/", "litellm (other)"),
    ("starlette/", "starlette/fastapi/uvicorn"), ("fastapi/", "starlette/fastapi/uvicorn"),
    ("uvicorn/", "starlette/fastapi/uvicorn"), ("h11/", "starlette/fastapi/uvicorn"),
    ("httpx/", "httpx/httpcore/aiohttp"), ("httpcore/", "httpx/httpcore/aiohttp"),
    ("aiohttp/", "httpx/httpcore/aiohttp"), ("aiohappyeyeballs/", "httpx/httpcore/aiohttp"), ("anyio/", "anyio"),
    ("pydantic", "pydantic"), ("openai/", "openai SDK"), ("prometheus_client/", "prometheus_client"),
    ("asyncio/", "asyncio"), ("uvloop/", "asyncio"), ("concurrent/", "threads"), ("threading.py", "threads"),
    ("json/", "json"), ("copy.py", "copy (deepcopy)"), ("logging/", "logging"), ("<frozen importlib", "imports"),
    ("proxy_gc.py", "bench collector set-up"),
)
PLUGIN = "plugin (litellm_prefix)"


def _path(frame: str) -> str:
    """``function (path:line)`` -> ``path``."""
    return frame.rpartition(" (")[2].rsplit(":", 1)[0]


def bucket(frames: list[str]) -> str:
    """``frames``: outermost first (py-spy's raw format), each ``function (path:line)``."""
    paths = [_path(frame) for frame in frames]
    if any(path.startswith("litellm_prefix/") for path in paths):
        return PLUGIN
    for path in reversed(paths):
        for fragment, name in PACKAGES:
            if path.startswith(fragment) or (fragment.startswith("<") and fragment in path):
                return name
    return "other"


def leaf_outside_plugin(frames: list[str]) -> str:
    """The innermost frame, without its line: a function (``name (path)``)."""
    leaf = frames[-1] if frames else "?"
    return f"{leaf.rpartition(' (')[0]} ({_path(leaf)})"


def read_raw(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    if not path.exists():
        return stacks
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [f for f in stack.split(";") if f and not f.startswith("process ") and not f.startswith("thread ")]
        stacks.append((frames, int(count)))
    return stacks


def summarize(stacks: list[tuple[list[str], int]], requests: int, rate: float) -> dict:
    """Milliseconds of sampled running time per request, by bucket and by leaf function."""
    per_request = 1000.0 / rate / max(1, requests)
    buckets: Counter = Counter()
    leaves: Counter = Counter()
    for frames, count in stacks:
        name = bucket(frames)
        buckets[name] += count
        if name != PLUGIN:
            leaves[leaf_outside_plugin(frames)] += count
    return {"samples": sum(buckets.values()), "ms_per_request": round(sum(buckets.values()) * per_request, 3),
            "by_package_ms": {k: round(v * per_request, 3) for k, v in buckets.most_common()},
            "leaves_ms": {k: round(v * per_request, 4) for k, v in leaves.most_common(400)}}


async def run(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="litellm-prefix-profile-"))
    upstream = Upstream(work)
    proxies: dict[str, Proxy] = {}
    spies: list[subprocess.Popen] = []
    try:
        base_config = proxy_config(upstream)
        plain = {**base_config, "litellm_settings": {"callbacks": ["proxy_gc.handler"]}}
        plugin = {**base_config, "litellm_settings": {"callbacks": ["litellm_prefix.proxy_handler", "proxy_gc.handler"]}}
        env = {"PYTHONUNBUFFERED": "1", "BENCH_GC_FREEZE": "1"}
        base = proxy_environment(os.environ)
        proxies["plain"] = Proxy(work, plain, env, name="plain", base=base)
        proxies["plugin"] = Proxy(work, plugin, env, name="plugin", base=base)
        for proxy in proxies.values():
            proxy.wait_ready()
        spy = Path(sys.executable).parent / "py-spy"
        sessions = {n: [Session(i, args.sessions, f"{n}.{r}") for r in range(args.rounds) for i in range(args.sessions)]
                    for n in NAMES}
        cpu = {n: 0.0 for n in NAMES}
        errors = {n: 0 for n in NAMES}
        limits = httpx.Limits(max_connections=4 * args.sessions, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=300, limits=limits) as client:
            await warm_up(client, proxies.values())
            upstream.take()
            for name, proxy in proxies.items():
                spies.append(subprocess.Popen(
                    [str(spy), "record", "--pid", str(proxy.proc.pid), "--rate", str(args.rate), "--format", "raw",
                     "--nonblocking", "--subprocesses", "--output", str(work / f"{name}.raw")],
                    stdout=subprocess.DEVNULL, stderr=open(work / f"{name}.spy.log", "w"), start_new_session=True))
            await asyncio.sleep(2)  # attached
            for round_, turn in ((r, t) for r in range(args.rounds) for t in range(args.turns)):
                order = NAMES if (round_ * args.turns + turn) % 2 == 0 else NAMES[::-1]
                for name in order:
                    group = sessions[name][round_ * args.sessions:(round_ + 1) * args.sessions]
                    bodies = [s.advance(turn) for s in group]
                    pgid = proxies[name].proc.pid
                    before = group_counters(pgid)[0]
                    _, failed = await wave(client, [proxies[name]], bodies, group, turn)
                    await asyncio.sleep(1)  # the after-response work (logging, success callbacks)
                    cpu[name] += group_counters(pgid)[0] - before
                    errors[name] += failed
                upstream.take()
                print(f"turn {turn + 1}/{args.turns} done (round {round_ + 1}/{args.rounds})", flush=True)
        for process in spies:
            process.send_signal(2)  # SIGINT: py-spy writes its file and exits
        for process in spies:
            process.wait(timeout=60)
        requests = args.sessions * args.turns * args.rounds
        report = {"sessions": args.sessions, "turns": args.turns, "rounds": args.rounds, "rate": args.rate,
                  "requests": requests, "errors": errors,
                  "proc_cpu_ms_per_request": {n: round(1000 * cpu[n] / requests, 3) for n in NAMES},
                  "profiles": {n: summarize(read_raw(work / f"{n}.raw"), requests, args.rate) for n in NAMES}}
        report["difference"] = difference(report["profiles"])
        return report
    finally:
        for process in spies:
            if process.poll() is None:
                process.kill()
        for proxy in proxies.values():
            proxy.stop()
        upstream.stop()


def difference(profiles: dict) -> dict:
    """plugin minus plain, per request: by package, and the leaf functions outside the plugin that grow most."""
    a, b = profiles["plain"], profiles["plugin"]
    packages = sorted(set(a["by_package_ms"]) | set(b["by_package_ms"]),
                      key=lambda k: -(b["by_package_ms"].get(k, 0) - a["by_package_ms"].get(k, 0)))
    leaves = set(a["leaves_ms"]) | set(b["leaves_ms"])
    grown = sorted(((b["leaves_ms"].get(k, 0) - a["leaves_ms"].get(k, 0), k) for k in leaves), reverse=True)
    return {"ms_per_request": round(b["ms_per_request"] - a["ms_per_request"], 3),
            "by_package_ms": {k: round(b["by_package_ms"].get(k, 0) - a["by_package_ms"].get(k, 0), 3) for k in packages},
            "leaves_grown_ms": {k: round(d, 4) for d, k in grown[:25]},
            "leaves_shrunk_ms": {k: round(d, 4) for d, k in sorted(grown)[:10]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--rate", type=int, default=200, help="samples a second per process")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "proxy_profile.json"))
    args = parser.parse_args()
    report = asyncio.run(run(args))
    print(json.dumps({k: report[k] for k in ("proc_cpu_ms_per_request", "errors")}, indent=1))
    for name in NAMES:
        p = report["profiles"][name]
        print(f"{name}: {p['ms_per_request']} ms sampled per request ({p['samples']} samples)")
    print(json.dumps(report["difference"], indent=1))
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
