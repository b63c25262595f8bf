"""Money: billed input cost, cache savings and drift cost, priced from LiteLLM's cost map or the
deployment's own prices, checked against figures computed by hand; unknown prices stay unknown.

The calls go through the transform and the success callback in process (``tests/unit/measure/test_measure.py``'s ``Session``:
the kwargs LiteLLM builds, a simulated upstream); the report reads the JSONL they wrote.
"""
from __future__ import annotations

import json

import pytest
from prometheus_client import REGISTRY

from litellm_prefix.measure import pricing
from litellm_prefix.measure.sinks import flush_logs
from litellm_prefix.offline import report
from tests.unit.measure.test_measure import Session, pi_head, turns

# LiteLLM's cost map (the local copy, LITELLM_LOCAL_MODEL_COST_MAP=True), USD per token.
GPT_4O = pricing.Prices(2.5e-06, 1.25e-06, None, "cost_map")
SONNET = pricing.Prices(3e-06, 3e-07, 3.75e-06, "cost_map", cache_write_1h=6e-06)


def test_prices_come_from_the_cost_map_for_hosted_models():
    assert pricing.prices_for("gpt-4o", "openai") == GPT_4O
    assert pricing.prices_for("claude-sonnet-4-5", "anthropic") == SONNET


def test_a_deployment_s_own_price_wins_and_zero_is_a_price():
    own = pricing.prices_for("qwen3", "hosted_vllm", {}, {"input_cost_per_token": 0})
    assert own == pricing.Prices(0.0, None, None, "deployment") and own.known
    # what LiteLLM itself priced the call at (custom pricing included) comes first
    slo = {"model_map_information": {"model_map_value": {"input_cost_per_token": 1e-06,
                                                         "cache_read_input_token_cost": 1e-07}}}
    assert pricing.prices_for("gpt-4o", "openai", slo, {"input_cost_per_token": 5e-06}) == pricing.Prices(
        1e-06, 1e-07, None, "call")


def test_an_unmapped_self_hosted_model_has_no_price_not_a_zero_one():
    prices = pricing.prices_for("qwen3", "hosted_vllm")
    assert prices is pricing.UNKNOWN and not prices.known
    cost = pricing.cost_of(prices, 10_000, 8_000, lost=1_000)
    assert cost == pricing.Cost(None, None, None) and cost.to_json() is None


def test_openai_style_call_by_hand():
    # 10,000 prompt tokens, 8,000 read from the cache, 1,000 lost to client drift
    cost = pricing.cost_of(GPT_4O, 10_000, 8_000, lost=1_000)
    assert cost.billed == pytest.approx(2_000 * 2.5e-06 + 8_000 * 1.25e-06)  # $0.015
    assert cost.saved == pytest.approx(8_000 * (2.5e-06 - 1.25e-06))  # $0.01
    assert cost.drift == pytest.approx(1_000 * (2.5e-06 - 1.25e-06))  # $0.00125


def test_anthropic_style_call_by_hand_with_the_write_premium():
    # 10,000 = 6,000 read + 3,000 written + 1,000 fresh; 2,000 lost and written again at 1.25x
    cost = pricing.cost_of(SONNET, 10_000, 6_000, written=3_000, lost=2_000)
    assert cost.billed == pytest.approx(1_000 * 3e-06 + 6_000 * 3e-07 + 3_000 * 3.75e-06)  # $0.01605
    assert cost.saved == pytest.approx(6_000 * (3e-06 - 3e-07))  # $0.0162
    assert cost.drift == pytest.approx(2_000 * (3.75e-06 - 3e-07))  # $0.0069
    # no write that call: the lost tokens cost the input price over the read price
    assert pricing.cost_of(SONNET, 10_000, 6_000, lost=2_000).drift == pytest.approx(2_000 * (3e-06 - 3e-07))


