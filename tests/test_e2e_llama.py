"""End to end on a real prefix-caching server: the plugin brings a noisy pi session within 5% of a stable client.

The noisy session goes through a real LiteLLM proxy with the plugin to llama-server; the
clean session (a perfectly stable client) sent straight to llama-server is the limit.
Counts are llama-server's own: prompt tokens minus the tokens it took from its cache.
(That the noisy session really costs more without the plugin is shown on the same
files by tests/test_replay.py and measured on this server by bench/cache_real.py; sending
it here too would double the test's time.)
"""
from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from litellm_prefix.cli import usage_tokens
from litellm_prefix.replay import load

pytestmark = pytest.mark.e2e
SCENARIO = Path(__file__).resolve().parent.parent / "bench" / "scenarios"


def _reprocessed(post, llama, path: Path) -> list[int]:
    httpx.post(f"{llama.url}/v1/chat/completions", timeout=300,
               json={"messages": [{"role": "user", "content": "flush the slot"}], "max_tokens": 1})
    out = []
    for turn in load(path):
        response = post({**turn.request, "model": "llama-local"}, turn.session)
        assert response.status_code == 200, response.text[:500]
        prompt, cached = usage_tokens(response.json())
        out.append(prompt - cached)
    return out


def test_plugin_cuts_reprocessed_tokens_to_within_5_percent_of_a_stable_client(llama, replicas):
    direct = httpx.Client(base_url=llama.url, timeout=300)
    proxy = replicas[0]

    def via_llama(body, session):
        return direct.post("/v1/chat/completions", json=body)

    def via_proxy(body, session):
        return proxy.client.post("/v1/chat/completions", json=body, headers={"x-session-id": session + "-e2e"})

    with_plugin = _reprocessed(via_proxy, llama, SCENARIO / "pi.noisy.jsonl")
    stable = _reprocessed(via_llama, llama, SCENARIO / "pi.clean.jsonl")
    print(f"re-processed tokens: with the plugin {sum(with_plugin)}, stable client {sum(stable)}")
    assert all(n > 0 for n in stable)  # the server really reports per-request prefill
    assert sum(with_plugin) <= 1.05 * sum(stable)
