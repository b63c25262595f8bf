"""The provider emulators (harness/providers): each published cache rule, each wire format.

No child process, no network: the pure accounting (cache.py) and the emulator's request handling
(``server.Emulator.serve``, which the HTTP server only wraps) are called directly.
"""
from __future__ import annotations

import base64
import json

import pytest

from harness.providers import anthropic, gemini, openai
from harness.providers.cache import (
    AnthropicRules,
    AutomaticPrefixRules,
    Block,
    ExplicitBreakpointRules,
    MachinePool,
    Part,
    Replayed,
    Store,
    canonical,
    prompt_of,
    replay,
    replayed_from_record,
    with_marks,
)
from harness.providers.server import Emulator, hosted_groups
from harness.providers.wire import cost_entry, parse_sse
from harness.real_agents.harness import tiny_png
from harness.realistic import anthropic_tools, openai_tools, pi_system_prompt, responses_tools

KEY = {"x-api-key": "k-one"}
BEARER = {"authorization": "Bearer k-one"}
PNG = base64.b64encode(tiny_png()).decode()
FILLER = "The agent reads files before editing them and keeps every change small. "  # 72 bytes: 18 tokens


def text(n_tokens: int, tag: str = "") -> str:
    """About ``n_tokens`` tokens of text (4 bytes a token)."""
    return (tag + FILLER * (n_tokens // 18 + 1))[: n_tokens * 4]


def blocks(*sizes: int, salt: str = "", marks: dict[int, int] | None = None) -> list[Block]:
    marks = marks or {}
    return list(prompt_of([Part(f"b{i}", {"i": i, "n": n, "salt": salt}, marks.get(i), tokens=n)
                           for i, n in enumerate(sizes)]).blocks)


def serve(emulator: Emulator, path: str, body: dict, headers: dict | None = None):
    return emulator.serve(path, json.dumps(body), headers or KEY)


# -- cache.py: blocks and hashes ----------------------------------------------------------------


def test_a_string_content_hashes_as_the_one_text_block_it_renders_as():
    def hashes(content):
        body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": content}]}
        return [b.hash for b in prompt_of(anthropic.request_parts(body)[0]).blocks]

    assert hashes("hello there") == hashes([{"type": "text", "text": "hello there"}])
    assert hashes("hello there") != hashes("hello therE")


def test_cache_marks_are_no_part_of_the_hash():
    plain = {"type": "text", "text": "x"}
    assert canonical(plain) == canonical({**plain, "cache_control": {"type": "ephemeral", "ttl": "1h"}})
    assert canonical(plain) == canonical({**plain, "prompt_cache_breakpoint": {"mode": "explicit"}})
    body = {"model": "claude-sonnet-4-5", "system": [plain], "messages": [{"role": "user", "content": "hi"}]}
    marked = {**body, "system": [{**plain, "cache_control": {"type": "ephemeral"}}]}
    a, b = (prompt_of(anthropic.request_parts(x)[0]).blocks for x in (body, marked))
    assert [x.prefix for x in a] == [x.prefix for x in b]
    assert [x.ttl for x in a] == [None, None] and [x.ttl for x in b] == [300, None]


def test_tokens_are_bytes_over_four_and_an_image_a_fixed_estimate():
    small = {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                      "data": PNG}}]}
    large = {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                      "data": PNG * 50}}]}
    sizes = [prompt_of(anthropic.request_parts({"messages": [m]})[0]).tokens for m in (small, large)]
    assert sizes[0] == sizes[1] and 1600 < sizes[0] < 1700
    assert prompt_of([Part("t", "x" * 400)]).tokens == len(json.dumps("x" * 400)) // 4


# -- Anthropic ----------------------------------------------------------------------------------


def test_anthropic_a_breakpoint_under_the_minimum_neither_reads_nor_writes():
    store, rules = Store(), AnthropicRules(minimum=1024)
    short = blocks(500, 500, marks={1: 300})
    assert rules.charge(short, store, "s", 0) == (0, {}, 1000)
    assert rules.charge(short, store, "s", 1) == (0, {}, 1000)
    longer = blocks(500, 600, marks={1: 300})
    assert rules.charge(longer, store, "s", 2) == (0, {300: 1100}, 0)
    assert rules.charge(longer, store, "s", 3) == (1100, {}, 0)


def test_anthropic_minimum_comes_from_the_cost_map():
    assert anthropic.minimum_tokens("claude-sonnet-4-5") == 1024
    assert anthropic.minimum_tokens("claude-sonnet-4-5-20250929") == 1024
    assert anthropic.minimum_tokens("claude-haiku-4-5") == 4096
    assert anthropic.minimum_tokens("claude-3-haiku-20240307") == 2048  # (the table: not in this cost map)


