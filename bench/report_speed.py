"""Time of ``litellm-prefix report`` on a generated 100,000-line JSONL log.

The log mixes what a busy gateway writes: ``call`` records (90%; 2,000 sessions of 45
turns, 4 models, 3 agent profiles, every class), ``drift`` and ``rewrite`` events, and a
corrupt line every 10,000. Timed in one run: reading and summarising (streamed), the text
summary, ``--json``, and ``--html`` (chart included). Writes bench/results/report_speed.json.

    .venv/bin/python -m bench.report_speed [--lines N]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import time
from pathlib import Path

from litellm_prefix.offline import report

ROOT = Path(__file__).resolve().parent.parent

CLASSES = ["hit"] * 14 + ["client_drift", "provider_miss", "below_minimum", "unknown"]


def generate(path: Path, lines: int, seed: int = 5) -> None:
    rng = random.Random(seed)
    sessions = [f"{rng.getrandbits(64):016x}" for _ in range(2000)]
    state = {s: [0, 0] for s in sessions}  # turn, prompt
    with open(path, "w") as fh:
        for n in range(lines):
            if n % 10_000 == 9_999:
                fh.write('{"event": "call", "prompt_tok\n')
                continue
            s = rng.choice(sessions)
            roll = rng.random()
            if roll < 0.05:
                fh.write(json.dumps({"event": "drift", "session": s, "changed": [rng.choice(
                    ["section:rules", "tools", "section:cwd", "system"])], "first_diff_char": 900, "before": "a" * 16,
                    "after": "b" * 16, "reprefill_tokens_est": 9000}, sort_keys=True) + "\n")
                continue
            if roll < 0.10:
                fh.write(json.dumps({"event": "rewrite", "session": s, "rules": [{"rule": "tool_order"}]}) + "\n")
                continue
            turn, prompt = state[s]
            turn, prompt = turn + 1, prompt + rng.randint(200, 1500)
            state[s] = [turn, prompt]
            cls = "first" if turn == 1 else rng.choice(CLASSES)
            cached = {"hit": prompt - rng.randint(50, 1500), "first": 0, "unknown": 0}.get(cls, rng.randint(0, 2000))
            record = {"event": "call", "session": s, "turn": turn, "model": f"model-{hash(s) % 4}",
                      "agent": ["pi", "claude-code", "codex"][hash(s) % 3], "class": cls, "prompt_tokens": prompt,
                      "cached_tokens": max(0, cached), "reprocessed_tokens": prompt - max(0, cached),
                      "tokens_lost": 0 if cls in ("hit", "first", "unknown") else prompt // 2,
                      "deployment": "dep-1", "previous_deployment": "dep-1" if cls != "provider_miss" else "dep-2"}
            if cls == "client_drift":
                record["drift"] = {"changed": ["section:rules"], "before": "a" * 16, "after": "b" * 16}
                record["where"] = "section:rules"
            fh.write(json.dumps(record, sort_keys=True) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "prefix.jsonl"
        generate(log, args.lines)
        size = log.stat().st_size
        t0 = time.perf_counter()
        summary = report.read(str(log))
        t1 = time.perf_counter()
        report.text(summary)
        t2 = time.perf_counter()
        json.dumps(summary.to_json())
        t3 = time.perf_counter()
        page = report.html_page(summary)
        t4 = time.perf_counter()
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}",
        "lines": args.lines, "bytes": size, "calls": summary.totals.calls, "corrupt": summary.corrupt,
        "sessions": len(summary.sessions),
        "read_seconds": round(t1 - t0, 3), "text_seconds": round(t2 - t1, 3), "json_seconds": round(t3 - t2, 3),
        "html_seconds": round(t4 - t3, 3), "total_text_seconds": round(t2 - t0, 3),
        "total_html_seconds": round(t1 - t0 + t4 - t3, 3), "html_bytes": len(page),
        "lines_per_second": int(args.lines / (t1 - t0)),
    }
    print(f"{args.lines} lines ({size / 1e6:.1f} MB, {summary.totals.calls} calls, {len(summary.sessions)} sessions): "
          f"read {result['read_seconds']} s, text {result['text_seconds']} s, json {result['json_seconds']} s, "
          f"html {result['html_seconds']} s ({result['lines_per_second']} lines/s)")
    out = ROOT / "bench" / "results" / "report_speed.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