def _session_with_prices(tmp_path, name, provider, model, litellm_params=None, usage=None):
    s = Session(tmp_path / name, provider=provider, session=f"sess-money-{name}", group=f"group-money-{name}")
    (tmp_path / name).mkdir()
    calls = []
    for i, req in enumerate(turns(3, pi_head())):
        s.n += 1
        data = {**req, "litellm_call_id": f"money-{name}-{i}", "metadata": {"session_id": s.session}}
        from litellm_prefix.request.target import Target

        s.stabilizer.stabilize_sync(data, "acompletion", target=Target(model=model, provider=provider),
                                    model_names=(s.group, model))
        sent = {k: v for k, v in data.items() if k not in ("litellm_call_id", "metadata")}
        use = usage[i] if usage else s.upstream.usage(sent)
        slo = {"litellm_call_id": data["litellm_call_id"], "model_id": "dep", "custom_llm_provider": provider,
               "model": model, "api_base": "", "metadata": {"usage_object": use, "user_api_key_team_id": "team-7"}}
        kwargs = {"litellm_call_id": data["litellm_call_id"], "standard_logging_object": slo}
        if litellm_params is not None:
            kwargs["litellm_params"] = litellm_params
        calls.append(s.stabilizer.completed(kwargs, None))
    return s, calls


def test_each_call_record_carries_its_cost_and_the_report_adds_them_up(tmp_path, capsys):
    usage = [{"prompt_tokens": 4_000, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 0}},
             {"prompt_tokens": 5_000, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 3_968}},
             {"prompt_tokens": 6_000, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 4_992}}]
    hosted, calls = _session_with_prices(tmp_path, "openai", "openai", "gpt-4o", usage=usage)
    billed = sum((u["prompt_tokens"] - u["prompt_tokens_details"]["cached_tokens"]) * 2.5e-06
                 + u["prompt_tokens_details"]["cached_tokens"] * 1.25e-06 for u in usage)
    saved = sum(u["prompt_tokens_details"]["cached_tokens"] * 1.25e-06 for u in usage)
    assert sum(c["cost_usd"]["billed"] for c in calls) == pytest.approx(billed)
    assert sum(c["cost_usd"]["saved"] for c in calls) == pytest.approx(saved)
    assert all(c["tenant"] == calls[0]["tenant"] and len(c["tenant"]) == 12 for c in calls)
    assert "team-7" not in (flush_logs(), hosted.log.read_text())[1]  # the tenant is hashed

    free, free_calls = _session_with_prices(tmp_path, "selfhosted", "hosted_vllm", "qwen3",
                                            litellm_params={"input_cost_per_token": 0,
                                                            "output_cost_per_token": 0})
    assert all(c["cost_usd"] == {"billed": 0.0, "saved": 0.0, "drift": 0.0} for c in free_calls)
    unknown, unknown_calls = _session_with_prices(tmp_path, "unpriced", "hosted_vllm", "qwen3")
    assert all(c["cost_usd"] is None for c in unknown_calls)

    log = tmp_path / "all.jsonl"
    log.write_text("".join((flush_logs(), s.log.read_text())[1] for s in (hosted, free, unknown)))
    summary = report.read(str(log))
    models = summary.to_json()["models"]
    assert models["group-money-openai"]["billed_usd"] == pytest.approx(billed, abs=1e-6)
    assert models["group-money-openai"]["saved_usd"] == pytest.approx(saved, abs=1e-6)
    assert models["group-money-selfhosted"]["billed_usd"] == 0.0
    assert models["group-money-unpriced"]["billed_usd"] is None  # unknown, never zero
    assert models["group-money-unpriced"]["unpriced_calls"] == 3
    tenants = summary.to_json()["tenants"]
    assert list(tenants) == [calls[0]["tenant"]] and tenants[calls[0]["tenant"]]["calls"] == 9
    text = report.text(summary)
    assert "unknown" in text and f"${billed:.4f}" in text
    assert "* 3 call(s) of models with no known price left out" in text
    page = report.html_page(summary)
    assert "id='billed_usd'" in page and "Per tenant" in page