@pytest.mark.parametrize("back,hits", [(19, True), (20, False), (21, False)])
def test_anthropic_a_breakpoint_looks_back_twenty_block_boundaries_itself_included(back, hits):
    store, rules = Store(), AnthropicRules(minimum=1024)
    first = blocks(2000, *[10] * 30, marks={0: 300})
    rules.charge(first, store, "s", 0)
    later = with_marks(first[: back + 1], {0: None, back: 300})
    charge = rules.charge(later, store, "s", 1)
    assert charge.read == (2000 if hits else 0)
    assert charge.written == {300: 10 * back if hits else 2000 + 10 * back}


def test_anthropic_the_read_is_the_longest_hit_over_all_breakpoints_and_writes_run_to_the_last():
    store, rules = Store(), AnthropicRules(minimum=1024)
    rules.charge(blocks(1500, 100, 100, marks={0: 300, 2: 300}), store, "s", 0)
    charge = rules.charge(blocks(1500, 100, 100, 200, 300, marks={0: 300, 2: 300, 4: 300}), store, "s", 1)
    assert charge == (1700, {300: 500}, 0)
    charge = rules.charge(blocks(1500, 100, 100, 200, 300, 50, marks={0: 300, 3: 300}), store, "s", 2)
    assert charge == (1700, {300: 200}, 350)  # block 3 was never written: its lookback finds block 2
    charge = rules.charge(blocks(1500, 100, 100, 200, 300, 50, marks={0: 300, 5: 300}), store, "s", 3)
    assert charge == (2200, {300: 50}, 0)


def test_anthropic_more_than_four_marks_is_http_400():
    emulator = Emulator()
    mark = {"type": "ephemeral"}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10,
            "system": [{"type": "text", "text": f"s{i}", "cache_control": mark} for i in range(3)],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": mark},
                                                      {"type": "text", "text": "b", "cache_control": mark}]}]}
    out = serve(emulator, "/v1/messages", body)
    assert out.status == 400
    assert out.body["type"] == "error" and out.body["error"]["type"] == "invalid_request_error"
    assert out.body["error"]["message"] == "A maximum of 4 blocks with cache_control may be provided. Found 5."
    body["messages"][0]["content"][1].pop("cache_control")
    assert serve(emulator, "/v1/messages", body).status == 200


def test_anthropic_a_top_level_cache_control_marks_the_last_block_and_takes_a_slot():
    parts, counted = anthropic.request_parts({"cache_control": {"type": "ephemeral"}, "system": "s",
                                             "messages": [{"role": "user", "content": "a"},
                                                          {"role": "assistant", "content": "b"}]})
    assert [p.ttl for p in parts] == [None, None, 300] and counted == [300]


def test_anthropic_entries_live_five_minutes_refreshed_on_every_hit():
    emulator = Emulator()
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "text", "text": text(1500), "cache_control": {"type": "ephemeral"}}]}]}

    def read() -> int:
        return serve(emulator, "/v1/messages", body).body["usage"]["cache_read_input_tokens"]

    assert read() == 0
    emulator.advance(299)
    assert read() > 0
    emulator.advance(299)  # 598 s after the write, 299 after the refresh
    assert read() > 0
    emulator.advance(301)
    assert read() == 0


def test_anthropic_one_hour_entries_outlive_five_minutes():
    emulator = Emulator()
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "text", "text": text(1500), "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]}
    usage = serve(emulator, "/v1/messages", body).body["usage"]
    assert usage["cache_creation"]["ephemeral_1h_input_tokens"] == usage["cache_creation_input_tokens"] > 1024
    emulator.advance(3000)
    assert serve(emulator, "/v1/messages", body).body["usage"]["cache_read_input_tokens"] > 0
    emulator.advance(3601)
    assert serve(emulator, "/v1/messages", body).body["usage"]["cache_read_input_tokens"] == 0


def test_anthropic_a_one_hour_mark_after_a_five_minute_one_is_http_400():
    emulator = Emulator()
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10,
            "system": [{"type": "text", "text": text(1200), "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": text(300), "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]}
    out = serve(emulator, "/v1/messages", body)
    assert out.status == 400 and "ttl='1h'" in out.body["error"]["message"]
    body["system"][0]["cache_control"]["ttl"] = "1h"
    body["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral", "ttl": "5m"}
    usage = serve(emulator, "/v1/messages", body).body["usage"]
    assert usage["cache_creation"]["ephemeral_1h_input_tokens"] > 1200 > usage["cache_creation"]["ephemeral_5m_input_tokens"] > 0


def _nested_body() -> dict:
    mark = {"type": "ephemeral"}
    return {"model": "claude-sonnet-4-5", "max_tokens": 10,
            "tools": [{"name": f"t{i}", "input_schema": {"type": "object"}, "cache_control": mark} for i in range(4)],
            "messages": [{"role": "user", "content": [{"type": "text", "text": text(1500)}]},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t0", "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                             {"type": "text", "text": "out", "cache_control": mark}]}]}]}


