"""Provider cache hints: prompt_cache_key and Anthropic cache_control breakpoints (rules/hints.py)."""
from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from litellm_prefix.request import pipeline
from litellm_prefix.request.context import Context
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.rules.hints import MARK, MARK_1H, OPENAI_MARK, count_marks, prompt_cache_key_for
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings
from tests.support import FIXTURES, examples

# A realistic head: past every provider's minimum cacheable prefix (1,024 tokens) on its own.
SYSTEM = "You are a coding agent.\n" + "Keep edits small and run the tests. " * 160
OPENAI = Target(model="openai/gpt-4o", provider="openai", accepts_prompt_cache_key=True)
CLAUDE = Target(model="anthropic/claude-sonnet-4-5", provider="anthropic", reads_cache_control=True)
ANTHROPIC_TOOLS = [{"name": n, "description": f"{n} things. " + "Use it with care. " * 150, "input_schema": {"type": "object"}}
                   for n in ("bash", "read")]
CHAT_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("bash", "read")]


def ctx(target: Target, key: str = "k" * 32, **settings) -> Context:
    return Context(settings=Settings(path_check="absolute", **settings), target=target, session_key=key)


def hinted(data: dict, shape: str, context: Context) -> dict:
    updates, _ = pipeline.run_hints(data, shape, context)
    return {**data, **updates}


def anthropic_turn(n: int) -> dict:
    messages = [{"role": "user", "content": "fix the failing test in tests/test_api.py"}]
    for i in range(n):
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": f"running step {i}"},
                                              {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"cmd": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "a.py\nb.py"}]},
        ]
    return {"model": "claude", "max_tokens": 512, "system": SYSTEM, "tools": copy.deepcopy(ANTHROPIC_TOOLS),
            "messages": messages}


# -- prompt_cache_key ----------------------------------------------------------------


def test_prompt_cache_key_is_a_hash_of_the_session_key_stable_across_turns():
    first = hinted({"messages": [{"role": "user", "content": "hi"}]}, "chat", ctx(OPENAI))
    later = hinted({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"},
                                 {"role": "user", "content": "more"}]}, "chat", ctx(OPENAI))
    assert first["prompt_cache_key"] == later["prompt_cache_key"] == prompt_cache_key_for("k" * 32)
    assert "k" * 8 not in first["prompt_cache_key"]
    assert hinted({"messages": []}, "chat", ctx(OPENAI, "x" * 32))["prompt_cache_key"] != first["prompt_cache_key"]


@pytest.mark.parametrize("data,shape,target,settings", [
    ({"messages": [], "prompt_cache_key": "client"}, "chat", OPENAI, {}),  # the client's own key stands
    ({"messages": []}, "chat", Target(provider="anthropic"), {}),  # LiteLLM would not forward it
    ({"messages": [], "system": "s"}, "anthropic", OPENAI, {}),  # not a /v1/messages parameter
    ({"messages": []}, "chat", OPENAI, {"prompt_cache_key": False}),  # off switch
])
def test_prompt_cache_key_is_left_alone(data, shape, target, settings):
    assert pipeline.run_hints(data, shape, ctx(target, **settings)) == ({}, [])


@pytest.mark.parametrize("target, sent", [
    (OPENAI, True),  # OpenAI's own API: it routes its cache by the key
    (Target(provider="openai", api_base="https://api.openai.com/v1", accepts_prompt_cache_key=True), True),
    (Target(provider="azure", api_base="https://x.openai.azure.com", accepts_prompt_cache_key=True), True),
    (Target(provider="hosted_vllm", api_base="http://10.0.0.5:8000/v1", accepts_prompt_cache_key=True), False),
    (Target(provider="ollama_chat", accepts_prompt_cache_key=True), False),
    # openai/ in front of a vLLM or llama.cpp server: not OpenAI's cache, no key
    (Target(provider="openai", api_base="http://127.0.0.1:8080/v1", accepts_prompt_cache_key=True), False),
    # ... unless the deployment asks for it
    (Target(provider="hosted_vllm", accepts_prompt_cache_key=True, wants_prompt_cache_key=True), True),
    (Target(provider="hosted_vllm", wants_prompt_cache_key=True), False),  # LiteLLM would not forward it
])
def test_prompt_cache_key_only_where_the_target_uses_it(target, sent):
    updates, _ = pipeline.run_hints({"messages": [{"role": "user", "content": "hi"}]}, "chat", ctx(target))
    assert ("prompt_cache_key" in updates) is sent
    own = {"messages": [], "prompt_cache_key": "client-own"}  # a client's own key is never touched
    assert pipeline.run_hints(own, "chat", ctx(target)) == ({}, []) and own["prompt_cache_key"] == "client-own"


