"""Notes in a form the target's chat template accepts (rules/notes.py, rules/mid_system.py).

Where a deployment's role rules are unknown (a self-hosted OpenAI-compatible server that
declares nothing) or known to reject late system turns, a note is folded into a
neighbouring message: never a system message after the first, never a user message
after a user message. Where the target keeps mid-conversation system messages, notes
are their own messages, byte for byte as before.
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from litellm_prefix.request import pipeline
from litellm_prefix.request.context import Context
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.journal import Journal
from litellm_prefix.request.rules.mid_system import SYSTEM_UPDATE_NOTE, role_rules, target_keeps_mid_system
from litellm_prefix.request.rules.notes import MERGED_NOTE_END
from litellm_prefix.request.rules.volatile import volatile_note
from litellm_prefix.request.target import Target
from litellm_prefix.request.wire import wire_for
from litellm_prefix.settings import Settings
from tests.support import examples

VLLM = Target(provider="hosted_vllm", api_base="http://127.0.0.1:8000/v1")
HEAD = "You are a coding agent. Keep edits small.\nToday's date: {date}\nRun the tests before you answer."
NOTE = volatile_note("todays-date", "Today's date: 2026-12-04")
FOLDED = f"{SYSTEM_UPDATE_NOTE}\n\n{NOTE}\n\n{MERGED_NOTE_END}"


def alternation_error(messages: list[dict]) -> str | None:
    """What a strict chat template (Mistral's, Gemma's) raises for ``messages``, or None.

    An optional system message first; then, leaving out tool results and assistant turns
    that only call tools (Mistral's template filters those), user and assistant alternate,
    starting with user."""
    rest = messages[1:] if messages and messages[0]["role"] == "system" else messages
    if any(m["role"] in ("system", "developer") for m in rest):
        return "system message after the first"
    turns = [m for m in rest if m["role"] != "tool" and not (m["role"] == "assistant" and m.get("tool_calls"))]
    for i, m in enumerate(turns):
        if (m["role"] == "user") != (i % 2 == 0):
            return "Conversation roles must alternate user/assistant/user/assistant/..."
    return None


def _request(date: str, body: list[dict], **extra) -> dict:
    return {"model": "m", "messages": [{"role": "system", "content": HEAD.format(date=date)}, *copy.deepcopy(body)],
            "metadata": {"session_id": "roles"}, **extra}


def _stabilizer() -> Stabilizer:
    return Stabilizer(Settings(path_check="absolute", volatile_presets=["todays-date"]))


def _tool_round(i: int) -> list[dict]:
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"file {i}"}]


# -- which targets --------------------------------------------------------------------


@pytest.mark.parametrize("target, declared, rules", [
    (Target(provider="hosted_vllm"), None, "unknown"),
    (Target(provider="ollama_chat"), None, "unknown"),
    (Target(provider="openai", api_base="http://10.0.0.5:8000/v1"), None, "unknown"),  # vLLM behind openai/
    (Target(provider="openai"), None, "system"),
    (Target(provider="openai", api_base="https://api.openai.com/v1"), None, "system"),
    (Target(provider="azure", api_base="https://x.openai.azure.com"), None, "system"),
    (Target(provider="anthropic"), None, "system"),
    (Target(provider="bedrock"), None, "system"),
    (Target(provider=""), None, "system"),
    (Target(provider="gemini"), None, "user"),
    (Target(provider="openai", system_messages_first=True), None, "user"),
    (Target(provider="hosted_vllm"), False, "user"),
    (Target(provider="hosted_vllm"), True, "system"),
    (Target(provider="hosted_vllm", model_info_mid_system=True), False, "system"),
    (Target(provider="hosted_vllm", cost_map_mid_system=False), None, "user"),
])
def test_role_rules(target, declared, rules):
    assert role_rules(target, declared) == rules
    assert target_keeps_mid_system(target, declared) is (rules != "user")


# -- chat ---------------------------------------------------------------------------------


def test_a_date_note_is_folded_into_the_user_message_it_follows_and_stays_there():
    st = _stabilizer()
    body = [{"role": "user", "content": "fix the test"}]
    st.stabilize_sync(_request("2026-12-03", body), target=VLLM)
    body += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "and the docs"}]
    turn2 = st.stabilize_sync(_request("2026-12-04", body), target=VLLM)["messages"]
    assert turn2[0]["content"] == HEAD.format(date="2026-12-03")  # pinned
    assert turn2[1:] == [*body[:2], {"role": "user", "content": f"and the docs\n\n{FOLDED}"}]
    assert alternation_error(turn2) is None
    body += [*_tool_round(1), {"role": "assistant", "content": "read"},
             {"role": "user", "content": "thanks"}]
    turn3 = st.stabilize_sync(_request("2026-12-04", body), target=VLLM)["messages"]
    assert turn3[: len(turn2)] == turn2 and turn3[len(turn2):] == body[3:]
    assert alternation_error(turn3) is None and st.stats["drift"] == 0


def test_the_old_form_is_what_a_strict_template_rejects():
    """The check above can fail: a system note, or a user note after the user message, is rejected."""
    body = [{"role": "user", "content": "fix the test"}]
    assert alternation_error([{"role": "system", "content": "h"}, *body, {"role": "system", "content": NOTE}])
    assert alternation_error([{"role": "system", "content": "h"}, *body,
                              {"role": "user", "content": f"{SYSTEM_UPDATE_NOTE}\n\n{NOTE}"}])
    assert alternation_error([{"role": "system", "content": "h"}, *body, *_tool_round(0),
                              {"role": "user", "content": NOTE}])  # Mistral leaves out the tool round


def test_mid_loop_the_note_goes_into_the_tool_result():
    st = _stabilizer()
    body = [{"role": "user", "content": "fix the test"}, *_tool_round(0)]
    st.stabilize_sync(_request("2026-12-03", body), target=VLLM)
    body += _tool_round(1)
    out = st.stabilize_sync(_request("2026-12-04", body), target=VLLM)["messages"]
    assert out[-1] == {"role": "tool", "tool_call_id": "call_1", "content": f"file 1\n\n{FOLDED}"}
    assert out[1:-1] == body[:-1] and alternation_error(out) is None


def test_list_content_gets_one_more_text_part_and_images_stay():
    st = _stabilizer()
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    body = [{"role": "user", "content": [{"type": "text", "text": "look"}, image]}]
    st.stabilize_sync(_request("2026-12-03", body), target=VLLM)
    out = st.stabilize_sync(_request("2026-12-04", body), target=VLLM)["messages"]
    assert out[1] == {"role": "user", "content": [{"type": "text", "text": "look"}, image,
                                                  {"type": "text", "text": FOLDED}]}


def test_a_note_after_a_final_assistant_turn_stands_alone_then_opens_the_next_user_message():
    st = _stabilizer()
    body = [{"role": "user", "content": "fix the test"}]
    st.stabilize_sync(_request("2026-12-03", body), target=VLLM)
    body.append({"role": "assistant", "content": "Sure, I"})  # a prefill
    turn2 = st.stabilize_sync(_request("2026-12-04", body), target=VLLM)["messages"]
    assert turn2[-1] == {"role": "user", "content": FOLDED} and alternation_error(turn2) is None
    body.append({"role": "user", "content": "go on"})
    turn3 = st.stabilize_sync(_request("2026-12-04", body), target=VLLM)["messages"]
    assert turn3[-1] == {"role": "user", "content": f"{FOLDED}\n\ngo on"} and alternation_error(turn3) is None
    assert turn3[:-1] == turn2[:-1] and turn3[-1]["content"].startswith(turn2[-1]["content"])


def test_a_clients_own_system_message_passes_through_where_nothing_is_declared():
    st = _stabilizer()
    body = [{"role": "user", "content": "hi"}, {"role": "system", "content": "Reminder: todo list empty."}]
    st.stabilize_sync(_request("2026-12-03", body[:1]), target=VLLM)
    out = st.stabilize_sync(_request("2026-12-04", body), target=VLLM)["messages"]
    # the client's message reaches the template as without the plugin; the plugin's note goes into it
    assert out[1:] == [body[0], {"role": "system", "content": f"Reminder: todo list empty.\n\n{FOLDED}"}]


def test_declared_false_converts_and_folds_both():
    st = _stabilizer()
    target = Target(provider="hosted_vllm", model_info_mid_system=False)
    body = [{"role": "user", "content": "hi"}]
    st.stabilize_sync(_request("2026-12-03", body), target=target)
    body += [{"role": "system", "content": "Reminder: todo list empty."}]
    out = st.stabilize_sync(_request("2026-12-04", body), target=target)["messages"]
    reminder = f"{SYSTEM_UPDATE_NOTE}\n\nReminder: todo list empty.\n\n{MERGED_NOTE_END}"
    assert out[1:] == [{"role": "user", "content": f"hi\n\n{reminder}\n\n{FOLDED}"}]
    assert alternation_error(out) is None
    # between an assistant turn and the next user message: into the start of that message
    body += [{"role": "assistant", "content": "ok"}, {"role": "system", "content": [{"type": "text", "text": "patch"}]},
             {"role": "user", "content": "next"}]
    later = st.stabilize_sync(_request("2026-12-04", body), target=target)["messages"]
    assert later[:2] == out and later[2] == body[2]
    assert later[3] == {"role": "user", "content": f"{SYSTEM_UPDATE_NOTE}\n\npatch\n\n{MERGED_NOTE_END}\n\nnext"}
    assert alternation_error(later) is None


def test_targets_that_keep_system_messages_are_unchanged():
    for target in (Target(provider="openai"), Target(provider="hosted_vllm", model_info_mid_system=True)):
        st = _stabilizer()
        body = [{"role": "user", "content": "hi"}]
        st.stabilize_sync(_request("2026-12-03", body), target=target)
        out = st.stabilize_sync(_request("2026-12-04", body), target=target)["messages"]
        assert out[1:] == [*body, {"role": "system", "content": NOTE}]


# -- Anthropic and Responses shapes ---------------------------------------------------------


def _anthropic(date: str, messages: list[dict]) -> dict:
    return {"model": "claude-sonnet-4-5", "max_tokens": 512, "litellm_session_id": "roles-a",
            "system": [{"type": "text", "text": HEAD.format(date=date)}], "messages": copy.deepcopy(messages)}


def test_anthropic_shape_to_an_unknown_target_folds_into_the_tool_result():
    st = _stabilizer()
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t0", "name": "read", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": "a.py"}]}
    body = [{"role": "user", "content": "list files"}, use, result]
    st.stabilize_sync(_anthropic("2026-12-03", body), "anthropic_messages", target=VLLM)
    out = st.stabilize_sync(_anthropic("2026-12-04", body), "anthropic_messages", target=VLLM)["messages"]
    assert out[:2] == body[:2] and len(out) == 3
    assert out[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t0", "content": f"a.py\n\n{FOLDED}"}]}
    # Anthropic itself keeps today's form: a user note of its own (Anthropic merges user turns)
    st = _stabilizer()
    st.stabilize_sync(_anthropic("2026-12-03", body), "anthropic_messages", target=Target(provider="anthropic"))
    out = st.stabilize_sync(_anthropic("2026-12-04", body), "anthropic_messages", target=Target(provider="anthropic"))
    assert out["messages"] == [*body, {"role": "user", "content": f"{SYSTEM_UPDATE_NOTE}\n\n{NOTE}"}]


def test_responses_shape_folds_into_the_function_call_output():
    def request(date, items):
        return {"model": "m", "instructions": HEAD.format(date=date), "input": copy.deepcopy(items),
                "metadata": {"session_id": "roles-r"}}

    st = _stabilizer()
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
             {"type": "function_call", "call_id": "c0", "name": "read", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c0", "output": "a.py"}]
    st.stabilize_sync(request("2026-12-03", items), "aresponses", target=VLLM)
    out = st.stabilize_sync(request("2026-12-04", items), "aresponses", target=VLLM)["input"]
    assert out == [*items[:2], {**items[2], "output": f"a.py\n\n{FOLDED}"}]
    items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "more"}]})
    st2 = _stabilizer()
    st2.stabilize_sync(request("2026-12-03", items), "aresponses", target=VLLM)
    out = st2.stabilize_sync(request("2026-12-04", items), "aresponses", target=VLLM)["input"]
    # into the text part at the end (a client that sends it as a string on another turn gets the same text)
    last = items[-1]["content"][-1]
    assert out[-1] == {**items[-1], "content": [*items[-1]["content"][:-1],
                                                {**last, "text": last["text"] + "\n\n" + FOLDED}]}


# -- properties -------------------------------------------------------------------------------


@st.composite
def sessions(draw):
    """A well-formed agent session (user and assistant alternate, tool rounds in between),
    its date changing on some turns, and a client system message now and then."""
    turns = []
    for i in range(draw(st.integers(2, 6))):
        turn = [{"role": "user", "content": draw(st.sampled_from(["go", "more", ""]))}]
        if draw(st.booleans()):
            turn.append({"role": "system", "content": f"reminder {i}"})
        for k in range(draw(st.integers(0, 2))):
            turn += _tool_round(10 * i + k)
        ends = draw(st.sampled_from(["answer", "answer", "tool"]))
        turns.append((turn, ends, draw(st.sampled_from(["2026-12-03", "2026-12-04", "2026-12-05"]))))
    return turns, draw(st.sampled_from([VLLM, Target(provider="hosted_vllm", model_info_mid_system=False),
                                        Target(provider="gemini")]))


@hsettings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_sessions_stay_template_valid_monotone_and_idempotent(case):
    turns, target = case
    st = _stabilizer()
    body: list[dict] = []
    previous = None
    for turn, ends, date in turns:
        body += turn
        data = _request(date, body)
        out = st.stabilize_sync(data, target=target)
        messages = out["messages"]
        client_system = any(m["role"] == "system" for m in body)
        if role_rules(target, None) != "unknown" or not client_system:
            assert alternation_error(messages) is None, messages
        if previous is not None:  # the client only appended: the earlier output is a prefix
            n = len(previous)
            assert messages[: n - 1] == previous[: n - 1]
            assert messages[n - 1]["content"].startswith(previous[-1]["content"])
        # the deployment hook's re-run (stateless rules on the written request) changes nothing
        view = wire_for(out, None).read(out)
        again, _, _ = pipeline.run(view, Journal(), Context(settings=st.settings, target=target, client_body=view.body),
                                   pipeline.STATELESS_RULES)
        assert again.body == view.body
        previous = messages
        if ends == "tool":  # the turn ends in one more tool round before the answer
            body += _tool_round(1000 + len(body))
        body.append({"role": "assistant", "content": "done"})
    assert st.stats["drift"] == 0