@pytest.mark.parametrize("switch,status", [("limit", 400), ("breakpoint", 400), ("ignore", 200)])
def test_anthropic_a_mark_nested_in_a_tool_result_counts_toward_the_limit_by_the_switch(switch, status):
    out = serve(Emulator(nested_marks=switch), "/v1/messages", _nested_body())
    assert out.status == status


@pytest.mark.parametrize("switch,writes", [("limit", False), ("breakpoint", True), ("ignore", False)])
def test_anthropic_a_nested_mark_is_a_breakpoint_only_when_the_switch_says_so(switch, writes):
    body = _nested_body()
    for tool in body["tools"]:
        tool.pop("cache_control")
    usage = serve(Emulator(nested_marks=switch), "/v1/messages", body).body["usage"]
    assert (usage["cache_creation_input_tokens"] > 1500) is writes
    assert usage["input_tokens"] + usage["cache_creation_input_tokens"] > 1500


def test_anthropic_entries_are_scoped_per_model_and_api_key():
    emulator = Emulator()
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "text", "text": text(1500), "cache_control": {"type": "ephemeral"}}]}]}
    serve(emulator, "/v1/messages", body)
    assert serve(emulator, "/v1/messages", body, {"x-api-key": "other"}).body["usage"]["cache_read_input_tokens"] == 0
    assert serve(emulator, "/v1/messages", {**body, "model": "claude-opus-4-1"}).body["usage"]["cache_read_input_tokens"] == 0
    assert serve(emulator, "/v1/messages", body).body["usage"]["cache_read_input_tokens"] > 0


# -- OpenAI, automatic ---------------------------------------------------------------------------


def test_openai_automatic_caches_from_1024_tokens_in_128_token_steps():
    store, rules = Store(), AutomaticPrefixRules()
    assert rules.charge(blocks(1000, 20), store, "m", 0) == (0, {}, 1020)
    assert rules.charge(blocks(1000, 20, 5), store, "m", 1) == (0, {}, 1025)  # 1,020 stored: under the minimum
    rules.charge(blocks(1000, 300, 10), store, "m", 2)
    assert rules.charge(blocks(1000, 300, 10, 99), store, "m", 3).read == 1024 + 2 * 128  # 1,310 -> 1,280
    assert rules.charge(blocks(1000, 300, 11), store, "m", 4).read == 1280  # 1,300 (block granularity) -> 1,280
    assert rules.charge(blocks(1000, 30), store, "m", 5).read == 0  # no entry ends at 1,030


def test_openai_automatic_entries_live_five_minutes_idle_and_24_hours_with_extended_retention():
    emulator = Emulator()
    body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": text(1500)}]}

    def cached(**extra) -> int:
        usage = serve(emulator, "/v1/chat/completions", {**body, **extra}, BEARER).body["usage"]
        return usage["prompt_tokens_details"]["cached_tokens"]

    assert cached() == 0
    emulator.advance(299)
    assert cached() >= 1024
    emulator.advance(301)
    assert cached() == 0
    emulator.advance(301)
    assert cached(prompt_cache_retention="24h") == 0
    emulator.advance(20 * 3600)
    assert cached() >= 1024


def test_openai_the_machine_is_picked_by_prefix_and_key_and_spills_past_15_a_minute():
    pool = MachinePool()
    keys = [f"key-{n}" for n in range(20)]
    homes = {k: pool.home("head", k) for k in keys}
    a, b = next((x, y) for x in keys for y in keys if homes[x] != homes[y])
    assert pool.machine_for("head", a, 0) != pool.machine_for("head", b, 0)
    picked = [pool.machine_for("other", "k", t) for t in range(16)]
    assert len(set(picked[:15])) == 1 and picked[15] != picked[0]
    assert pool.machine_for("other", "k", 100) == picked[0]  # the minute is over