def test_the_deployment_asks_for_the_key_in_model_info():
    from litellm_prefix.request.target import resolve as target_for

    plain = target_for("hosted_vllm/qwen", None, None, api_base="http://127.0.0.1:8000/v1", call_type="acompletion")
    asked = target_for("hosted_vllm/qwen", None, {"litellm_prefix": {"promptCacheKey": True}},
                       api_base="http://127.0.0.1:8000/v1", call_type="acompletion")
    assert not plain.wants_prompt_cache_key and asked.wants_prompt_cache_key
    assert "prompt_cache_key" not in pipeline.run_hints({"messages": []}, "chat", ctx(plain))[0]
    assert asked.accepts_prompt_cache_key  # LiteLLM forwards it for hosted_vllm
    assert "prompt_cache_key" in pipeline.run_hints({"messages": []}, "chat", ctx(asked))[0]


def test_prompt_cache_key_per_model_override():
    s = Settings(path_check="absolute", models={"openai/*": {"promptCacheKey": False}})
    context = Context(settings=s.for_model(("openai/gpt-4o",)), target=OPENAI, session_key="k" * 32)
    assert pipeline.run_hints({"messages": []}, "chat", context) == ({}, [])
    context = Context(settings=s.for_model(("azure/gpt-4o",)), target=OPENAI, session_key="k" * 32)
    assert "prompt_cache_key" in pipeline.run_hints({"messages": []}, "chat", context)[0]


def test_responses_requests_get_the_key_too():
    out = hinted({"input": [{"role": "user", "content": "hi"}], "instructions": SYSTEM}, "responses", ctx(OPENAI))
    assert out["prompt_cache_key"] == prompt_cache_key_for("k" * 32)


# -- Anthropic breakpoints -----------------------------------------------------------


def _marks_at(out: dict) -> list[str]:
    """Where the request carries marks: "system", "tools", "messages[i]" (message or one of its parts)."""
    where = []
    if isinstance(out.get("system"), list) and any("cache_control" in b for b in out["system"]):
        where.append("system")
    if any("cache_control" in t for t in out.get("tools") or ()):
        where.append("tools")
    for i, m in enumerate(out["messages"]):
        parts = m["content"] if isinstance(m.get("content"), list) else []
        if any(k in m for k in ("cache_control", "prompt_cache_breakpoint")) or any(
                k in p for p in parts for k in ("cache_control", "prompt_cache_breakpoint")):
            where.append(f"messages[{i}]")
    return where


def test_anthropic_marks_the_head_the_previous_turns_end_and_the_newest_message():
    data = anthropic_turn(2)
    out = hinted(data, "anthropic", ctx(CLAUDE))
    assert out["system"] == [{"type": "text", "text": SYSTEM, "cache_control": dict(MARK)}]
    assert out["tools"] is data["tools"]  # the system block ends the head in cache order (tools -> system)
    # the previous request ended with messages[2] (right before the newest answer): it reads exactly there
    assert _marks_at(out) == ["system", "messages[2]", "messages[4]"]
    assert out["messages"][2]["content"][-1]["cache_control"] == dict(MARK)  # the tool_result block itself
    assert out["messages"][-1]["content"][-1]["cache_control"] == dict(MARK)
    assert all(a is b for i, (a, b) in enumerate(zip(out["messages"], data["messages"])) if i not in (2, 4))
    assert count_marks(out) == 3
    assert data == anthropic_turn(2)  # the input request is not mutated


