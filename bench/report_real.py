"""The plugin's own measurements against a real prefix-caching server: the bundled sessions
replayed through a LiteLLM proxy with the plugin to llama.cpp's server (one slot), and
``litellm-prefix report`` of the proxy's JSONL log checked against the server's answers.

The report's totals (prompt, cached, re-processed = prompt - cached) must equal the sums
of the usage blocks the proxy returned, exactly; the classes show per turn what the
cache did. (bench/cache_real.py runs the same check next to its with/without/stable
comparison; this script runs only the with-plugin replays, which a busy machine can
afford.) Writes bench/results/report_real.json, report.html and report.png (the chart
the README shows).

    .venv/bin/python -m bench.report_real [--scenarios pi claude-code codex]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx

from bench.cache_real import PLUGIN_ENV, SCENARIOS, check_report, llama_config, run
from harness.llama_server import LlamaServer
from harness.procs import Proxy, free_port

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="+", default=SCENARIOS, choices=SCENARIOS)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="litellm-prefix-report-"))
    llama = LlamaServer(free_port(), work / "llama-server.log")
    proxy = None
    try:
        log = work / "prefix.jsonl"
        proxy = Proxy(work, llama_config(llama.url, plugin=True), {**PLUGIN_ENV, "LITELLM_PREFIX_LOG": str(log)},
                      name="plugin").wait_ready()
        proxy.client.timeout = httpx.Timeout(900)
        results: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}",
                         "server": "llama.cpp server (xllamacpp wheel), tiny random llama, one slot", "scenarios": {}}
        started = time.monotonic()
        for name in args.scenarios:
            results["scenarios"][name] = {"with_plugin": run(proxy, ROOT / "bench" / "scenarios" /
                                                             f"{name}.noisy.jsonl", llama)}
            print(f"{name:12} re-processed {results['scenarios'][name]['with_plugin']['reprocessed']:>7}, cached "
                  f"{results['scenarios'][name]['with_plugin']['cached']:>7}", flush=True)
        out = ROOT / "bench" / "results"
        results["report"] = check_report(log, results, out)
        results["seconds"] = round(time.monotonic() - started, 1)
        (out / "report_real.json").write_text(json.dumps(results, indent=2) + "\n")
        print(f"written to {out / 'report_real.json'}, {out / 'report.html'}, {out / 'report.png'}")
        if not results["report"]["equal"]:
            sys.exit("the report does not add up to the upstream's answers")
    finally:
        if proxy is not None:
            proxy.stop()
        llama.stop()


if __name__ == "__main__":
    main()
