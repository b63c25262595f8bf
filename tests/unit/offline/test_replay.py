"""`litellm-prefix replay` and `diff` on the bundled scenarios (cl100k_base, offline)."""
from __future__ import annotations

import json

import pytest

from litellm_prefix.offline.cli import main, usage_tokens
from litellm_prefix.offline.replay import CacheModel, Turn, render
from tests.support import ROOT

SCENARIOS = ROOT / "bench" / "scenarios"


def _replay(capsys, name: str) -> dict:
    assert main(["replay", str(SCENARIOS / name), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("agent", ["pi", "claude-code", "codex"])
def test_plugin_brings_noisy_sessions_within_5_percent_of_the_stable_client(agent, capsys, monkeypatch):
    monkeypatch.setenv("LITELLM_PREFIX_VOLATILE_PRESETS", "current-date,todays-date,git-status")
    noisy = _replay(capsys, f"{agent}.noisy.jsonl")
    clean = _replay(capsys, f"{agent}.clean.jsonl")
    oracle = clean["without_plugin"]["reprocessed"]
    assert noisy["without_plugin"]["reprocessed"] > 1.5 * oracle  # the noise really costs
    assert noisy["with_plugin"]["reprocessed"] <= 1.05 * oracle
    assert noisy["with_plugin"]["reprocessed_blocks"] <= 1.05 * clean["without_plugin"]["reprocessed_blocks"]


def test_cache_models():
    model = CacheModel()
    first = list(range(40))
    assert model.feed(first) == (40, 40)
    assert model.feed(first + [99]) == (1, 1 + 40 - 32)  # lcp reuses all 40; blocks reuse 2 full blocks
    assert model.feed([7] + first) == (41, 41)  # a changed first token invalidates everything


def test_render_hoists_late_system_messages_only_for_hoisting_targets():
    request = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "u"},
                            {"role": "system", "content": "late"}]}
    kept = render(Turn("s", "chat", request, {"provider": "openai"}))
    hoisted = render(Turn("s", "chat", request, {"provider": "gemini"}))
    assert kept.index("late") > kept.index("u")
    assert hoisted.index("late") < hoisted.index("u")


def test_diff_names_the_section_and_the_cost(tmp_path, capsys):
    lines = [json.loads(x) for x in (SCENARIOS / "pi.noisy.jsonl").read_text().splitlines()]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(lines[6]))
    b.write_text(json.dumps(lines[7]))  # turn 7: the install path moved
    assert main(["diff", str(a), str(b), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert "section:docs" in result["changed"]
    assert 0 < result["first_diff_token"] < result["tokens_a"]
    assert result["reprefill_tokens"] == result["tokens_b"] - result["first_diff_token"]
    assert main(["diff", str(a), str(a)]) == 0
    assert "identical" in capsys.readouterr().out


def test_usage_tokens_for_each_route():
    assert usage_tokens({"usage": {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 60}}}) == (100, 60)
    assert usage_tokens({"usage": {"input_tokens": 10, "cache_read_input_tokens": 80,
                                   "cache_creation_input_tokens": 5}}) == (95, 80)
    assert usage_tokens({"usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 20}}}) == (50, 20)


def test_replay_rejects_a_bad_route(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"route": "embeddings", "input": "x"}) + "\n")
    assert main(["replay", str(bad)]) == 2
    assert "unknown route" in capsys.readouterr().err
