"""Cost of measuring each call's cache use: the success hook, and what it adds to the request path.

One pi-like session (sectioned system prompt, 35 tools with schemas, a conversation that
grows by one turn per request, as a stable client sends it). Per request:

- request path: the transform with a ``litellm_call_id`` (it then keeps the request's
  shape: the replay rendering's digests and offsets, and what it shares with the
  previous request) against the same transform without one (nothing kept);
- success hook: ``PrefixStabilizer.async_log_success_event`` with the ``kwargs`` LiteLLM
  passes (call id, ``standard_logging_object`` with the usage), JSONL log on;
- memory: the bytes of the session's record (the last request's shape) after the session.

Reported: medians (ms) and, measured in the same run, the ratio to one ``json.dumps`` of
the request (work every gateway does per request anyway). Writes
bench/results/measure_overhead.json.

    .venv/bin/python -m bench.measure_overhead [--samples N]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harness.realistic import conversation, openai_tools, pi_system_prompt
from litellm_prefix.hook import PrefixStabilizer
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def session(tokens: int, turns: int) -> list[dict]:
    system = pi_system_prompt(target_tokens=tokens)
    history = conversation(turns)
    return [{"model": "chat-model", "messages": [{"role": "system", "content": system}, *history[: 4 * (i + 1)]],
             "tools": openai_tools(), "metadata": {"session_id": f"measure-{tokens}"}} for i in range(turns)]


async def measure(tokens: int, samples: int, log: Path) -> dict:
    settings = Settings(path_check="trusted", stable_path="/srv/pi-home", log=str(log))
    measuring, plain = PrefixStabilizer(settings), PrefixStabilizer(settings.model_copy(update={"log": None}))
    target = Target(model="openai/local", provider="openai")
    requests = session(tokens, samples)
    with_id, without_id, hook, dumps = [], [], [], []
    prompt = 0
    for i, request in enumerate(requests):
        call_id = f"call-{tokens}-{i}"
        data = {**request, "litellm_call_id": call_id}
        t0 = time.perf_counter_ns()
        await measuring.core.stabilize(data, "acompletion", target=target)
        t1 = time.perf_counter_ns()
        await plain.core.stabilize(dict(request), "acompletion", target=target)
        t2 = time.perf_counter_ns()
        json.dumps(request)
        t3 = time.perf_counter_ns()
        cached, prompt = prompt, prompt + 900 + tokens // max(1, samples)
        kwargs = {"litellm_call_id": call_id, "standard_logging_object": {
            "litellm_call_id": call_id, "model_id": "deployment-1", "custom_llm_provider": "openai",
            "model": "local", "api_base": "http://127.0.0.1:8080/v1",
            "metadata": {"usage_object": {"prompt_tokens": prompt, "completion_tokens": 3,
                                          "prompt_tokens_details": {"cached_tokens": cached}}}}}
        t4 = time.perf_counter_ns()
        await measuring.async_log_success_event(kwargs, None, None, None)
        t5 = time.perf_counter_ns()
        with_id.append((t1 - t0) / 1e6)
        without_id.append((t2 - t1) / 1e6)
        dumps.append((t3 - t2) / 1e6)
        hook.append((t5 - t4) / 1e6)
    assert measuring.core.stats["errors"] == 0
    calls = [json.loads(line) for line in log.read_text().splitlines() if '"event": "call"' in line]
    assert len(calls) == samples, len(calls)
    median = statistics.median
    added = median(with_id) - median(without_id)
    (record,) = measuring.core.sinks.sessions.values()
    shape = record.shape
    shape_bytes = (sys.getsizeof(shape.kinds) + sys.getsizeof(shape.lengths) + sys.getsizeof(shape.digests)
                   + sys.getsizeof(shape.pieces) + sum(sys.getsizeof(v) for v in shape.pieces.values()))
    return {
        "prompt_tokens_est": tokens, "samples": samples,
        "success_hook_median_ms": round(median(hook), 4),
        "request_path_added_median_ms": round(added, 4),
        "transform_with_measurement_median_ms": round(median(with_id), 4),
        "transform_without_median_ms": round(median(without_id), 4),
        "json_dumps_median_ms": round(median(dumps), 4),
        "success_hook_over_json_dumps": round(median(hook) / median(dumps), 3),
        "session_record_bytes": shape_bytes, "last_request_bytes": shape.length, "last_request_parts": len(shape.kinds),
        "request_path_added_over_json_dumps": round(added / median(dumps), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=60)
    args = parser.parse_args()
    results = {"machine": f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}",
               "sizes": []}
    with tempfile.TemporaryDirectory() as tmp:
        for tokens in (2000, 20000):
            log = Path(tmp) / f"log-{tokens}.jsonl"
            result = asyncio.run(measure(tokens, args.samples, log))
            results["sizes"].append(result)
            print(f"~{tokens:>6} tokens: success hook {result['success_hook_median_ms']:.3f} ms "
                  f"({result['success_hook_over_json_dumps']:.2f}x json.dumps); request path "
                  f"+{result['request_path_added_median_ms']:.3f} ms "
                  f"({result['request_path_added_over_json_dumps']:.2f}x json.dumps); transform "
                  f"{result['transform_with_measurement_median_ms']:.3f} ms with, "
                  f"{result['transform_without_median_ms']:.3f} ms without; session record "
                  f"{result['session_record_bytes']} bytes for a {result['last_request_bytes']}-byte request", flush=True)
    out = ROOT / "bench" / "results" / "measure_overhead.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
