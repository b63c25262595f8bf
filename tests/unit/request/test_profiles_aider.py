"""aider (aider-chat 0.86.2) on requests recorded from the real CLI.

The fixture (tests/fixtures/agents_aider/aider.json, ``python -m harness.aider record``) is what
aider sent through a LiteLLM proxy with the plugin off, in the edit formats ``diff`` (its system
prompt carries ``- Current date:``) and ``whole`` with aider's defaults for a model it does not
know (its example conversation as messages, its reminder appended to the prompt), and ``diff``
with gpt-4o's settings (``diff-sys``: the examples in the system prompt, the reminder a system
message after the prompt): session a over three prompts (continued with
``--restore-chat-history``, the third on the next calendar day), session b in another workspace,
session c in a third workspace with a's first prompt; the scripted model answered each prompt in
words of its own. aider sends no session id, names no workspace, and opens every conversation
with messages of its own (the edit format's example conversation, its repo map, its chat files,
each answered by a fixed reply): without its profile every aider session of a tenant derived
one key, the example conversation's.
"""
from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.agent_requests import claude_code_headers, codex_headers, opencode_headers, pi_headers
from litellm_prefix.request import profiles
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.session import first_user_text, identify
from litellm_prefix.request.target import Target
from litellm_prefix.request.wire import chat
from litellm_prefix.settings import Settings
from tests.support import FIXTURES, examples

FIXTURE = json.loads((FIXTURES / "agents_aider" / "aider.json").read_text(encoding="utf-8"))
REQUESTS: dict[str, dict] = FIXTURE["requests"]
HEADERS: dict[str, str] = FIXTURE["headers"]
ORDER = list(REQUESTS)  # as sent: per format a1, a2, b1, c1, b2, a3 (the next day), c2
FORMATS = ("diff", "whole", "diff-sys")
PROMPTS = {"a": "Explain app.py briefly @script: say *", "b": "Rename add to plus @script: say *",
           "c": "Explain app.py briefly @script: say *"}
VLLM = Target(model="hosted_vllm/scripted", provider="hosted_vllm")


def _proxy(body: dict) -> dict:
    return {**copy.deepcopy(body), "proxy_server_request": {"headers": dict(HEADERS), "body": {}}}


def _profile(body: dict, settings: Settings | None = None):
    return profiles.detect(_proxy(body), chat.read(body).head, settings or Settings())


def test_every_recorded_request_is_recognised_from_its_head_alone():
    assert HEADERS["user-agent"].startswith("OpenAI/Python")  # its SDK's: nothing of aider's own
    assert {name: getattr(_profile(body), "name", None) for name, body in REQUESTS.items()} == \
        {name: "aider" for name in REQUESTS}
    assert profiles.detect({"proxy_server_request": {"headers": HEADERS}}, (), Settings()) is None


@pytest.mark.parametrize("head", [
    "Act as an expert software developer.\nAlways use best practices when coding.",
    "Act as an expert code analyst.\nAnswer questions about the supplied code.",
    "Act as an expert architect engineer and provide direction to your editor engineer.",
    "Act as an expert software developer who edits source code.\n",
    "Act as an expert software developer and make changes to source code.\n",
    "You are an expert on the AI coding tool called Aider.\nAnswer the user's questions about how to use aider.",
])
def test_each_of_aiders_modes_is_recognised(head):
    body = {"model": "m", "messages": [{"role": "system", "content": head}, {"role": "user", "content": "hi"}]}
    assert _profile(body).name == "aider"


@pytest.mark.parametrize("head", [
    "Act as an expert on Python packaging and answer briefly.",  # another prompt opening alike
    "Act as an expert software developer and review this diff for bugs.",
    "You are a helpful assistant. Act as an expert software developer.",  # not at its start
])
def test_other_prompts_are_not_taken_for_aider(head):
    body = {"model": "m", "messages": [{"role": "system", "content": head}, {"role": "user", "content": "hi"}]}
    assert _profile(body) is None


