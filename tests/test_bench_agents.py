"""The per-agent bench (bench/agents.py) on the bundled sessions: agents found from their headers,
nothing lost, and the rows that need no learned lines within 1.02x of a perfectly stable client."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("bench_agents", ROOT / "bench" / "agents.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_agents"] = module
    spec.loader.exec_module(module)
    return module


def test_claude_code_and_codex_rows_at_zero_configuration():
    bench = _bench()
    for agent in ("claude-code", "codex"):
        row = bench.measure(agent)
        assert row["detected"] == {agent: row["requests"]}
        assert row["lost"] == []
        assert row["plugin_vs_stable"] <= bench.TARGET_RATIO, row
    claude = bench.measure("claude-code")
    assert claude["no_plugin_vs_stable"] > 5  # the billing block alone breaks every request


def test_every_bundled_agent_session_loses_nothing_and_unknown_agents_get_no_profile():
    bench = _bench()
    for agent in ("opencode", "unknown"):
        row = bench.measure(agent)
        assert row["lost"] == []
        assert row["detected"] == ({"opencode": row["requests"]} if agent == "opencode" else {"none": row["requests"]})