def test_without_system_the_last_tool_ends_the_head():
    data = {k: v for k, v in anthropic_turn(0).items() if k != "system"}
    out = hinted(data, "anthropic", ctx(CLAUDE))
    assert out["tools"][-1]["cache_control"] == dict(MARK) and "cache_control" not in out["tools"][0]
    assert out["messages"][-1]["content"] == [{"type": "text", "text": data["messages"][0]["content"],
                                                "cache_control": dict(MARK)}]


def test_no_mark_closes_a_prefix_below_the_models_minimum():
    short = {"model": "claude", "system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
    assert pipeline.run_hints(short, "anthropic", ctx(CLAUDE)) == ({}, [])
    # a short head, a long conversation: only the message marks, where the prefix has grown past it
    grown = {**short, "messages": [{"role": "user", "content": "log:\n" + "line of output\n" * 400}]}
    assert _marks_at(hinted(grown, "anthropic", ctx(CLAUDE))) == ["messages[0]"]
    # Haiku 4.5 caches from 4,096 tokens (cost map): a 2,000-token head is not marked there
    haiku = Target(model="anthropic/claude-haiku-4-5", provider="anthropic", reads_cache_control=True,
                   cache_min_tokens=4096)
    head = {"model": "claude", "system": "x " * 4000, "messages": [{"role": "user", "content": "hi"}]}
    assert _marks_at(hinted(head, "anthropic", ctx(CLAUDE))) == ["system", "messages[0]"]
    assert pipeline.run_hints(head, "anthropic", ctx(haiku)) == ({}, [])


def test_cache_ttl_1h_marks_every_breakpoint_for_an_hour():
    out = hinted(anthropic_turn(2), "anthropic", ctx(CLAUDE, cache_ttl="1h"))
    assert out["system"][-1]["cache_control"] == dict(MARK_1H) == {"type": "ephemeral", "ttl": "1h"}
    assert out["messages"][-1]["content"][-1]["cache_control"] == dict(MARK_1H)
    assert out["messages"][2]["content"][-1]["cache_control"] == dict(MARK_1H)


@pytest.mark.parametrize("change", [
    lambda d: d["messages"][0].update(content=[{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]),
    lambda d: d.update(system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]),
    lambda d: d["tools"][0].update(cache_control={"type": "ephemeral"}),
    lambda d: d.update(cache_control={"type": "ephemeral"}),
    lambda d: d.update(cache_control_injection_points=[{"location": "message", "role": "system"}]),
])
def test_a_client_or_config_mark_anywhere_means_nothing_is_added_or_moved(change):
    data = anthropic_turn(1)
    change(data)
    before = copy.deepcopy(data)
    assert pipeline.run_hints(data, "anthropic", ctx(CLAUDE)) == ({}, [])
    assert data == before


def test_breakpoints_skip_blocks_that_cannot_carry_a_mark_and_non_anthropic_targets():
    data = anthropic_turn(0)
    data["messages"].append({"role": "assistant", "content": [{"type": "text", "text": "answer"},
                                                              {"type": "thinking", "thinking": "…", "signature": "s"}]})
    out = hinted(data, "anthropic", ctx(CLAUDE))
    assert out["messages"][-1]["content"][0]["cache_control"] == dict(MARK)
    assert "cache_control" not in out["messages"][-1]["content"][1]
    assert pipeline.run_hints(anthropic_turn(1), "anthropic", ctx(OPENAI)) == ({}, [])
    assert pipeline.run_hints(anthropic_turn(1), "anthropic", ctx(CLAUDE, cache_breakpoints=False)) == ({}, [])


def _chat_turn() -> dict:
    return {"messages": [{"role": "system", "content": SYSTEM}, {"role": "system", "content": "project rules"},
                         {"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [
                             {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": "ok"}], "tools": CHAT_TOOLS}


def test_chat_completions_to_claude_mark_the_head_the_previous_end_and_the_tool_message_itself():
    data = _chat_turn()
    out = hinted(data, "chat", ctx(CLAUDE))
    assert out["messages"][0] is data["messages"][0]
    assert out["messages"][1]["content"] == [{"type": "text", "text": "project rules", "cache_control": dict(MARK)}]
    assert out["messages"][2]["content"] == [{"type": "text", "text": "hi", "cache_control": dict(MARK)}]
    # a tool message carries the mark itself: LiteLLM puts it on the tool_result block
    assert out["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "ok", "cache_control": dict(MARK)}
    assert count_marks(out) == 3 and out["tools"] is data["tools"]


@pytest.mark.parametrize("content", ["", [], "ok", [{"type": "text", "text": "ok"}]])
def test_litellm_puts_our_tool_message_mark_on_the_tool_result_block(content):
    """Through LiteLLM's own chat -> Anthropic translation: the mark is on the ``tool_result`` block
    (where its ``cache_control_injection_points`` put it), never only inside its content; an empty
    result is marked too."""
    from litellm.litellm_core_utils.prompt_templates.factory import anthropic_messages_pt

    data = _chat_turn()
    data["messages"][-1]["content"] = content
    out = hinted(data, "chat", ctx(CLAUDE))
    translated = anthropic_messages_pt(out["messages"][2:], model="claude-sonnet-4-5", llm_provider="anthropic")
    result = translated[-1]["content"][-1]
    assert result["type"] == "tool_result" and result["cache_control"] == dict(MARK)
    assert not any("cache_control" in part for part in result.get("content") or () if isinstance(part, dict))


def test_hints_are_idempotent_on_a_retry():
    for shape, data, target in (("anthropic", anthropic_turn(3), CLAUDE),
                                ("chat", _chat_turn(), CLAUDE),
                                ("chat", _chat_turn(), GPT56),
                                ("chat", {"messages": [{"role": "user", "content": "hi"}]}, OPENAI)):
        once = hinted(data, shape, ctx(target))
        assert pipeline.run_hints(once, shape, ctx(target)) == ({}, [])


def test_turn_n_marks_change_turn_n_plus_1_only_where_anthropic_expects():
    """Head bytes identical every turn; the message where turn N wrote is byte-identical in turn N+1
    (marked there as the previous end); other earlier messages identical but for a mark that moved on."""
    turns = [hinted(anthropic_turn(n), "anthropic", ctx(CLAUDE)) for n in range(4)]
    for before, after in zip(turns, turns[1:]):
        assert json.dumps([before["tools"], before["system"]]) == json.dumps([after["tools"], after["system"]])
        n = len(before["messages"])
        assert after["messages"][n - 1] == before["messages"][n - 1]
        for a, b in zip(before["messages"][: n - 1], after["messages"]):
            assert _unmarked(a) == _unmarked(b)


def _unmarked(message: dict) -> dict:
    content = message["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    return {**{k: v for k, v in message.items() if k != "cache_control"},
            "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in content]}


# -- OpenAI GPT-5.6 and later: prompt_cache_breakpoint ----------------------------------

GPT56 = Target(model="gpt-5.6", provider="openai", accepts_prompt_cache_key=True, reads_prompt_cache_breakpoint=True,
               cache_min_tokens=1024)


def test_gpt56_gets_one_breakpoint_at_the_end_of_the_head_and_openai_places_its_own_at_the_tail():
    data = _chat_turn()
    out = hinted(data, "chat", ctx(GPT56))
    assert _marks_at(out) == ["messages[1]"]
    assert out["messages"][1]["content"] == [{"type": "text", "text": "project rules",
                                              "prompt_cache_breakpoint": dict(OPENAI_MARK)}]
    assert "cache_control" not in json.dumps(out)  # never Anthropic's mark to an OpenAI body
    # a model that does not read them gets none, nor any cache_control
    assert pipeline.run_hints(_chat_turn(), "chat", ctx(OPENAI))[0].keys() <= {"prompt_cache_key"}


def test_gpt56_explicit_mode_marks_the_newest_user_or_tool_message_too_and_options_are_never_set():
    data = {**_chat_turn(), "prompt_cache_options": {"mode": "explicit"}}
    out = hinted(data, "chat", ctx(GPT56))
    assert _marks_at(out) == ["messages[1]", "messages[4]"]
    assert out["messages"][4]["content"] == [{"type": "text", "text": "ok", "prompt_cache_breakpoint": dict(OPENAI_MARK)}]
    assert out["prompt_cache_options"] is data["prompt_cache_options"]
    assert "prompt_cache_options" not in hinted(_chat_turn(), "chat", ctx(GPT56))


def test_gpt56_responses_mark_the_last_leading_developer_item():
    data = {"instructions": SYSTEM, "tools": [{"type": "function", "name": "shell", "parameters": {}}],
            "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox"}]},
                      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}
    out = hinted(data, "responses", ctx(GPT56))
    assert out["input"][0]["content"] == [{"type": "input_text", "text": "sandbox",
                                           "prompt_cache_breakpoint": dict(OPENAI_MARK)}]
    assert out["input"][1] is data["input"][1]
    client = copy.deepcopy(data)
    client["input"][1]["content"][0]["prompt_cache_breakpoint"] = {"mode": "explicit"}
    assert pipeline.run_hints(client, "responses", ctx(GPT56))[0].keys() <= {"prompt_cache_key"}


def test_the_deployment_decides_the_dialect_as_litellm_does():
    from litellm_prefix.request import target as targets

    assert targets.resolve("gpt-5.6", "openai", None).reads_prompt_cache_breakpoint
    assert not targets.resolve("gpt-5.5", "openai", None).reads_prompt_cache_breakpoint
    # a custom api_base is not OpenAI's, unless the deployment asks for the dialect (prompt_cache_options)
    assert not targets.resolve("gpt-5.6", "openai", None, api_base="http://127.0.0.1:9/v1").reads_prompt_cache_breakpoint
    assert targets.resolve("gpt-5.6", "openai", None, api_base="http://127.0.0.1:9/v1",
                           prompt_cache_options={"mode": "implicit"}).reads_prompt_cache_breakpoint
    assert targets.resolve("claude-sonnet-4-5", "anthropic", None).cache_min_tokens == 1024


_block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=8)),
    st.builds(lambda i: {"type": "tool_result", "tool_use_id": f"t{i}", "content": "r"}, st.integers(0, 9)),
    st.just({"type": "thinking", "thinking": "x", "signature": "s"}),
    st.just({"type": "text", "text": "m", "cache_control": {"type": "ephemeral"}}),
)
_message = st.builds(lambda role, content: {"role": role, "content": content},
                     st.sampled_from(["user", "assistant"]), st.one_of(st.text(max_size=8), st.lists(_block, max_size=4)))
_system = st.one_of(st.none(), st.text(max_size=8),
                    st.lists(st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=8)), max_size=3))