@pytest.mark.parametrize("headers", [claude_code_headers(), codex_headers(), opencode_headers(), pi_headers()])
def test_the_other_agents_are_still_recognised_by_their_headers_on_an_aider_like_head(headers):
    body = REQUESTS["diff/a1"]
    found = profiles.detect({**copy.deepcopy(body), "proxy_server_request": {"headers": headers}},
                            chat.read(body).head, Settings())
    assert found is not None and found.name != "aider"


@pytest.mark.parametrize("edit_format", FORMATS)
def test_the_first_typed_text_is_the_users_first_prompt_as_first_sent_and_as_replayed(edit_format):
    for name, body in REQUESTS.items():
        if not name.startswith(f"{edit_format}/"):
            continue
        session = name.split("/")[1][0]
        assert first_user_text(chat.read(body), profiles.BY_NAME["aider"]) == json.dumps(PROMPTS[session]), name
    # without the profile the first user message is the edit format's example prompt, the same everywhere
    anonymous = {first_user_text(chat.read(body), None) for name, body in REQUESTS.items()
                 if name.startswith(f"{edit_format}/")}
    assert len(anonymous) == 1 and "Explain app.py" not in anonymous.pop()


def _keys(settings: Settings) -> dict[str, tuple[str, bool]]:
    out = {}
    for name in ORDER:
        body = REQUESTS[name]
        data = _proxy(body)
        view = chat.read(body)
        identity = identify(data, view, profiles.detect(data, view.head, settings), "key-hash")
        out[name] = (identity.key, identity.fresh)
    return out


@pytest.mark.parametrize("edit_format", FORMATS)
def test_each_session_keeps_one_key_and_no_two_sessions_share_one(edit_format):
    keys = _keys(Settings())
    k = {name.split("/")[1]: keys[name] for name in ORDER if name.startswith(f"{edit_format}/")}
    # a first request has no answer yet: it runs on an empty journal and inherits nothing
    assert k["a1"][1] and k["b1"][1] and k["c1"][1]
    assert not any(k[n][1] for n in ("a2", "a3", "b2", "c2"))
    assert k["a2"][0] == k["a3"][0]  # continued, and on the next day
    assert len({k["a2"][0], k["b2"][0], k["c2"][0]}) == 3  # c has a's first prompt, its own answer
    # across the two formats too
    other = "whole" if edit_format == "diff" else "diff"
    assert keys[f"{edit_format}/a2"][0] != keys[f"{other}/a2"][0]


def test_without_the_profile_every_aider_session_derived_one_key():
    """What the profile mends: with detection off, sessions a, b and c share their journal."""
    keys = _keys(Settings(profiles="off"))
    assert len({keys[f"diff/{n}"][0] for n in ("a2", "b2", "c2", "a3")}) == 1


def _run(names: list[str], settings: Settings) -> dict[str, dict]:
    core = Stabilizer(settings)
    out = {}
    for name in names:
        data = _proxy(REQUESTS[name])
        data["litellm_call_id"] = f"call-{name}"
        out[name] = core.stabilize_sync(data, "acompletion", target=VLLM)
        assert core.stats["errors"] == 0
    return out


@pytest.mark.parametrize("variant", ["diff", "diff-sys"])
def test_the_next_day_keeps_the_head_and_tells_the_model_the_date(variant):
    names = [n for n in ORDER if n.startswith(f"{variant}/")]
    out = _run(names, Settings())
    a2, a3, b1, c2 = (f"{variant}/{n}" for n in ("a2", "a3", "b1", "c2"))
    sent = {n: REQUESTS[n]["messages"][0]["content"] for n in names}
    assert "- Current date: 2026-12-04" in sent[a2] and "- Current date: 2026-12-05" in sent[a3]
    head = {n: out[n]["messages"][0]["content"] for n in names}
    assert head[a3] == head[a2] == sent[a2]  # the session's first date, pinned
    after = json.dumps(out[a3]["messages"][len(REQUESTS[a2]["messages"]) - 1:])
    assert "Current date: 2026-12-05" in after  # the new date, in a note after what a2 sent
    assert "2026-12-05" not in json.dumps(out[a3]["messages"][:len(REQUESTS[a2]["messages"]) - 1])
    # every user and assistant message the client sent reached the model, in order, as sent or noted
    def talk(messages):
        return [(m["role"], m["content"][:40]) for m in messages if m["role"] in ("user", "assistant")]
    assert talk(out[a3]["messages"]) == talk(REQUESTS[a3]["messages"])
    # the other sessions keep their own heads: nothing inherited from a
    assert head[b1] == sent[b1] and head[c2] == sent[c2]


