"""Memory per idle session through a real proxy: the plugin's proxy against one without it.

``bench/session_steps.py`` measures the plugin's state per session in one process without
a proxy (the ``Stabilizer`` alone: no call ids, so none of the per-call records, the
measured shapes or the affinity's). Here the sessions go through two real LiteLLM proxy
processes in front of the recording upstream, one with the plugin (``store: memory``,
``maxSessions`` = ``--sessions``) and one without, the same requests to both: after a
warm-up (LiteLLM's and the plugin's first-use allocations), ``--sessions`` distinct
sessions (one request each, a pi-like head of ``--head-tokens``, 2k by default, 32 in flight), then as many more
(past the plugin's session cap). Reported per process: the resident set (``VmRSS`` of the
proxy's process group, from ``/proc``) once ready and after each phase; per idle session, the plugin's
growth minus the plain proxy's over the first phase, divided by the sessions, and the same
for the second phase (what the cap holds it to), and from the first request on (the warm-up's
sessions counted too).

    .venv/bin/python -m bench.proxy_memory [--sessions 2000 --head-tokens 2000]

Results: bench/results/proxy_memory.json.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import httpx

from bench.load import group_stats, proxy_environment
from harness.procs import Proxy, Upstream, proxy_config
from harness.sessions import PiClient

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("plain", "plugin")


def group_rss_kib(pgid: int) -> int:
    """Resident set of every process in a process group (the proxy and any children), in KiB."""
    total = 0
    for pid, _ in group_stats(pgid):
        try:
            with open(f"/proc/{pid}/status") as fh:
                total += next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
        except (OSError, StopIteration, ValueError, IndexError):  # gone meanwhile, or a zombie
            continue
    return total


def bodies(prefix: str, count: int, tokens: int) -> list[tuple[str, bytes]]:
    """(session id, request body) of ``count`` distinct one-request sessions sharing one agent head."""
    client = PiClient(tokens=tokens, session="m")
    client.user("start")
    base = client.request()
    base.pop("metadata", None)  # the session id travels in x-session-id, as from a client
    out = []
    for i in range(count):
        session = f"{prefix}-{i}"
        out.append((session, json.dumps(dict(base, messages=[*base["messages"],
                                                             {"role": "user", "content": f"task {i}"}])).encode()))
    return out


async def send(client: httpx.AsyncClient, proxy: Proxy, batch: list[tuple[str, bytes]], in_flight: int) -> int:
    """Every request of ``batch``, ``in_flight`` at a time; returns the failures."""
    gate = asyncio.Semaphore(in_flight)
    failed = 0

    async def one(session: str, body: bytes) -> None:
        nonlocal failed
        async with gate:
            try:
                response = await client.post(f"{proxy.url}/v1/chat/completions", content=body, headers={
                    "authorization": f"Bearer {proxy.key}", "content-type": "application/json",
                    "x-session-id": session})
                failed += response.status_code != 200
            except httpx.HTTPError:
                failed += 1

    await asyncio.gather(*(one(s, b) for s, b in batch))
    return failed


async def run(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="litellm-prefix-memory-"))
    upstream = Upstream(work)
    proxies: dict[str, Proxy] = {}
    try:
        config = proxy_config(upstream)
        base = proxy_environment(os.environ)
        env = {"PYTHONUNBUFFERED": "1"}
        proxies["plain"] = Proxy(work, {**config, "litellm_settings": {}}, env, name="plain", base=base)
        proxies["plugin"] = Proxy(work, config, {**env, "LITELLM_PREFIX_MAX_SESSIONS": str(args.sessions)},
                                  name="plugin", base=base)
        for proxy in proxies.values():
            proxy.wait_ready()
        phases = {"warm-up": bodies("warm", args.warm_up, args.head_tokens),
                  "sessions": bodies("idle", args.sessions, args.head_tokens),
                  "past the cap": bodies("more", args.sessions, args.head_tokens)}
        rss: dict[str, dict[str, int]] = {name: {"ready": group_rss_kib(proxies[name].proc.pid)} for name in NAMES}
        failed = {name: 0 for name in NAMES}
        limits = httpx.Limits(max_connections=2 * args.in_flight, max_keepalive_connections=0)
        started = time.monotonic()
        async with httpx.AsyncClient(timeout=300, limits=limits) as client:
            for phase, batch in phases.items():
                for name in NAMES:
                    failed[name] += await send(client, proxies[name], batch, args.in_flight)
                upstream.take()  # the recording upstream keeps nothing between phases
                await asyncio.sleep(2)  # the after-response work (logging, callbacks) is done
                for name in NAMES:
                    rss[name][phase] = group_rss_kib(proxies[name].proc.pid)
                print(f"{phase}: " + ", ".join(f"{n} {rss[n][phase] / 1024:.1f} MiB" for n in NAMES), flush=True)
        grown = {name: {"from ready": rss[name]["sessions"] - rss[name]["ready"],
                        "sessions": rss[name]["sessions"] - rss[name]["warm-up"],
                        "past the cap": rss[name]["past the cap"] - rss[name]["sessions"]} for name in NAMES}
        per = {phase: round((grown["plugin"][phase] - grown["plain"][phase]) * 1024 / args.sessions)
               for phase in ("sessions", "past the cap")}
        # From the first request on, warm-up sessions included (and LiteLLM's first-use allocations, alike in both).
        per["from ready"] = round((grown["plugin"]["from ready"] - grown["plain"]["from ready"]) * 1024
                                  / (args.sessions + args.warm_up))
        return {"sessions": args.sessions, "head_tokens": args.head_tokens, "warm_up": args.warm_up, "in_flight": args.in_flight,
                "seconds": round(time.monotonic() - started, 1), "failed": failed, "rss_kib": rss,
                "growth_kib": grown, "plugin_bytes_per_idle_session": per["sessions"],
                "plugin_bytes_per_session_past_the_cap": per["past the cap"],
                "plugin_bytes_per_session_from_ready": per["from ready"]}
    finally:
        for proxy in proxies.values():
            proxy.stop()
        upstream.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--head-tokens", type=int, default=2000)
    parser.add_argument("--warm-up", type=int, default=300)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "proxy_memory.json"))
    args = parser.parse_args()
    report = asyncio.run(run(args))
    print(json.dumps(report, indent=1))
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
