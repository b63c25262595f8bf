"""End to end on a real prefix-caching server: the plugin brings a noisy pi session within 5% of a stable client.

The noisy session goes through a real LiteLLM proxy with the plugin to llama.cpp's server
(the xllamacpp wheel, harness/llama_server.py); the clean session (a perfectly stable client)
sent straight to that server is the limit. Counts are the server's own: prompt tokens minus
the tokens it took from its cache.
(That the noisy session really costs more without the plugin is shown on the same
files by tests/unit/offline/test_replay.py and measured on this server by bench/cache_real.py; sending
it here too would double the test's time.)
"""
from __future__ import annotations

from pathlib import Path

import httpx

from litellm_prefix.offline.cli import usage_tokens
from litellm_prefix.offline.replay import load
from tests.support import ROOT

SCENARIO = ROOT / "bench" / "scenarios"


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


def test_the_server_reuses_exactly_the_longest_common_prefix(llama):
    """The launcher's settings (one slot, cache_prompt, no RAM cache) give llama.cpp's own prefix reuse:
    an identical repeat takes all but the last prompt token from the cache, a changed first byte none
    past the role header; both counts are reported the way the plugin reads them."""
    system = "You are a coding agent. " + " ".join(f"rule {i}: keep the prefix stable." for i in range(120))

    def ask(text: str) -> tuple[int, int, int, int]:
        body = {"messages": [{"role": "system", "content": text}, {"role": "user", "content": "hi"}], "max_tokens": 1}
        answer = httpx.post(f"{llama.url}/v1/chat/completions", json=body, timeout=300).json()
        return (answer["usage"]["prompt_tokens"], answer["usage"]["prompt_tokens_details"]["cached_tokens"],
                answer["timings"]["prompt_n"], answer["timings"]["cache_n"])

    ask("flush the slot")
    prompt, cached, prompt_n, cache_n = ask(system)
    assert prompt > 1000 and cached == cache_n < 8 and prompt_n == prompt - cache_n  # new text: prefilled
    prompt, cached, prompt_n, cache_n = ask(system)
    assert cached == cache_n == prompt - 1 and prompt_n == 1  # all but the token that yields the logits
    changed = "X" + system[1:]
    prompt, cached, prompt_n, cache_n = ask(changed)
    assert cached == cache_n < 8 and prompt_n == prompt - cache_n  # only "<|im_start|>system\n" survives
