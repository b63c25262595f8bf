"""The per-agent bench (bench/agents.py) on the bundled sessions: agents found from their headers
alone, nothing lost, and every row within 1.02x of a perfectly stable client with no setting changed."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def bench():
    from bench import agents as module

    return module


@pytest.mark.parametrize("agent, detected", [
    ("claude-code", "claude-code"), ("opencode", "opencode"), ("codex", "codex"), ("unknown", "none")])
def test_each_agent_row_at_zero_configuration(bench, agent, detected):
    row = bench.measure(agent)
    assert row["detected"] == {detected: row["requests"]}
    assert row["lost"] == []
    assert row["plugin_vs_stable"] <= bench.TARGET_RATIO, row
    if agent != "codex":  # Codex keeps its head stable by itself
        assert row["no_plugin_vs_stable"] > 1.5, row
