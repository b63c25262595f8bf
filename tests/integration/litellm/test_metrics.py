"""End to end: a real LiteLLM proxy (Prometheus callback on) with the plugin, in front of a
real llama.cpp server (one slot, exact longest-common-prefix reuse) with the tiny model.

- a stable session: every turn after the first is a ``hit`` (streaming included);
- a genuine head edit: exactly one ``client_drift``, naming the section;
- the llama.cpp server restarted between two turns (cache gone, bytes stable): ``provider_miss``;
- the proxy's own ``/metrics`` shows the plugin's counters moving;
- ``litellm-prefix report --html`` on the resulting log: the page exists, embeds the chart,
  and its numbers equal the sums of the upstream's own counts in the HTTP answers.
"""
from __future__ import annotations

import base64
import json
import re

import pytest

from harness.procs import log_records, sdk_callbacks
from harness.realistic import pi_sections, render_pi, sentence
from litellm_prefix.offline.cli import main as cli_main, usage_tokens

GROUP = "llama-metrics"


@pytest.fixture(scope="module")
def stack(e2e_dir):
    from harness.llama_server import LlamaServer
    from harness.procs import Proxy, free_port

    work = e2e_dir / "metrics"
    work.mkdir(exist_ok=True)
    port = free_port()
    llama = LlamaServer(port, work / "llama-server.log")
    log = work / "prefix.jsonl"
    config = {
        "model_list": [{"model_name": GROUP,
                        "litellm_params": {"model": "openai/local", "api_base": f"http://127.0.0.1:{port}/v1",
                                           "api_key": "none"},
                        "model_info": {"litellm_prefix": {"pathCheck": "absolute"}}}],
        "litellm_settings": {"callbacks": ["prometheus", "litellm_prefix.proxy_handler"]},
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"},
    }
    proxy = Proxy(work, config, {"LITELLM_PREFIX_LOG": str(log)}, name="proxy-metrics")
    state = {"llama": llama, "port": port, "work": work, "usage": []}
    try:
        proxy.wait_ready()
        state.update(proxy=proxy, log=log)
        yield state
    finally:
        proxy.stop()
        state["llama"].stop()


def head(**changes) -> str:
    sections = pi_sections(target_tokens=1500)
    sections.update(changes)
    return render_pi(sections)


def history(turns: int, seed: int) -> list[dict]:
    import random

    rng = random.Random(seed)
    out = []
    for i in range(turns):
        out.append({"role": "user", "content": f"Turn {i}: {sentence(rng, 20)}"})
        out.append({"role": "assistant", "content": sentence(rng, 30)})
    return out


def run_session(stack, session: str, heads: list[str], seed: int, stream_last: bool = False,
                before_turn=None) -> list[dict]:
    """Send one request per head (turn i carries i user turns); returns the call records logged for it."""
    turns = history(len(heads), seed)
    for i, system in enumerate(heads):
        if before_turn:
            before_turn(i)
        body = {"model": GROUP, "max_tokens": 3, "temperature": 0,
                "messages": [{"role": "system", "content": system}, *turns[: 2 * i + 1]]}
        if stream_last and i == len(heads) - 1:
            body.update(stream=True, stream_options={"include_usage": True})
            with stack["proxy"].client.stream("POST", "/v1/chat/completions", json=body,
                                              headers={"x-session-id": session}) as response:
                assert response.status_code == 200
                chunks = [json.loads(line[6:]) for line in response.iter_lines()
                          if line.startswith("data: ") and line != "data: [DONE]"]
            usage = next(c["usage"] for c in reversed(chunks) if c.get("usage"))
            stack["usage"].append(usage_tokens({"usage": usage}))
        else:
            response = stack["proxy"].post("/v1/chat/completions", body, **{"x-session-id": session})
            stack["usage"].append(usage_tokens(response.json()))
    return wait_for_calls(stack, len(heads), session)


def calls_logged(stack) -> list[dict]:
    return [r for r in log_records(stack["log"]) if r.get("event") == "call"]  # once the writer caught up


def wait_for_calls(stack, n: int, session_marker: str) -> list[dict]:
    """Success callbacks run after the answer: wait until the session's n call records are there."""
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        calls = calls_logged(stack)
        sessions = {}
        for c in calls:
            sessions.setdefault(c["session"], []).append(c)
        # the newest session in the log is the one just sent
        last = calls[-1]["session"] if calls else None
        if last and len(sessions[last]) >= n:
            return sessions[last]
        time.sleep(0.2)
    raise AssertionError(f"{n} call records for {session_marker} did not arrive: {calls_logged(stack)[-5:]}")


def metrics_text(stack) -> str:
    # the proxy's own /metrics (its Prometheus callback mounts it; it asks for the proxy key by default)
    response = stack["proxy"].client.get("/metrics/", follow_redirects=True)
    assert response.status_code == 200, response.text[:500]
    return response.text