def test_metrics_count_money_and_unpriced_calls(tmp_path):
    def value(name, **labels):
        return REGISTRY.get_sample_value(name, labels) or 0.0

    usage = [{"prompt_tokens": 2_000, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 0}}] + [
        {"prompt_tokens": 2_000, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 1_920}}] * 2
    _, calls = _session_with_prices(tmp_path, "metrics", "openai", "gpt-4o", usage=usage)
    group = "group-money-metrics"
    agent = calls[0].get("agent", "")
    assert value("litellm_prefix_input_cost_usd_total", model_group=group, agent=agent, **{"class": "hit"}) == (
        pytest.approx(2 * (80 * 2.5e-06 + 1_920 * 1.25e-06)))
    assert value("litellm_prefix_cache_saved_usd_total", model_group=group, agent=agent, **{"class": "hit"}) == (
        pytest.approx(2 * 1_920 * 1.25e-06))
    _session_with_prices(tmp_path, "metrics-unpriced", "hosted_vllm", "qwen3")
    assert sum(value("litellm_prefix_unpriced_calls_total", model_group="group-money-metrics-unpriced", agent=agent,
                     **{"class": c}) for c in ("first", "hit", "client_drift", "unknown")) == 3


def test_the_report_reads_old_logs_without_money(tmp_path):
    log = tmp_path / "old.jsonl"
    log.write_text(json.dumps({"event": "call", "session": "s", "model": "m", "class": "hit", "prompt_tokens": 10,
                               "cached_tokens": 8, "tokens_lost": 0}) + "\n")
    out = report.read(str(log)).to_json()
    assert out["totals"]["billed_usd"] is None and out["totals"]["unpriced_calls"] == 1


# -- paid cache writes: Anthropic 1.25x / 2x, OpenAI GPT-5.6 1.25x, and writes never read ----------

GPT56 = pricing.Prices(4e-06, 4e-07, 5e-06, "cost_map")


def test_one_hour_writes_are_billed_at_their_own_price():
    # 10,000 = 2,000 read + 6,000 written (4,000 of them with ttl 1h) + 2,000 fresh
    cost = pricing.cost_of(SONNET, 10_000, 2_000, written=6_000, written_1h=4_000)
    assert cost.billed == pytest.approx(2_000 * 3e-06 + 2_000 * 3e-07 + 2_000 * 3.75e-06 + 4_000 * 6e-06)
    assert pricing.unread_write_cost(SONNET, 1_000) == pytest.approx(1_000 * 0.75e-06)
    assert pricing.unread_write_cost(SONNET, 1_000, one_hour=True) == pytest.approx(1_000 * 3e-06)
    assert pricing.unread_write_cost(GPT_4O, 1_000) == 0.0  # no write premium: an unread write costs nothing extra


def test_gpt56_writes_are_read_from_every_usage_shape_and_billed_1_25x():
    from litellm_prefix.measure import classify

    assert pricing.prices_for("gpt-5.6", "openai") == GPT56
    chat = {"prompt_tokens": 10_000, "prompt_tokens_details": {"cached_tokens": 6_000, "cache_write_tokens": 3_000}}
    responses = {"input_tokens": 10_000, "input_tokens_details": {"cached_tokens": 6_000, "cache_write_tokens": 3_000}}
    anthropic = {"input_tokens": 1_000, "cache_read_input_tokens": 6_000, "cache_creation_input_tokens": 3_000,
                 "cache_creation": {"ephemeral_5m_input_tokens": 1_000, "ephemeral_1h_input_tokens": 2_000}}
    litellm_usage = {"prompt_tokens": 10_000, "cache_creation_input_tokens": 3_000, "prompt_tokens_details": {
        "cached_tokens": 6_000, "cache_write_tokens": 3_000,
        "cache_creation_token_details": {"ephemeral_5m_input_tokens": 1_000, "ephemeral_1h_input_tokens": 2_000}}}
    for usage, hour in ((chat, 0), (responses, 0), (anthropic, 2_000), (litellm_usage, 2_000)):
        m = classify.measure(usage)
        assert (m.prompt, m.cached, m.written, m.written_1h) == (10_000, 6_000, 3_000, hour), usage
    cost = pricing.cost_of(GPT56, 10_000, 6_000, written=3_000)
    assert cost.billed == pytest.approx(1_000 * 4e-06 + 6_000 * 4e-07 + 3_000 * 5e-06)


