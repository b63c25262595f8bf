"""bench/hosted.py, shortened: two agents' recorded requests (Claude Code to Anthropic Messages,
opencode to GPT-5.6 chat: what their real CLIs sent through a proxy, ``harness/hook_record``'s
fixture) replayed through the session's proxy to the provider emulators, in every mode that applies;
the plugin's money against the ideal client's and LiteLLM's own options. The real CLIs run through
the emulators in the full bench (``python -m bench.hosted``, its table in the README) and against
the scripted model in tests/agents/test_real_agents.py.
"""
from __future__ import annotations

from bench import hosted


def test_the_plugin_pays_no_more_than_an_ideal_client_and_litellms_own_options(proxy, providers, tmp_path):
    outcome = hosted.run_cells(hosted.SHORT_CELLS, providers, proxy, tmp_path, recorded=True)
    rows, _ = hosted.measure(hosted.SHORT_CELLS, outcome)
    table = hosted.table(rows)
    assert {(r["agent"], r["provider"]) for r in table} == set(hosted.SHORT_CELLS)
    for cell in table:
        name = f"{cell['agent']} -> {cell['provider']}"
        assert cell["plugin_over_ideal"] <= hosted.TARGET, (name, cell)
        assert cell["plugin_usd"] <= cell["litellm_best_usd"] * 1.001, (name, cell)
        assert cell["rejected"] == 0 and cell["max_marks"] <= 4, (name, cell)
    requests = {(r["agent"], r["mode"]): r["requests"] for r in rows if r["mode"] != "ideal"}
    recorded = {agent: len(hosted.recorded_calls(agent)) for agent, _ in hosted.SHORT_CELLS}
    assert all(n == recorded[agent] for (agent, _), n in requests.items()), (requests, recorded)  # every one answered