def test_openai_two_keys_on_one_prefix_do_not_share_a_machine_cache():
    emulator = Emulator()
    homes = {k: emulator.pool.home(prompt_of(openai.chat_parts(
        {"messages": [{"role": "user", "content": text(1500)}]}, False)).head, k) for k in (f"k{n}" for n in range(20))}
    a, b = next((x, y) for x in homes for y in homes if homes[x] != homes[y])
    body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": text(1500)}]}

    def cached(key):
        return serve(emulator, "/v1/chat/completions", {**body, "prompt_cache_key": key}, BEARER).body[
            "usage"]["prompt_tokens_details"]["cached_tokens"]

    assert cached(a) == 0 and cached(b) == 0 and cached(a) > 0 and cached(b) > 0


def test_openai_past_15_requests_a_minute_the_overflow_misses_on_another_machine():
    emulator = Emulator()
    body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": text(1500)}], "prompt_cache_key": "hot"}
    reads = [serve(emulator, "/v1/chat/completions", body, BEARER).body["usage"]["prompt_tokens_details"]["cached_tokens"]
             for _ in range(17)]
    assert reads[0] == 0 and all(r > 0 for r in reads[1:15]) and reads[15] == 0 and reads[16] > 0


@pytest.mark.parametrize("model", ["gpt-4.1", "gpt-5.6"])
def test_openai_an_anthropic_cache_control_is_an_unknown_parameter(model):
    emulator = Emulator()
    body = {"model": model, "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "a"},
                                         {"role": "assistant", "content": "b"},
                                         {"role": "user", "content": [{"type": "text", "text": "c",
                                                                       "cache_control": {"type": "ephemeral"}}]}]}
    out = serve(emulator, "/v1/chat/completions", body, BEARER)
    assert out.status == 400
    assert out.body["error"] == {"message": "Unknown parameter: 'messages[3].content[0].cache_control'.",
                                 "type": "invalid_request_error", "param": "messages[3].content[0].cache_control",
                                 "code": "unknown_parameter"}
    responses = {"model": model, "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "c", "cache_control": {"type": "ephemeral"}}]}]}
    assert serve(emulator, "/v1/responses", responses, BEARER).body["error"]["param"] == "input[0].content[0].cache_control"


# -- OpenAI, GPT-5.6 ---------------------------------------------------------------------------------


def _chat_56(suffix: str, mark_stable: bool = False, **extra) -> dict:
    stable = {"type": "text", "text": text(1500, "stable ")}
    if mark_stable:
        stable["prompt_cache_breakpoint"] = {"mode": "explicit"}
    return {"model": "gpt-5.6", "messages": [{"role": "system", "content": [stable]},
                                             {"role": "user", "content": suffix}], **extra}


def _usage(emulator: Emulator, body: dict) -> dict:
    out = serve(emulator, "/v1/chat/completions", body, BEARER)
    assert out.status == 200, out.body
    return out.body["usage"]["prompt_tokens_details"]


def test_gpt_5_6_reads_only_at_breakpoints_written_earlier_with_no_fallback():
    emulator = Emulator()
    _usage(emulator, _chat_56("first question"))
    assert _usage(emulator, _chat_56("second question"))["cached_tokens"] == 0  # the stable prefix was never a breakpoint
    _usage(emulator, _chat_56("first question", mark_stable=True))
    assert _usage(emulator, _chat_56("third question", mark_stable=True))["cached_tokens"] >= 1500


def test_gpt_5_6_an_appended_conversation_reads_the_previous_implicit_breakpoint():
    emulator = Emulator()
    first = _chat_56("first question")
    written = _usage(emulator, first)["cache_write_tokens"]
    second = {**first, "messages": first["messages"] + [{"role": "assistant", "content": "answer"},
                                                        {"role": "user", "content": "next"}]}
    assert _usage(emulator, second)["cached_tokens"] == written


def test_gpt_5_6_reports_writes_as_cache_write_tokens_billed_at_1_25x():
    emulator = Emulator()
    usage = _usage(emulator, _chat_56("q", mark_stable=True))
    assert usage["cached_tokens"] == 0 and usage["cache_write_tokens"] >= 1500
    entry = cost_entry("gpt-5.6", "openai")
    assert entry["cache_creation_input_token_cost"] == pytest.approx(1.25 * entry["input_cost_per_token"])
    assert _usage(emulator, _chat_56("q", mark_stable=True)) == {"cached_tokens": usage["cache_write_tokens"],
                                                                  "cache_write_tokens": 0}


def test_gpt_5_6_more_than_four_writes_is_http_400_the_implicit_one_included():
    emulator = Emulator()
    mark = {"mode": "explicit"}
    body = {"model": "gpt-5.6", "messages": [{"role": "system", "content": [
        {"type": "text", "text": f"part {i}", "prompt_cache_breakpoint": mark} for i in range(4)]},
        {"role": "user", "content": "q"}]}
    out = serve(emulator, "/v1/chat/completions", body, BEARER)
    assert out.status == 400 and out.body["error"]["code"] == "too_many_cache_breakpoints"
    assert serve(emulator, "/v1/chat/completions", {**body, "prompt_cache_options": {"mode": "explicit"}},
                 BEARER).status == 200


def test_gpt_5_6_a_mark_on_assistant_output_is_http_400():
    emulator = Emulator()
    body = {"model": "gpt-5.6", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "text", "text": "a", "prompt_cache_breakpoint": {"mode": "explicit"}}]}, {"role": "user", "content": "r"}]}
    out = serve(emulator, "/v1/chat/completions", body, BEARER)
    assert out.status == 400 and out.body["error"]["param"] == "messages[1].content[0].prompt_cache_breakpoint"
    responses = {"model": "gpt-5.6", "input": [{"role": "assistant", "content": [
        {"type": "output_text", "text": "a", "prompt_cache_breakpoint": {"mode": "explicit"}}]}]}
    assert serve(emulator, "/v1/responses", responses, BEARER).status == 400