def _answered_as(body: dict, source: dict, day: str | None = None) -> dict:
    """``body`` with ``source``'s first answer (the model said the same words) and, where given, its
    system prompt's date moved to ``day``."""
    body = copy.deepcopy(body)
    answer = next(m for m in source["messages"] if m["role"] == "assistant" and "Answer " in (m["content"] or ""))
    for message in body["messages"]:
        if message["role"] == "assistant" and "Answer " in (message["content"] or ""):
            message["content"] = answer["content"]
            break
    if day is not None:
        head = body["messages"][0]
        head["content"] = head["content"].replace("- Current date: 2026-12-04", f"- Current date: {day}")
    return body


def test_the_same_prompt_and_answer_the_next_day_is_another_session():
    """Issue 37 on aider's recorded requests: session c has session a's first prompt; given a's first
    answer too (a model that says the same), another second prompt and a day later, it is its own
    session: its second request keeps its own date, no note; session a, resumed after it, keeps its
    pins (its second prompt tells it from c). With c's recorded second prompt (a's too) the two are
    alike in everything but the date: then a's resume starts a journal of its own, its own date."""
    core = Stabilizer(Settings())
    a1, a2, a3, c1 = (REQUESTS[f"diff/{n}"] for n in ("a1", "a2", "a3", "c1"))
    c2 = _answered_as(REQUESTS["diff/c2"], a2, day="2026-12-05")
    c2["messages"][-1]["content"] = c2["messages"][-1]["content"].replace("Now add a sub function", "Add a docstring")
    c1 = _answered_as(c1, a2, day="2026-12-05")
    outputs = {}
    for name, body in (("a1", a1), ("a2", a2), ("c1", c1), ("c2", c2), ("a3", a3)):
        data = _proxy(body)
        outputs[name] = core.stabilize_sync(data, "acompletion", target=VLLM)
    assert identify(_proxy(c2), chat.read(c2), profiles.BY_NAME["aider"]).key == \
        identify(_proxy(a2), chat.read(a2), profiles.BY_NAME["aider"]).key  # one derived key ...
    assert outputs["c2"]["messages"] == c2["messages"]  # ... and c shown only its own: its date, no note
    assert "- Current date: 2026-12-04" in outputs["a3"]["messages"][0]["content"]  # a's pins hold
    assert "Current date: 2026-12-05" in json.dumps(outputs["a3"]["messages"][1:])
    alike = Stabilizer(Settings())
    c2 = _answered_as(REQUESTS["diff/c2"], a2, day="2026-12-05")
    for body in (a1, a2, c1, c2):
        alike.stabilize_sync(_proxy(body), "acompletion", target=VLLM)
    resumed = alike.stabilize_sync(_proxy(a3), "acompletion", target=VLLM)
    assert resumed["messages"] == a3["messages"]  # nothing of c's: its own date, as sent


def test_a_context_message_answered_in_other_words_stands_as_the_prompt():
    """Only aider's own fixed replies make a message its context: a repo map the model answered in
    words of its own is the conversation's first prompt (never skipped to a later message)."""
    body = copy.deepcopy(REQUESTS["diff-sys/a2"])
    messages = body["messages"]
    at = next(i for i, m in enumerate(messages) if str(m["content"]).startswith("Here are summaries"))
    assert messages[at + 1]["content"] == "Ok, I won't try and edit those files without asking first."
    aider = profiles.BY_NAME["aider"]
    assert first_user_text(chat.read(body), aider) == json.dumps(PROMPTS["a"])
    messages[at + 1]["content"] = "I see app.py defines add."
    assert first_user_text(chat.read(body), aider) == json.dumps(messages[at]["content"], ensure_ascii=False)