@hsettings(max_examples=examples(200), deadline=None)
@given(messages=st.lists(_message, max_size=6), system=_system, tools=st.integers(0, 3))
def test_breakpoint_properties(messages, system, tools):
    data = {"messages": messages, "tools": [{"name": f"t{i}", "description": "d" * 2000, "input_schema": {}}
                                            for i in range(tools)]}
    if system is not None:
        data["system"] = system
    before = copy.deepcopy(data)
    updates, _ = pipeline.run_hints(data, "anthropic", ctx(CLAUDE))
    out = {**data, **updates}
    assert data == before  # nothing mutated in place
    if count_marks(before):
        assert updates == {}  # a client's marks: nothing added, nothing moved
    assert count_marks(out) <= 3 or out == data  # ours: at most three, so never past Anthropic's 4
    assert pipeline.run_hints(out, "anthropic", ctx(CLAUDE)) == ({}, [])  # idempotent
    # nothing lost: the same messages and texts, only marks added (and a string made one text block)
    assert len(out["messages"]) == len(messages)
    for a, b in zip(out["messages"], messages):
        if a is not b:
            assert _unmarked(a) == _unmarked(b)


# -- through the core: only the deployment hook adds hints ---------------------------------


def test_core_adds_hints_only_when_asked_and_the_key_follows_the_session():
    core = Stabilizer(Settings(path_check="absolute"))
    first = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "task A"}]}
    assert "prompt_cache_key" not in core.stabilize_sync(copy.deepcopy(first), "acompletion", target=OPENAI)
    a1 = core.stabilize_sync(copy.deepcopy(first), "acompletion", target=OPENAI, hints=True)
    later = copy.deepcopy(first)
    later["messages"] += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    a2 = core.stabilize_sync(later, "acompletion", target=OPENAI, hints=True)
    other = core.stabilize_sync({**copy.deepcopy(first), "metadata": {"user_api_key_hash": "tenant-2"}},
                                "acompletion", target=OPENAI, hints=True)
    assert a1["prompt_cache_key"] == a2["prompt_cache_key"] != other["prompt_cache_key"]