def test_gpt_5_6_explicit_mode_drops_the_implicit_breakpoint():
    emulator = Emulator()
    body = _chat_56("q", prompt_cache_options={"mode": "explicit"})
    assert _usage(emulator, body) == {"cached_tokens": 0, "cache_write_tokens": 0}
    assert _usage(emulator, body)["cached_tokens"] == 0
    assert _usage(emulator, {**body, "prompt_cache_options": {"mode": "implicit"}})["cached_tokens"] == 0


def test_gpt_5_6_entries_live_thirty_minutes():
    emulator = Emulator()
    body = _chat_56("q", mark_stable=True)
    _usage(emulator, body)
    emulator.advance(1799)
    assert _usage(emulator, body)["cached_tokens"] > 0
    emulator.advance(1801)
    assert _usage(emulator, body)["cached_tokens"] == 0


def test_gpt_5_6_matches_among_the_newest_80_breakpoints_only():
    store, rules = Store(), ExplicitBreakpointRules()
    first = blocks(1100, marks={0: 1800}, salt="x")
    rules.charge(first, store, "m", 0)
    for n in range(80):
        rules.charge(blocks(1100, marks={0: 1800}, salt=str(n)), store, "m", 1)
    assert rules.charge(first, store, "m", 2).read == 0


def test_openai_caches_instructions_before_tools_as_harmony_renders_them():
    emulator = Emulator()
    body = _chat_56("q", mark_stable=True, tools=openai_tools(["bash", "read"]))
    first = _usage(emulator, body)
    changed = _usage(emulator, {**body, "tools": openai_tools(["bash", "grep"])})
    assert 1500 <= changed["cached_tokens"] < first["cache_write_tokens"]  # the system prompt, not the tools
    labels = [b.label for b in prompt_of(openai.chat_parts(body, True)).blocks]
    assert labels == ["messages[0].content[0]", "tools[0]", "tools[1]", "messages[1].content[0]"]


def test_gpt_5_6_a_breakpoint_under_1024_tokens_writes_nothing():
    assert ExplicitBreakpointRules().charge(blocks(1000, marks={0: 1800}), Store(), "m", 0) == (0, {}, 1000)


# -- Gemini ----------------------------------------------------------------------------------------


def _gemini(tokens: int, question: str) -> dict:
    return {"systemInstruction": {"parts": [{"text": text(tokens)}]},
            "contents": [{"role": "user", "parts": [{"text": question}]}]}


def _gemini_usage(emulator: Emulator, model: str, body: dict) -> dict:
    out = serve(emulator, f"/v1beta/models/{model}:generateContent", body, {"x-goog-api-key": "g"})
    assert out.status == 200, out.body
    return out.body["usageMetadata"]


@pytest.mark.parametrize("model,minimum", [("gemini-2.5-flash", 1024), ("gemini-2.5-pro", 4096)])
def test_gemini_caches_implicitly_from_the_model_minimum_at_block_boundaries(model, minimum):
    emulator = Emulator()
    small, large = minimum - 100, minimum + 100
    _gemini_usage(emulator, model, _gemini(small, "a"))
    assert _gemini_usage(emulator, model, _gemini(small, "b"))["cachedContentTokenCount"] == 0
    first = _gemini_usage(emulator, model, _gemini(large, "a"))
    assert first["cachedContentTokenCount"] == 0
    second = _gemini_usage(emulator, model, _gemini(large, "b"))
    assert minimum < second["cachedContentTokenCount"] < second["promptTokenCount"] == first["promptTokenCount"]
    emulator.advance(301)
    assert _gemini_usage(emulator, model, _gemini(large, "c"))["cachedContentTokenCount"] == 0