def _anthropic_usage(prompt: int, cached: int, written: int) -> dict:
    return {"input_tokens": prompt - cached - written, "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": written}


def test_a_write_the_next_call_does_not_read_is_a_write_never_read(tmp_path):
    """Turn 1 writes 3,000 tokens; turn 2 reads them (nothing unread); turn 3's head changed, so it
    reads only 1,000 and turn 2's 1,000-token write is never read: the record, the report's class
    and the metrics say so, priced at the write premium (Sonnet: 0.75 $/M above input)."""
    usage = [_anthropic_usage(3_000, 0, 3_000), _anthropic_usage(4_000, 3_000, 1_000),
             _anthropic_usage(5_000, 1_000, 4_000)]
    s, calls = _session_with_prices(tmp_path, "unread", "anthropic", "claude-sonnet-4-5", usage=usage)
    assert [c.get("cache_write_tokens") for c in calls] == [3_000, 1_000, 4_000]
    assert "write_never_read" not in calls[0] and "write_never_read" not in calls[1]
    # turn 3 read 1,000 tokens: of turn 2's write (3,000 .. 4,000) it read nothing
    assert calls[2]["write_never_read"] == {"tokens": 1_000, "cost_usd": pytest.approx(1_000 * 0.75e-06)}
    flush_logs()
    summary = report.read(str(s.log)).to_json()
    assert summary["classes"]["write_never_read"] == {"calls": 1, "tokens_lost": 1_000, "reprocessed_tokens": 0}
    assert summary["totals"]["written_tokens"] == 8_000
    assert summary["totals"]["write_never_read_usd"] == pytest.approx(1_000 * 0.75e-06, abs=1e-9)
    assert "never read" in report.text(report.read(str(s.log)))
    agent = calls[0].get("agent", "")
    assert REGISTRY.get_sample_value("litellm_prefix_tokens_lost_total", {
        "model_group": "group-money-unread", "agent": agent, "class": "write_never_read"}) == 1_000


def test_a_write_read_after_its_ttl_expired_was_never_read():
    from litellm_prefix.measure import classify

    assert classify.write_read_back(1_000, 3_000, 4_000, idle=10, ttl=300) == 1_000
    assert classify.write_read_back(1_000, 3_000, 3_500, idle=10, ttl=300) == 500
    assert classify.write_read_back(1_000, 3_000, 4_000, idle=301, ttl=300) == 0  # expired first
    assert classify.write_read_back(1_000, 3_000, 4_000, idle=1_000, ttl=3_600) == 1_000  # a 1-hour write
    assert classify.write_ttl("anthropic", 0) == 300 and classify.write_ttl("anthropic", 5) == 3_600
    assert classify.write_ttl("openai", 0) == 1_800  # GPT-5.6's writes live 30 minutes


def test_a_drift_report_prices_the_prefill_at_the_write_price_where_writes_are_billed():
    from litellm_prefix.measure.sinks import _reprefill_cost
    from litellm_prefix.request.events import Drift
    from litellm_prefix.request.target import Target

    drift = Drift(changed=["rules"], first_diff_char=10, first_diff_token_est=3, first_diff_in="rules", exact=True,
                  reprefill_tokens_est=10_000, before="a", after="b")
    claude = Target(model="claude-sonnet-4-5", provider="anthropic", reads_cache_control=True)
    assert _reprefill_cost(drift, claude) == pytest.approx(10_000 * (3.75e-06 - 3e-07))
    gpt4o = Target(model="gpt-4o", provider="openai")
    assert _reprefill_cost(drift, gpt4o) == pytest.approx(10_000 * (2.5e-06 - 1.25e-06))
    assert _reprefill_cost(drift, Target(model="qwen3", provider="hosted_vllm")) is None
