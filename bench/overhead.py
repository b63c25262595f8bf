"""Per-request cost and memory of litellm-prefix, against LiteLLM proxy's own overhead.

Each sample is one turn of a pi-like session (in-memory journal, as the default install): a sectioned system prompt whose install
path moves and whose tool order is shuffled between turns, 35 tools with schemas, a
growing conversation with tool calls, at 2k/20k/130k/260k prompt tokens. Reported: median
and p99 of the transform (warm: the turns' heads seen before, as every turn after a
session's first), its median cold (the process's memory of known head texts emptied before
each request: a head never seen before), and,
measured in the same run, the ratio to serialising the request once with ``json.dumps``
(work every gateway does per request anyway), and to the LiteLLM proxy's own
per-request overhead (its ``x-litellm-overhead-duration-ms`` header, a proxy without the
plugin in front of the recording upstream, same request sizes, its requests sent between
the transform's samples so that both see the same machine). Memory: bytes of one
session's journal, and the resident-memory growth of a process holding 10,000 pi-like
sessions in the in-memory store (the plugin's share of a proxy's memory). Ratios are
what to compare across machines; absolute times depend on a shared, noisy machine.

    make bench            # or: .venv/bin/python -m bench.overhead [--samples N]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harness.realistic import TOOL_NAMES, conversation, install_root, openai_tools, pi_system_prompt, shuffled
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.sections import KNOWN
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def requests_for(tokens: int, turns: int) -> list[dict]:
    out = []
    for i in range(turns):
        order = shuffled(TOOL_NAMES, i)
        system = pi_system_prompt(root=install_root("abc"[i % 3]), tool_order=order, target_tokens=tokens)
        out.append({
            "model": "chat-model",
            "messages": [{"role": "system", "content": system}, *conversation(2 + i % 4)],
            "tools": openai_tools(order),
            "metadata": {"session_id": f"bench-{tokens}"},
        })
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def measure(tokens: int, samples: int, proxy: ProxySampler | None = None) -> dict:
    stabilizer = Stabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home"))
    target = Target(model="openai/local", provider="openai")
    variants = requests_for(tokens, 6)
    transform, serialise, cold = [], [], []
    every = max(1, samples // PROXY_SAMPLES)
    for i in range(samples):
        data = dict(variants[i % len(variants)])  # shallow: the transform never mutates nested client objects
        t0 = time.perf_counter_ns()
        await stabilizer.stabilize(data, "acompletion", target=target)
        t1 = time.perf_counter_ns()
        json.dumps(variants[i % len(variants)])
        t2 = time.perf_counter_ns()
        transform.append((t1 - t0) / 1e6)
        serialise.append((t2 - t1) / 1e6)
        if proxy is not None and i % every == 0:
            # The proxy's own overhead sampled between the transform's samples, so that both see
            # the same machine (a shared machine's speed drifts within a minute).
            proxy.sample(variants[i % len(variants)])
    # Cold: the same turns with the process's memory of known head texts emptied first (a head
    # never seen before: the first request of a session, or the request after the head changed).
    for i in range(max(10, samples // 10)):
        data = dict(variants[i % len(variants)])
        KNOWN.clear()
        t0 = time.perf_counter_ns()
        await stabilizer.stabilize(data, "acompletion", target=target)
        cold.append((time.perf_counter_ns() - t0) / 1e6)
    assert stabilizer.stats["errors"] == 0 and stabilizer.stats["drift"] == 0
    chars = len(variants[0]["messages"][0]["content"])
    row = {
        "prompt_tokens_est": tokens,
        "system_chars": chars,
        "samples": samples,
        "transform_median_ms": round(statistics.median(transform), 4),
        "transform_p99_ms": round(percentile(transform, 0.99), 4),
        "cold_median_ms": round(statistics.median(cold), 4),
        "json_dumps_median_ms": round(statistics.median(serialise), 4),
        "ratio_to_json_dumps": round(statistics.median(transform) / statistics.median(serialise), 3),
    }
    if proxy is not None:
        measured = proxy.take()
        row["proxy_overhead_median_ms"] = round(measured["end_to_end"], 3)
        row["proxy_overhead_header_ms"] = round(measured["header"], 3)
        row["fraction_of_proxy_overhead"] = round(row["transform_median_ms"] / measured["end_to_end"], 3)
    return row


PROXY_SAMPLES = 40  # proxy requests per size


class ProxySampler:
    """LiteLLM proxy's own per-request cost (no plugin), two ways: ``end_to_end``: median
    latency through the proxy minus median latency of the same request sent straight to the
    (local, instant) upstream; ``header``: the proxy's own ``x-litellm-overhead-duration-ms``."""

    def __init__(self) -> None:
        import tempfile

        import httpx

        from harness.procs import Proxy, Upstream, proxy_config

        work = Path(tempfile.mkdtemp(prefix="litellm-prefix-overhead-"))
        self.upstream = Upstream(work)
        config = proxy_config(self.upstream)
        config["litellm_settings"] = {}
        self.proxy = Proxy(work, config, {}).wait_ready()
        self.direct = httpx.Client(base_url=self.upstream.url, timeout=60)
        self.via: list[float] = []
        self.straight: list[float] = []
        self.header: list[float] = []

    def sample(self, request: dict) -> None:
        body = {k: v for k, v in request.items() if k != "metadata"}
        started = time.perf_counter()
        response = self.proxy.post("/v1/chat/completions", body)
        self.via.append((time.perf_counter() - started) * 1000)
        self.header.append(float(response.headers["x-litellm-overhead-duration-ms"]))
        started = time.perf_counter()
        self.direct.post("/v1/chat/completions", json={**body, "model": "upstream-chat"}).raise_for_status()
        self.straight.append((time.perf_counter() - started) * 1000)

    def take(self) -> dict[str, float]:
        out = {"end_to_end": statistics.median(self.via) - statistics.median(self.straight),
               "header": statistics.median(self.header)}
        self.via, self.straight, self.header = [], [], []
        return out

    def warm_up(self, request: dict, n: int = 5) -> None:
        for _ in range(n):
            self.sample(request)
        self.take()

    def close(self) -> None:
        self.direct.close()
        self.proxy.stop()
        self.upstream.stop()


