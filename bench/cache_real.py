"""Cache effectiveness on a real prefix-caching server: llama.cpp's server (one slot) behind real LiteLLM proxies.

Each bundled scenario is replayed three times through a LiteLLM proxy to llama.cpp's server
(the xllamacpp wheel, started by harness/llama_server.py with the tiny model):
the noisy session without the plugin, the noisy session with it, and the clean session
(a perfectly stable client: the oracle) without it. llama-server reports per request how
many prompt tokens it took from its cache (``cached_tokens``); re-processed = prompt -
cached. Reported per scenario: re-processed and cached sums, median time per request
(max_tokens 1: time to first token), and with/oracle ratio (target: within 5%).
Between runs the server's single slot is flushed with an unrelated prompt. The proxy
deployment hoists late system messages (``openai_system_messages_first``), as the
scenarios' target does. Writes bench/results/cache_real.json and a PNG chart of the pi
session's re-processed tokens per turn. The plugin's proxy writes its JSONL log; the
``litellm-prefix report`` of that log must add up to the with-plugin runs' re-processed
tokens exactly (checked, and written to bench/results/report.html and report.png).

    .venv/bin/python -m bench.cache_real      # or `make bench`; nothing to build
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx

from harness.llama_server import LlamaServer, server_version
from harness.procs import Proxy, free_port
from litellm_prefix.offline.cli import usage_tokens
from litellm_prefix.offline.replay import ROUTES, load

ROOT = Path(__file__).resolve().parent.parent

SCENARIOS = ["pi", "claude-code", "codex"]
PLUGIN_ENV = {
    "LITELLM_PREFIX_PATH_CHECK": "trusted",  # a what-if: the recorded install paths are not on this disk
    "LITELLM_PREFIX_STABLE_PATH": "/srv/pi-home",
    "LITELLM_PREFIX_VOLATILE_PRESETS": "current-date,todays-date,git-status",
}


def llama_config(llama_url: str, plugin: bool) -> dict:
    settings: dict = {"openai_system_messages_first": True}
    if plugin:
        settings["callbacks"] = ["litellm_prefix.proxy_handler"]
    return {
        "model_list": [
            {"model_name": "local", "litellm_params": {"model": "openai/local", "api_base": f"{llama_url}/v1",
                                                       "api_key": "none"}},
            {"model_name": "local-responses", "litellm_params": {"model": "hosted_vllm/local",
                                                                 "api_base": f"{llama_url}/v1", "api_key": "none"}},
        ],
        "litellm_settings": settings,
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"},
    }


def flush(llama: LlamaServer) -> None:
    httpx.post(f"{llama.url}/v1/chat/completions", timeout=300, json={
        "messages": [{"role": "user", "content": "flush the slot with an unrelated prompt"}], "max_tokens": 1})


def run(proxy: Proxy, path: Path, llama: LlamaServer) -> dict:
    flush(llama)
    per_turn, cached_turns, seconds = [], [], []
    for turn in load(path):
        body = dict(turn.request)
        body["model"] = "local-responses" if turn.route == "responses" else "local"
        started = time.perf_counter()
        response = proxy.client.post(ROUTES[turn.route], json=body, headers={"x-session-id": turn.session})
        seconds.append(time.perf_counter() - started)
        response.raise_for_status()
        prompt, cached = usage_tokens(response.json())
        per_turn.append(prompt - cached)
        cached_turns.append(cached)
    return {"reprocessed": sum(per_turn), "cached": sum(cached_turns), "per_turn": per_turn,
            "median_seconds": round(statistics.median(seconds), 3)}


def chart(results: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pi = results["scenarios"]["pi"]
    turns = range(1, len(pi["without_plugin"]["per_turn"]) + 1)
    fig, ax = plt.subplots(figsize=(8, 4), dpi=120)
    ax.bar([t - 0.27 for t in turns], pi["without_plugin"]["per_turn"], width=0.27, label="without plugin")
    ax.bar(list(turns), pi["with_plugin"]["per_turn"], width=0.27, label="with litellm-prefix")
    ax.bar([t + 0.27 for t in turns], pi["stable_client"]["per_turn"], width=0.27, label="stable client (limit)")
    ax.set_xlabel("turn")
    ax.set_ylabel("prompt tokens prefilled again")
    ax.set_title("pi session on llama.cpp's server (one slot): re-processed tokens per turn")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out)


def check_report(log: Path, results: dict, out: Path) -> dict:
    """The plugin's own measurements (``litellm-prefix report``) against the upstream's answers."""
    from litellm_prefix.offline import report

    for _ in range(50):  # success callbacks run after the answers: wait for the last records
        summary = report.read(str(log))
        expected_calls = sum(len(s["with_plugin"]["per_turn"]) for s in results["scenarios"].values())
        if summary.totals.calls >= expected_calls:
            break
        time.sleep(0.2)
    (out / "report.html").write_text(report.html_page(summary))
    (out / "report.png").write_bytes(report.chart_png(summary))
    with_plugin = sum(s["with_plugin"]["reprocessed"] for s in results["scenarios"].values())
    data = summary.to_json()
    checked = {"calls": summary.totals.calls, "reprocessed_tokens": summary.totals.reprocessed_tokens,
               "with_plugin_reprocessed": with_plugin,
               "equal": summary.totals.reprocessed_tokens == with_plugin,
               "classes": {c: v for c, v in data["classes"].items() if v["calls"]}}
    print(f"report of the plugin's log: {summary.totals.calls} calls, re-processed {summary.totals.reprocessed_tokens} "
          f"(upstream answers: {with_plugin}; equal: {checked['equal']}); classes "
          + ", ".join(f"{c} {v['calls']}" for c, v in checked["classes"].items()), flush=True)
    return checked


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="litellm-prefix-bench-"))
    llama = LlamaServer(free_port(), work / "llama-server.log")
    proxies = []
    try:
        plain = Proxy(work, llama_config(llama.url, plugin=False), {}, name="plain")
        prefix_log = work / "prefix.jsonl"
        plugin = Proxy(work, llama_config(llama.url, plugin=True), {**PLUGIN_ENV, "LITELLM_PREFIX_LOG": str(prefix_log)},
                       name="plugin")
        proxies = [plain, plugin]
        for proxy in proxies:
            proxy.wait_ready()
            proxy.client.timeout = httpx.Timeout(900)  # a cold 20k-token prefill on a busy 2-core machine
        results: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}",
                         "server": f"llama.cpp server from {server_version()}, tiny random llama, one slot, "
                                   "cache_prompt on, cache_ram 0",
                         "scenarios": {}}
        for name in SCENARIOS:
            scenario = {
                "without_plugin": run(plain, ROOT / "bench" / "scenarios" / f"{name}.noisy.jsonl", llama),
                "with_plugin": run(plugin, ROOT / "bench" / "scenarios" / f"{name}.noisy.jsonl", llama),
                "stable_client": run(plain, ROOT / "bench" / "scenarios" / f"{name}.clean.jsonl", llama),
            }
            scenario["with_over_stable"] = round(
                scenario["with_plugin"]["reprocessed"] / max(1, scenario["stable_client"]["reprocessed"]), 3)
            results["scenarios"][name] = scenario
            (ROOT / "bench" / "results" / "cache_real.json").write_text(json.dumps(results, indent=2) + "\n")
            print(f"{name:12} re-processed without {scenario['without_plugin']['reprocessed']:>7}  "
                  f"with {scenario['with_plugin']['reprocessed']:>7}  stable client "
                  f"{scenario['stable_client']['reprocessed']:>7}  (with/stable {scenario['with_over_stable']:.3f}); "
                  f"median s/request {scenario['without_plugin']['median_seconds']} / "
                  f"{scenario['with_plugin']['median_seconds']} / {scenario['stable_client']['median_seconds']}",
                  flush=True)
        out = ROOT / "bench" / "results"
        (out / "cache_real.json").write_text(json.dumps(results, indent=2) + "\n")
        chart(results, out / "pi_turns.png")
        results["report"] = check_report(prefix_log, results, out)
        (out / "cache_real.json").write_text(json.dumps(results, indent=2) + "\n")
        print(f"written to {out / 'cache_real.json'} and {out / 'pi_turns.png'}")
    finally:
        for proxy in proxies:
            proxy.stop()
        llama.stop()


if __name__ == "__main__":
    main()