def test_a_deployment_litellm_treats_as_openais_breakpoint_dialect_gets_the_session_key():
    """An ``openai/`` deployment whose api_base is not OpenAI's host but that LiteLLM speaks OpenAI's
    breakpoint dialect to (``prompt_cache_options`` set) is OpenAI's API behind a gateway of its own:
    it routes by prompt_cache_key too, so each session keeps to its cache machine."""
    elsewhere = Target(model="gpt-5.6", provider="openai", api_base="http://egress.internal/v1",
                       accepts_prompt_cache_key=True)
    assert "prompt_cache_key" not in hinted(_chat_turn(), "chat", ctx(elsewhere))
    dialect = Target(model="gpt-5.6", provider="openai", api_base="http://egress.internal/v1",
                     accepts_prompt_cache_key=True, reads_prompt_cache_breakpoint=True)
    assert hinted(_chat_turn(), "chat", ctx(dialect))["prompt_cache_key"] == prompt_cache_key_for("k" * 32)


def test_aiders_own_context_gets_marks_every_session_shares():
    """aider opens every conversation with its own example conversation (its profile's
    ``context_through``) and repo map: marks where they end, the same bytes in every session of a
    repository, let a new session read what earlier ones wrote there. Recorded requests
    (tests/fixtures/agents_aider); never more than four marks."""

    fixture = json.loads((FIXTURES / "agents_aider" / "aider.json").read_text())
    claude = Target(model="anthropic/claude-sonnet-4-5", provider="anthropic", reads_cache_control=True,
                    cache_min_tokens=1024)
    out = {name: Stabilizer(Settings(path_check="absolute")).stabilize_sync(
        copy.deepcopy(fixture["requests"][name]), "acompletion", target=claude, hints=True)
        for name in ("diff/a1", "diff/b1", "diff/a2")}
    first = out["diff/a1"]["messages"]
    examples_end = next(i for i, m in enumerate(first) if "I switched to a new code base" in json.dumps(m)) + 1
    assert first[examples_end]["role"] == "assistant"
    for name, request in out.items():
        assert count_marks(request) <= 4
        assert f"messages[{examples_end}]" in _marks_at(request), name  # aider's reply closing its examples
        assert _marks_at(request)[-1] == f"messages[{len(request['messages']) - 1}]"  # and the newest message
    # the same bytes up to that mark in every session: what one session wrote there, the next reads
    assert out["diff/a1"]["messages"][: examples_end + 1] == out["diff/b1"]["messages"][: examples_end + 1]
    # a later turn keeps its previous turn's end marked as well
    assert len(_marks_at(out["diff/a2"])) == 4