def _rss_kib() -> int:
    """Current resident memory (not the peak: earlier phases of this run had large requests)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def memory(sessions: int) -> dict:
    """Journal bytes per session and RSS growth for ``sessions`` pi-like sessions in memory."""
    import gc

    from litellm_prefix.fleet.store import MemoryStore

    store = MemoryStore(sessions + 10, 3600)
    stabilizer = Stabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home",
                                     max_sessions=sessions + 10), store=store)
    target = Target(model="openai/local", provider="openai")
    template = requests_for(20_000, 1)[0]
    gc.collect()
    before = _rss_kib()

    async def fill() -> None:
        for i in range(sessions):
            data = {**template, "metadata": {"session_id": f"mem-{i}"},
                    "messages": [template["messages"][0], {"role": "user", "content": f"session {i}"}]}
            await stabilizer.stabilize(data, "acompletion", target=target)

    asyncio.run(fill())
    gc.collect()
    after = _rss_kib()
    journals = store.journal_bytes()
    return {"sessions": sessions, "journal_bytes_median": int(statistics.median(journals)),
            "rss_growth_mib": round((after - before) / 1024, 1),
            "rss_per_session_bytes": int((after - before) * 1024 / sessions)}


def _memory_in_fresh_process(sessions: int) -> dict:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "bench.overhead", "--memory-only", "--sessions", str(sessions)],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "overhead.json"))
    parser.add_argument("--no-proxy", action="store_true", help="skip the LiteLLM proxy comparison")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_only:  # run in a fresh process, so that earlier allocations do not hide the growth
        print(json.dumps(memory(args.sessions)))
        return
    sizes = (2_000, 20_000, 130_000, 260_000)
    proxy = None if args.no_proxy else ProxySampler()
    try:
        if proxy is not None:
            proxy.warm_up(requests_for(sizes[0], 1)[0])
        # The same number of samples at every size: one in ``samples // PROXY_SAMPLES`` follows a
        # proxy request (the sampler's own HTTP traffic, 2 x 520 KB at 130k, leaves the caches
        # colder than the json.dumps alone), the same share in every row.
        rows = [asyncio.run(measure(tokens, args.samples, proxy)) for tokens in sizes]
    finally:
        if proxy is not None:
            proxy.close()
    result = {"machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cpus, "
                         f"Python {platform.python_version()}".replace("  ", " "),
              "rows": rows, "memory": _memory_in_fresh_process(args.sessions)}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"machine: {result['machine']}")
    print(f"{'tokens':>8} {'median ms':>10} {'p99 ms':>8} {'cold ms':>8} {'json.dumps ms':>14} {'ratio':>6} "
          f"{'proxy ms':>9} {'(header)':>9} {'share':>6}")
    for r in rows:
        print(f"{r['prompt_tokens_est']:>8} {r['transform_median_ms']:>10.3f} {r['transform_p99_ms']:>8.3f} "
              f"{r['cold_median_ms']:>8.3f} "
              f"{r['json_dumps_median_ms']:>14.3f} {r['ratio_to_json_dumps']:>6.2f} "
              f"{r.get('proxy_overhead_median_ms', float('nan')):>9.2f} {r.get('proxy_overhead_header_ms', float('nan')):>9.2f} "
              f"{r.get('fraction_of_proxy_overhead', float('nan')):>6.1%}")
    small, large = rows[-2], rows[-1]
    growth = large["transform_median_ms"] / small["transform_median_ms"]
    print(f"growth {small['prompt_tokens_est']} -> {large['prompt_tokens_est']} tokens: x{growth:.2f} "
          f"(head x{large['system_chars'] / small['system_chars']:.2f})")
    m = result["memory"]
    print(f"memory: {m['journal_bytes_median']} journal bytes per session; {m['sessions']} sessions grew RSS by "
          f"{m['rss_growth_mib']} MiB ({m['rss_per_session_bytes']} bytes per session)")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