def metric(stack, name: str, **labels) -> float:
    text = metrics_text(stack)
    total = 0.0
    for line in text.splitlines():
        if not (line.startswith(name + "{") or line.startswith(name + " ")):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0])) if "{" in line else {}
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_stable_session_hits_every_later_turn_and_metrics_move(stack):
    assert "# TYPE litellm_prefix_calls_total counter" in metrics_text(stack)
    hits_before = metric(stack, "litellm_prefix_calls_total", model_group=GROUP, **{"class": "hit"})
    calls = run_session(stack, "e2e-metrics-stable", [head()] * 5, seed=1, stream_last=True)
    assert [c["class"] for c in calls] == ["first", "hit", "hit", "hit", "hit"], calls
    assert all(c["cached_tokens"] > 0 for c in calls[1:])
    assert metric(stack, "litellm_prefix_calls_total", model_group=GROUP, **{"class": "hit"}) == hits_before + 4
    assert metric(stack, "litellm_prefix_cached_tokens_total", model_group=GROUP) >= sum(
        c["cached_tokens"] for c in calls)
    assert metric(stack, "litellm_prefix_requests_total", model_group=GROUP) >= 5
    assert metric(stack, "litellm_prefix_transform_seconds_count") >= 5


def test_genuine_head_edit_is_exactly_one_client_drift_naming_the_section(stack):
    base = pi_sections(target_tokens=1500)
    edited = render_pi({**base, "rules": base["rules"] + "\n- Always run the linter before committing."})
    original = render_pi(base)
    calls = run_session(stack, "e2e-metrics-drift", [original, original, edited, edited, edited], seed=2)
    assert [c["class"] for c in calls] == ["first", "hit", "client_drift", "hit", "hit"], calls
    drift = calls[2]
    assert drift["where"] == "section:rules" and drift["drift"]["changed"] == ["section:rules"]
    assert drift["tokens_lost"] > 0
    assert metric(stack, "litellm_prefix_drift_events_total", model_group=GROUP, part="section:rules") >= 1


def reusable(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_server_restart_between_turns_is_a_provider_miss(stack):
    from harness import llama_server
    from harness.llama_server import LlamaServer

    def restart_before_third(i: int) -> None:
        if i == 2:
            stack["llama"].stop()
            # Same port, so the proxy's deployment stays the same. The proxy's closed keep-alive
            # connections leave the port in TIME_WAIT, which llama.cpp's own bind (SO_REUSEADDR)
            # accepts but the launcher's strict free-port check does not: check it the server's way.
            strict = llama_server.port_is_free
            llama_server.port_is_free = reusable
            try:
                stack["llama"] = LlamaServer(stack["port"], stack["work"] / "llama-server.log")
            finally:
                llama_server.port_is_free = strict

    calls = run_session(stack, "e2e-metrics-restart", [head()] * 3, seed=3, before_turn=restart_before_third)
    assert [c["class"] for c in calls] == ["first", "hit", "provider_miss"], calls
    miss = calls[2]
    assert miss["reason"] == "evicted" and miss["deployment"] == miss["previous_deployment"] != ""
    assert miss["tokens_lost"] == miss["expected_tokens"] - miss["cached_tokens"] > 0
    assert miss["idle_s"] >= 0


def test_report_html_numbers_equal_the_upstreams_own_counts(stack, tmp_path, capsys):
    assert stack["usage"], "run after the session tests"
    page = tmp_path / "report.html"
    assert cli_main(["report", str(stack["log"]), "--html", str(page), "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    prompt = sum(p for p, _ in stack["usage"])
    cached = sum(c for _, c in stack["usage"])
    assert summary["totals"]["calls"] == len(stack["usage"]) == len(calls_logged(stack))
    assert (summary["totals"]["prompt_tokens"], summary["totals"]["cached_tokens"]) == (prompt, cached)
    assert summary["totals"]["reprocessed_tokens"] == prompt - cached
    assert summary["classes"]["client_drift"]["calls"] == 1 and summary["classes"]["provider_miss"]["calls"] == 1
    text = page.read_text()
    png = re.search(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", text)
    assert png and base64.b64decode(png.group(1)).startswith(b"\x89PNG")
    assert int(re.search(r"id='reprocessed_tokens'>(\d+)<", text).group(1)) == prompt - cached


@pytest.mark.anyio
async def test_sdk_calls_are_measured_streaming_included(upstream, tmp_path):
    """Through the SDK (deployment hook + success callback), against the recording upstream."""
    import asyncio

    import litellm

    from litellm_prefix.hook import PrefixStabilizer
    from litellm_prefix.settings import Settings

    log = tmp_path / "sdk.jsonl"
    handler = PrefixStabilizer(Settings(path_check="absolute", log=str(log)))
    usages = []
    with sdk_callbacks(handler):
        upstream.take()
        system = head()
        for i, stream in enumerate((False, True)):
            messages = [{"role": "system", "content": system}, *history(i + 1, seed=9)[: 2 * i + 1]]
            kwargs = dict(model="openai/upstream-sdk", api_base=f"{upstream.url}/v1", api_key="dummy",
                          messages=messages, metadata={"session_id": "sdk-measured-1"})
            if stream:
                response = await litellm.acompletion(**kwargs, stream=True, stream_options={"include_usage": True})
                chunks = [chunk async for chunk in response]
                usages.append(usage_tokens({"usage": next(c.usage for c in reversed(chunks)
                                                          if getattr(c, "usage", None)).model_dump()}))
            else:
                response = await litellm.acompletion(**kwargs)
                usages.append(usage_tokens({"usage": response.usage.model_dump()}))
        for _ in range(100):
            calls = [r for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "call"] \
                if log.exists() else []
            if len(calls) == 2:
                break
            await asyncio.sleep(0.1)
    assert [(c["prompt_tokens"], c["cached_tokens"]) for c in calls] == usages
    assert calls[0]["class"] == "first" and calls[1]["class"] in ("hit", "provider_miss")
