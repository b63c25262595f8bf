"""Per-request cost of the litellm-prefix transform at 2k, 20k and 130k prompt tokens.

Each sample is one turn of a pi-like session (in-memory journal, as the default install): a sectioned system prompt whose install
path moves and whose tool order is shuffled between turns, 35 tools with schemas, a
growing conversation with tool calls. Reported: median and p99 of the transform, and,
measured in the same run, the ratio to serialising the request once with ``json.dumps``
(work every gateway does per request anyway). Ratios are what to compare across
machines; the absolute times depend on a shared, noisy machine.

    make bench            # or: .venv/bin/python bench/overhead.py [--samples N]
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
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from realistic import TOOL_NAMES, conversation, install_root, openai_tools, pi_system_prompt, shuffled  # noqa: E402

from litellm_prefix.context import Target  # noqa: E402
from litellm_prefix.core import Stabilizer  # noqa: E402
from litellm_prefix.settings import Settings  # noqa: E402


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


async def measure(tokens: int, samples: int) -> dict:
    stabilizer = Stabilizer(Settings(path_check="absolute", stable_path="/srv/pi-home"))
    target = Target(model="openai/local", provider="openai")
    variants = requests_for(tokens, 6)
    transform, serialise = [], []
    for i in range(samples):
        data = dict(variants[i % len(variants)])  # shallow: the transform never mutates nested client objects
        t0 = time.perf_counter_ns()
        await stabilizer.stabilize(data, "acompletion", target=target)
        t1 = time.perf_counter_ns()
        json.dumps(variants[i % len(variants)])
        t2 = time.perf_counter_ns()
        transform.append((t1 - t0) / 1e6)
        serialise.append((t2 - t1) / 1e6)
    assert stabilizer.stats["errors"] == 0 and stabilizer.stats["drift"] == 0
    chars = len(variants[0]["messages"][0]["content"])
    return {
        "prompt_tokens_est": tokens,
        "system_chars": chars,
        "samples": samples,
        "transform_median_ms": round(statistics.median(transform), 4),
        "transform_p99_ms": round(percentile(transform, 0.99), 4),
        "json_dumps_median_ms": round(statistics.median(serialise), 4),
        "ratio_to_json_dumps": round(statistics.median(transform) / statistics.median(serialise), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "overhead.json"))
    args = parser.parse_args()
    rows = [asyncio.run(measure(tokens, args.samples if tokens < 100_000 else max(50, args.samples // 3)))
            for tokens in (2_000, 20_000, 130_000)]
    result = {"machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cpus, "
                         f"Python {platform.python_version()}".replace("  ", " "),
              "rows": rows}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"machine: {result['machine']}")
    print(f"{'tokens':>8} {'median ms':>10} {'p99 ms':>8} {'json.dumps ms':>14} {'ratio':>6}")
    for r in rows:
        print(f"{r['prompt_tokens_est']:>8} {r['transform_median_ms']:>10.3f} {r['transform_p99_ms']:>8.3f} "
              f"{r['json_dumps_median_ms']:>14.3f} {r['ratio_to_json_dumps']:>6.2f}")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