def test_gemini_snake_case_and_camel_case_requests_cache_alike():
    emulator = Emulator()
    body = _gemini(1500, "a")
    _gemini_usage(emulator, "gemini-2.5-flash", body)
    snake = {"system_instruction": body["systemInstruction"], "contents": body["contents"]}
    assert _gemini_usage(emulator, "gemini-2.5-flash", snake)["cachedContentTokenCount"] > 1024


def test_gemini_an_explicit_cache_is_read_by_the_request_that_names_it():
    emulator = Emulator()
    headers = {"x-goog-api-key": "g"}
    held = {"model": "models/gemini-2.5-flash", "contents": [{"role": "user", "parts": [{"text": text(1500)}]}],
            "displayName": "litellm-key", "ttl": "600s"}
    assert serve(emulator, "/v1beta/models/gemini-2.5-flash:cachedContents",
                 {**held, "contents": [{"role": "user", "parts": [{"text": "tiny"}]}]}, headers).status == 400
    made = serve(emulator, "/v1beta/models/gemini-2.5-flash:cachedContents", held, headers)
    assert made.status == 200 and made.body["usageMetadata"]["totalTokenCount"] > 1024
    assert emulator.listed("/v1beta/cachedContents", headers).body["cachedContents"][0]["displayName"] == "litellm-key"
    ask = {"contents": [{"role": "user", "parts": [{"text": "q @script: say ok"}]}], "cachedContent": made.body["name"]}
    out = serve(emulator, "/v1beta/models/gemini-2.5-flash:generateContent", ask, headers)
    assert out.body["usageMetadata"]["cachedContentTokenCount"] == made.body["usageMetadata"]["totalTokenCount"]
    assert out.body["candidates"][0]["content"]["parts"] == [{"text": "ok"}]
    clash = {**ask, "systemInstruction": {"parts": [{"text": "s"}]}}
    assert serve(emulator, "/v1beta/models/gemini-2.5-flash:generateContent", clash, headers).status == 400
    emulator.advance(601)
    assert serve(emulator, "/v1beta/models/gemini-2.5-flash:generateContent", ask, headers).status == 403


# -- replaying the accounting ------------------------------------------------------------------------


def test_records_replay_to_the_same_charges_and_an_ideal_client_is_other_marks(tmp_path):
    record = tmp_path / "r.jsonl"
    emulator = Emulator(record)
    head = {"type": "text", "text": text(1500)}
    for n in range(3):
        messages = [{"role": "user", "content": [head]}]
        for k in range(n):
            messages += [{"role": "assistant", "content": f"a{k}"}, {"role": "user", "content": f"q{k}"}]
        messages[-1] = {**messages[-1], "content": [{"type": "text", "text": f"last {n}",
                                                     "cache_control": {"type": "ephemeral"}}]} if n else messages[-1]
        serve(emulator, "/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": messages})
    records = [json.loads(line) for line in record.read_text().splitlines()]
    requests = [replayed_from_record(r) for r in records]
    charges = replay(requests)
    assert [(c.read, c.write_total, c.input) for c in charges] == [
        (r["usage"]["cache_read_input_tokens"], r["usage"]["cache_creation_input_tokens"], r["usage"]["input_tokens"])
        for r in records]
    ideal = replay([Replayed(r.time, r.scope, r.rules, with_marks(r.blocks, {len(r.blocks) - 1: 300}))
                    for r in requests])
    assert charges[1].read == 0 and ideal[1].read > 1024


# -- the wire: a realistic request each way, not streamed and streamed ---------------------------------


SCRIPT = "(agent: test) look @script: shell git status --short; read README.md; answer looked"


def _anthropic_conversation() -> dict:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1000,
            "system": [{"type": "text", "text": pi_system_prompt(), "cache_control": {"type": "ephemeral"}}],
            "tools": anthropic_tools(),
            "messages": [
                {"role": "user", "content": SCRIPT},
                {"role": "assistant", "content": [{"type": "text", "text": "Looking."},
                                                  {"type": "tool_use", "id": "toolu_1", "name": "bash",
                                                   "input": {"command": "git status --short"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                        {"type": "text", "text": "M app.py"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]},
                    {"type": "text", "text": "<system-reminder>noted</system-reminder>",
                     "cache_control": {"type": "ephemeral"}}]}]}


