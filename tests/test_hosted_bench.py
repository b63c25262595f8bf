"""bench/hosted.py, shortened: two real agent CLIs through the session's proxy to the provider
emulators (Claude Code to Anthropic Messages, opencode to GPT-5.6 chat), scenario a (three prompts,
a commit between the first two, the next calendar day before the third), in every mode that
applies; the plugin's money against the ideal client's and LiteLLM's own options.

The full bench (every agent x provider) is ``python -m bench.hosted``; its table is in the README.
"""
from __future__ import annotations

import pytest

from bench import hosted

# On the main LiteLLM release only (``servers`` keeps it out of the second release's suite): it runs
# real CLIs for about a minute, and what it adds over the end-to-end byte tests (which run on both
# releases) is the money, which the full bench measures.
pytestmark = [pytest.mark.e2e, pytest.mark.servers]


def test_the_plugin_pays_no_more_than_an_ideal_client_and_litellms_own_options(proxy, providers, tmp_path):
    outcome = hosted.run_cells(hosted.SHORT_CELLS, providers, proxy, tmp_path, scenarios=("a",))
    rows, _ = hosted.measure(hosted.SHORT_CELLS, outcome)
    table = hosted.table(rows)
    assert {(r["agent"], r["provider"]) for r in table} == set(hosted.SHORT_CELLS)
    for cell in table:
        name = f"{cell['agent']} -> {cell['provider']}"
        assert cell["plugin_over_ideal"] <= hosted.TARGET, (name, cell)
        assert cell["plugin_usd"] <= cell["litellm_best_usd"] * 1.001, (name, cell)
        assert cell["rejected"] == 0 and cell["max_marks"] <= 4, (name, cell)
        assert cell["plugin_lost"] == 0 and cell["plugin_tool_errors"] == 0, (name, cell)
    requests = {(r["agent"], r["mode"]): r["requests"] for r in rows}
    assert all(n >= 3 for n in requests.values()), requests  # every mode answered every prompt
