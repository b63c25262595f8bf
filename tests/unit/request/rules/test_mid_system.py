"""Mid-conversation system/developer messages, per target capability."""
from __future__ import annotations

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from harness.realistic import conversation, pi_system_prompt
from litellm_prefix.request.rules.mid_system import SYSTEM_UPDATE_NOTE, place_mid_conversation_system, target_keeps_mid_system
from litellm_prefix.request.target import Target
from litellm_prefix.request.view import View
from tests.support import examples


def _body():
    msgs = conversation(3)
    msgs.insert(4, {"role": "system", "content": "Reminder: the todo list is empty."})
    msgs.append({"role": "developer", "content": [{"type": "text", "text": "Updated section \"skills\""}]})
    return tuple(msgs)


@pytest.mark.parametrize(
    "target, declared, keeps",
    [
        (Target(provider="anthropic"), None, True),
        (Target(provider="bedrock"), None, True),
        (Target(provider="openai"), None, True),
        (Target(provider="hosted_vllm"), None, True),
        (Target(provider="gemini"), None, False),
        (Target(provider="vertex_ai"), None, False),
        (Target(provider="openai", system_messages_first=True), None, False),
        (Target(provider="hosted_vllm"), False, False),  # settings declare no support
        (Target(provider="hosted_vllm", model_info_mid_system=False), True, False),  # model_info wins over settings
        (Target(provider="gemini", model_info_mid_system=True), None, True),
        (Target(provider="vertex_ai", cost_map_mid_system=True), None, True),  # Claude on Vertex per cost map
        (Target(provider="gemini"), True, True),
    ],
)
def test_capability_order(target, declared, keeps):
    assert target_keeps_mid_system(target, declared) is keeps


def test_converted_in_place_on_a_hoisting_target(ctx):
    body = _body()
    view = View("chat", (pi_system_prompt(),), None, body)
    out, events = place_mid_conversation_system(view, ctx(target=Target(provider="gemini")))
    assert len(out.body) == len(body)
    assert [m["role"] for m in out.body].count("system") == 0
    note = out.body[4]
    assert note["role"] == "user" and note["content"] == f"{SYSTEM_UPDATE_NOTE}\n\nReminder: the todo list is empty."
    last = out.body[-1]
    assert last["content"][0] == {"type": "text", "text": SYSTEM_UPDATE_NOTE}
    assert last["content"][1:] == body[-1]["content"]
    assert all(a is b for a, b in zip(out.body, body) if a["role"] != "user" or b["role"] == "user")
    assert events[0].data["converted"] == 2
    assert place_mid_conversation_system(out, ctx(target=Target(provider="gemini")))[0] is out  # idempotent


def test_left_alone_where_litellm_keeps_them(ctx):
    view = View("chat", ("sys",), None, _body())
    assert place_mid_conversation_system(view, ctx(target=Target(provider="anthropic")))[0] is view
    assert place_mid_conversation_system(view, ctx(target=Target(provider="openai")))[0] is view


def test_settings_flag_converts_for_any_provider(ctx):
    view = View("chat", ("sys",), None, _body())
    out, _ = place_mid_conversation_system(view, ctx(target=Target(provider="hosted_vllm"),
                                                     supports_mid_conversation_system=False))
    assert all(m["role"] != "system" for m in out.body)


def test_responses_items_use_input_text_parts(ctx):
    item = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "patch"}]}
    view = View("responses", ("instr",), None, ({"role": "user", "content": "hi"}, item), text_part="input_text")
    out, _ = place_mid_conversation_system(view, ctx(target=Target(provider="gemini")))
    assert out.body[1] == {"type": "message", "role": "user",
                           "content": [{"type": "input_text", "text": SYSTEM_UPDATE_NOTE}, *item["content"]]}


def test_non_dict_messages_pass_through(ctx):
    class Message:  # litellm.Message-like object replayed from a response
        role = "assistant"
        content = "hello"

    obj = Message()
    view = View("chat", ("sys",), None, ({"role": "user", "content": "a"}, obj, {"role": "system", "content": "x"}))
    out, _ = place_mid_conversation_system(view, ctx(target=Target(provider="gemini")))
    assert out.body[1] is obj


@hsettings(max_examples=examples(100), deadline=None)
@given(st.lists(st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
                           "content": st.text(max_size=5)}),
    st.fixed_dictionaries({"type": st.sampled_from(["message", "function_call"]),
                           "role": st.sampled_from(["system", "developer", "user"])}),
    st.builds(lambda role: type("Message", (), {"role": role})(), st.sampled_from(["system", "user"])),
), max_size=12))
def test_the_positions_of_system_roles_are_where_the_rules_look(body):
    """``View.system_roles``: the mappings with a system or developer role, found once per body;
    every mid-conversation system message (``is_system_message``) is among them."""
    from litellm_prefix.request.view import is_system_message

    view = View("chat", ("head",), None, tuple(body))
    expected = tuple(i for i, item in enumerate(body) if isinstance(item, dict) and item.get("role") in ("system", "developer"))
    assert view.system_roles == expected and view.system_roles is view.system_roles
    assert {i for i, item in enumerate(body) if is_system_message(item)} <= set(expected)
    assert view.replace(body=tuple(body[:1])).system_roles == tuple(i for i in expected if i < 1)  # a new body: found again


def test_one_hoisting_answer_and_it_is_litellm_s():
    """The rules, the measurement and the renderer ask one predicate; its OpenAI-first providers are
    LiteLLM's own constant."""
    from litellm.constants import OPENAI_SYSTEM_MESSAGES_FIRST_PROVIDERS

    from litellm_prefix.measure.render import hoists
    from litellm_prefix.request.target import SYSTEM_FIRST_PROVIDERS, hoists_system_messages

    assert SYSTEM_FIRST_PROVIDERS == OPENAI_SYSTEM_MESSAGES_FIRST_PROVIDERS
    for provider in ("gemini", "vertex_ai", "openai", "azure", "hosted_vllm", "anthropic"):
        for first in (False, True):
            expected = provider in ("gemini", "vertex_ai") or (first and provider in ("openai", "azure"))
            assert hoists_system_messages(provider, first) == expected
            assert hoists({"provider": provider, "system_messages_first": first}) == expected