# -- any aider conversation --------------------------------------------------------------------

CONTEXT = (("Here are summaries of some files present in my git repository.\nDo not propose changes.\n\napp.py:\n",
            "Ok, I won't try and edit those files without asking first."),
           ("Here are some READ ONLY files, provided for your reference.\nDo not edit these files!\n\nREADME.md\n",
            "Ok, I will use these files as references."),
           ("I have *added these files to the chat* so you can go ahead and edit them.\n\napp.py\n",
            "Ok, any changes I propose will be to those files."))
EXAMPLES_END = ("I switched to a new code base. Please don't consider the above files or try to edit them any longer.",
                "Ok.")
REMINDERS = ("", "\n\n# *SEARCH/REPLACE block* Rules:\n\nEvery *SEARCH/REPLACE block* must use this format:",
             "\n\nTo suggest changes to a file you MUST return the entire content of the updated file.")
typed = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40).filter(
    lambda t: t.strip() and not t.lstrip().startswith(("Here are", "I have *added", "I switched", "Image file")))


def _conversation(prompt, history, examples, read_only, reminder, answers):
    """An aider request: system, maybe examples, maybe read-only files, the repo map, the history
    (the first prompt, replayed with two trailing blanks, and the model's answers), the chat files,
    and the current prompt with its reminder."""
    messages = [{"role": "system", "content": "Act as an expert software developer.\nAlways use best practices."}]
    if examples:
        messages += [{"role": "user", "content": "Change get_factorial() to use math.factorial"},
                     {"role": "assistant", "content": "To make this change we need to modify `app.py`."},
                     {"role": "user", "content": EXAMPLES_END[0]}, {"role": "assistant", "content": EXAMPLES_END[1]}]
    for text, reply in CONTEXT[:2] if read_only else CONTEXT[:1]:
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
    current = prompt
    if history:
        messages += [{"role": "user", "content": prompt + "  \n"}, {"role": "assistant", "content": answers[0]}]
        for i, later in enumerate(history):
            messages += [{"role": "user", "content": later}, {"role": "assistant", "content": answers[i + 1]}]
        current = "and then?"
    messages += [{"role": "user", "content": CONTEXT[2][0]}, {"role": "assistant", "content": CONTEXT[2][1]},
                 {"role": "user", "content": current + reminder}]
    return {"model": "m", "messages": messages}


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=typed, other=typed, history=st.lists(typed, max_size=3), examples=st.booleans(),
       read_only=st.booleans(), reminder=st.sampled_from(REMINDERS))
def test_any_aider_conversation_keys_on_its_own_first_prompt_and_answer(prompt, other, history, examples, read_only,
                                                                         reminder):
    aider = profiles.BY_NAME["aider"]
    history = history or ["go on"]
    answers = [f"Answer {i}: {prompt[:5]}" for i in range(len(history) + 1)]
    first = _conversation(prompt, [], examples, read_only, reminder, answers)
    later = _conversation(prompt, history, examples, read_only, reminder, answers)
    for body in (first, later):
        assert _profile(body).name == "aider"
        # the prompt as first sent (reminder appended) and as replayed (two blanks) is one anchor
        assert first_user_text(chat.read(body), aider) == json.dumps(prompt.rstrip(), ensure_ascii=False)

    def key(body):
        data = _proxy(body)
        return identify(data, chat.read(body), aider, "key-hash")

    assert key(first).fresh and not key(later).fresh
    # another session: another first prompt, or the same prompt answered in other words
    if other.rstrip() != prompt.rstrip():
        assert key(_conversation(other, history, examples, read_only, reminder, answers)).key != key(later).key
    reworded = ["Other words."] + answers[1:]
    assert key(_conversation(prompt, history, examples, read_only, reminder, reworded)).key != key(later).key