def test_anthropic_wire_chat_view_and_reply():
    body = _anthropic_conversation()
    view = anthropic.chat_view(body)
    assert [m["role"] for m in view["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assert view["messages"][2]["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command": "git status --short"}'}
    assert view["messages"][3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "M app.py"}
    assert {t["function"]["name"] for t in view["tools"]} >= {"bash", "read"}
    out = serve(Emulator(), "/v1/messages", body)
    message = out.body
    assert message["type"] == "message" and message["role"] == "assistant" and message["stop_reason"] == "tool_use"
    call = message["content"][0]
    assert call["type"] == "tool_use" and call["id"].startswith("toolu_") and call["name"] == "read"
    assert call["input"] == {"path": "README.md"}
    usage = message["usage"]
    assert usage["cache_creation_input_tokens"] > 20000 and usage["cache_read_input_tokens"] == 0
    assert set(usage) == {"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation",
                          "output_tokens"}


def test_anthropic_wire_stream():
    emulator = Emulator()
    body = {**_anthropic_conversation(), "stream": True}
    serve(emulator, "/v1/messages", body)
    events = parse_sse(b"".join(serve(emulator, "/v1/messages", body).stream))
    kinds = [e for e, _ in events]
    assert kinds == ["message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop"]
    assert all(data["type"] == kind for kind, data in events)
    start = events[0][1]["message"]
    assert start["content"] == [] and start["usage"]["cache_read_input_tokens"] > 20000
    assert events[2][1]["content_block"]["type"] == "tool_use" and events[2][1]["content_block"]["input"] == {}
    assert json.loads(events[3][1]["delta"]["partial_json"]) == {"path": "README.md"}
    assert events[5][1]["delta"]["stop_reason"] == "tool_use" and events[5][1]["usage"]["output_tokens"] > 0
    text_reply = {**body, "messages": [{"role": "user", "content": "(agent: t) hi @script: answer fine"}]}
    events = parse_sse(b"".join(serve(emulator, "/v1/messages", text_reply).stream))
    assert events[3][1]["delta"] == {"type": "text_delta", "text": "fine"}
    assert events[5][1]["delta"]["stop_reason"] == "end_turn"


def _chat_conversation() -> dict:
    return {"model": "gpt-5.6", "tools": openai_tools(), "messages": [
        {"role": "system", "content": pi_system_prompt()},
        {"role": "user", "content": [{"type": "text", "text": SCRIPT},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "bash", "arguments": '{"command": "git status --short"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "M app.py"}]}


def test_openai_chat_wire_reply_and_stream():
    emulator = Emulator()
    body = _chat_conversation()
    out = serve(emulator, "/v1/chat/completions", body, BEARER)
    assert out.body["object"] == "chat.completion"
    call = out.body["choices"][0]["message"]["tool_calls"][0]
    assert out.body["choices"][0]["finish_reason"] == "tool_calls"
    assert call["function"]["name"] == "read" and json.loads(call["function"]["arguments"]) == {"path": "README.md"}
    first = out.body["usage"]
    assert first["prompt_tokens_details"] == {"cached_tokens": 0, "cache_write_tokens": first["prompt_tokens"]}
    events = parse_sse(b"".join(serve(emulator, "/v1/chat/completions", {**body, "stream": True}, BEARER).stream))
    assert events[-1] == (None, "[DONE]")
    chunks = [d for _, d in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[-1]["usage"]["prompt_tokens_details"] == {"cached_tokens": first["prompt_tokens"], "cache_write_tokens": 0}
    arguments = "".join(c["choices"][0]["delta"].get("tool_calls", [{}])[0].get("function", {}).get("arguments", "")
                        for c in chunks if c["choices"])
    assert json.loads(arguments) == {"path": "README.md"}


def _responses_conversation() -> dict:
    return {"model": "gpt-5.6", "instructions": pi_system_prompt(), "tools": responses_tools(),
            "prompt_cache_key": "session-1", "input": [
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": SCRIPT},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}]},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
                {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": '{"command": "git status"}'},
                {"type": "function_call_output", "call_id": "call_1", "output": "M app.py"}]}


def test_openai_responses_wire_view_reply_and_stream():
    body = _responses_conversation()
    view = openai.responses_view(body)
    assert [m["role"] for m in view["messages"]] == ["system", "user", "assistant", "tool"]
    assert view["messages"][2]["tool_calls"][0]["id"] == "call_1"
    assert view["tools"][0]["function"]["parameters"]["type"] == "object"
    emulator = Emulator()
    out = serve(emulator, "/v1/responses", body, BEARER).body
    assert out["object"] == "response" and out["status"] == "completed"
    item = out["output"][0]
    assert item["type"] == "function_call" and item["name"] == "read" and json.loads(item["arguments"]) == {"path": "README.md"}
    assert out["usage"]["input_tokens_details"] == {"cached_tokens": 0, "cache_write_tokens": out["usage"]["input_tokens"]}
    events = parse_sse(b"".join(serve(emulator, "/v1/responses", {**body, "stream": True}, BEARER).stream))
    kinds = [d["type"] for _, d in events]
    assert kinds == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.function_call_arguments.delta", "response.function_call_arguments.done",
                     "response.output_item.done", "response.completed"]
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert all(e == d["type"] for e, d in events)
    done = events[-1][1]["response"]
    assert done["usage"]["input_tokens_details"]["cached_tokens"] == out["usage"]["input_tokens"]
    assert json.loads(events[4][1]["arguments"]) == {"path": "README.md"}
    text_body = {**body, "stream": True, "input": [{"role": "user", "content": "(agent: t) @script: answer fine"}]}
    kinds = [d["type"] for _, d in parse_sse(b"".join(serve(emulator, "/v1/responses", text_body, BEARER).stream))]
    assert kinds == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.content_part.added", "response.output_text.delta", "response.output_text.done",
                     "response.content_part.done", "response.output_item.done", "response.completed"]


def _gemini_conversation() -> dict:
    return {"systemInstruction": {"parts": [{"text": pi_system_prompt()}]},
            "tools": [{"functionDeclarations": [
                {"name": "run_shell_command", "description": "run", "parametersJsonSchema": {
                    "type": "object", "properties": {"command": {"type": "string"}}}},
                {"name": "read_file", "description": "read", "parameters": {
                    "type": "OBJECT", "properties": {"absolute_path": {"type": "STRING"}}}}]}],
            "contents": [
                {"role": "user", "parts": [{"text": "**Workspace Directories:**\n  - /work/ws\n"}, {"text": SCRIPT},
                                           {"inlineData": {"mimeType": "image/png", "data": PNG}}]},
                {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "git status"}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command",
                                                                 "response": {"output": "M app.py"}}}]}]}


def test_gemini_wire_view_reply_and_stream():
    body = _gemini_conversation()
    view = gemini.chat_view(body)
    assert [m["role"] for m in view["messages"]] == ["system", "user", "assistant", "tool"]
    assert view["messages"][2]["tool_calls"][0]["id"] == "call_run_shell_command_1"
    assert view["messages"][3]["tool_call_id"] == "call_run_shell_command_1"
    assert view["tools"][1]["function"]["parameters"]["properties"]["absolute_path"]["type"] == "string"
    emulator = Emulator()
    out = serve(emulator, "/v1beta/models/gemini-2.5-flash:generateContent", body, {"x-goog-api-key": "g"}).body
    candidate = out["candidates"][0]
    assert candidate["finishReason"] == "STOP" and candidate["content"]["role"] == "model"
    call = candidate["content"]["parts"][0]["functionCall"]  # (the absolute path the tool's schema asks for)
    assert call["name"] == "read_file" and call["args"]["absolute_path"].startswith("/")
    assert call["args"]["absolute_path"].endswith("/README.md")
    assert out["usageMetadata"]["cachedContentTokenCount"] == 0
    stream = serve(emulator, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body, {"x-goog-api-key": "g"})
    chunks = [d for _, d in parse_sse(b"".join(stream.stream))]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[-1]["usageMetadata"]["cachedContentTokenCount"] > 20000
    array = serve(emulator, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", body, {"x-goog-api-key": "g"})
    assert json.loads(b"".join(array.stream))[-1]["candidates"][0]["finishReason"] == "STOP"


def test_a_rejected_request_is_recorded_with_its_error(tmp_path):
    emulator = Emulator(tmp_path / "r.jsonl")
    serve(emulator, "/v1/chat/completions", {"model": "gpt-5.6", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]}]}, BEARER)
    record = json.loads((tmp_path / "r.jsonl").read_text())
    assert record["status"] == 400 and "cache_control" in record["error"] and record["family"] == "openai"
    assert "authorization" not in record["headers"]


def test_hosted_groups_name_each_provider_with_and_without_the_plugin():
    groups = {g["model_name"]: g for g in hosted_groups("http://127.0.0.1:9")}
    assert set(groups) == {f"hosted-{n}{off}" for n in ("anthropic", "openai", "openai-responses", "gemini")
                           for off in ("", "-off")}
    assert groups["hosted-gemini"]["litellm_params"]["api_base"] == "http://127.0.0.1:9/v1beta"
    assert groups["hosted-openai"]["litellm_params"]["prompt_cache_options"] == {"mode": "implicit"}
    assert groups["hosted-anthropic-off"]["model_info"] == {"litellm_prefix": {"enabled": False}}
