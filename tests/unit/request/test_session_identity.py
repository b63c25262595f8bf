"""Session identity (issue 24 items 4 and 6): derived sessions never merge, auxiliary calls and
subagents are their own streams, and the journal, the router and the hints share one identity.

Requests are realistic ones of pi (no session id of its own: the derived key), opencode (its
title request), Codex (automatic compaction, spawned agents) and Claude Code (the identity of
the affinity and hint keys).
"""
from __future__ import annotations

import copy
import hashlib
import json
import random
import re
from datetime import date
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.agent_requests import (
    claude_code_body,
    claude_code_env,
    claude_code_git_status,
    claude_code_headers,
    claude_code_prompt,
    claude_code_tools,
    codex_headers,
    opencode_env,
    opencode_headers,
    pi_headers,
)
from harness.realistic import openai_tools, paragraph, pi_sections, render_pi, responses_tools
from litellm_prefix.fleet.affinity import session_key
from litellm_prefix.measure.sinks import flush_logs
from litellm_prefix.request import profiles, wire
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.journal import Journal
from litellm_prefix.request.session import DERIVED, first_answer, first_typed, identify, synthesized_call_id, workspace
from litellm_prefix.request.target import Target
from litellm_prefix.request.wire.chat import read as chat_view
from litellm_prefix.settings import Settings
from tests.support import FIXTURES, examples

VLLM = Target(model="hosted_vllm/qwen3-coder", provider="hosted_vllm")
PROMPT = "Make the failing tests in tests/test_cart.py pass."


def _proxy(body: dict, headers: dict) -> dict:
    return {**copy.deepcopy(body), "proxy_server_request": {"headers": dict(headers), "body": {}}}


def _identity(data: dict, call_type: str = "acompletion"):
    view = wire.wire_for(data, call_type).read(data)
    return identify(data, view, profiles.detect(data, view.head, Settings()))


# -- pi: a derived session -----------------------------------------------------------------


class Pi:
    """A pi session as it reaches the gateway: no session id, its head names the date and cwd."""

    def __init__(self, *, cwd="/home/alice/src/webshop", date="2026-12-01", seed=1, prompt=PROMPT):
        self.sections = pi_sections(target_tokens=1500, seed=5)
        self.cwd, self.date = cwd, date
        self.rng = random.Random(seed)
        self.body: list[dict] = [{"role": "user", "content": prompt}]

    def head(self) -> str:
        return render_pi({**self.sections, "cwd": f"Current date: {self.date}\nCurrent working directory: {self.cwd}"})

    def request(self) -> dict:
        return _proxy({"model": "chat-model", "messages": [{"role": "system", "content": self.head()},
                                                          *copy.deepcopy(self.body)],
                       "tools": openai_tools()}, pi_headers())

    def answer(self) -> None:
        """The model's tool call (a real model's random id) and the tool's result."""
        call_id = "call_" + "".join(self.rng.choice("0123456789abcdef") for _ in range(24))
        self.body.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "read", "arguments": '{"path": "cart.py"}'}}]})
        self.body.append({"role": "tool", "tool_call_id": call_id, "content": paragraph(self.rng, 2)})

    def user(self, text: str) -> None:
        self.body.append({"role": "assistant", "content": "Done."})
        self.body.append({"role": "user", "content": text})


def _run(stabilizer: Stabilizer, data: dict, call_type: str = "acompletion", call_id: str | None = None) -> dict:
    if call_id:
        data = {**data, "litellm_call_id": call_id}
    return stabilizer.stabilize_sync(data, call_type, target=VLLM)


def _system(out: dict) -> str:
    return out["messages"][0]["content"]


def test_a_pi_session_keys_on_its_anchor_and_first_answer():
    pi = Pi()
    first = _identity(pi.request())
    assert first.source == DERIVED and first.fresh  # no answer yet: a first request
    pi.answer()
    second = _identity(pi.request())
    assert not second.fresh and second.key != first.key
    # The router's and the hints' keys hold from the first request on.
    assert (second.affinity_key, second.cache_key) == (first.affinity_key, first.cache_key)
    pi.user("Now the integration tests.")
    pi.answer()
    assert _identity(pi.request()).key == second.key
    assert workspace(wire.wire_for(pi.request(), "acompletion").read(pi.request()), profiles.PI) == pi.cwd


def test_same_first_prompt_in_another_workspace_is_another_session():
    a, b = Pi(cwd="/home/alice/src/webshop"), Pi(cwd="/home/bob/work/webshop")
    assert _identity(a.request()).affinity_key != _identity(b.request()).affinity_key
    a.answer(), b.answer()
    b.body = copy.deepcopy(a.body)  # even the same first answer
    assert _identity(a.request()).key != _identity(b.request()).key


def test_a_new_session_never_inherits_another_sessions_pins_or_notes():
    """Same prompt, same workspace, a day later: the new session shows its own date, no note."""
    stabilizer = Stabilizer(Settings())
    old = Pi(date="2026-12-01", seed=1)
    _run(stabilizer, old.request())
    for _ in range(2):
        old.answer()
        _run(stabilizer, old.request())
    new = Pi(date="2026-12-02", seed=2)
    for turn in range(3):
        sent = new.request()
        out = _run(stabilizer, sent)
        assert "Current date: 2026-12-02" in _system(out), turn
        assert len(out["messages"]) == len(sent["messages"]), turn  # no note: nothing to tell
        new.answer()
    assert _identity(old.request()).key != _identity(new.request()).key


def test_a_resume_is_the_same_session_and_keeps_its_pins():
    stabilizer = Stabilizer(Settings())
    pi = Pi(date="2026-12-01")
    _run(stabilizer, pi.request())
    pi.answer()
    before = _identity(pi.request())
    day1 = _system(_run(stabilizer, pi.request()))
    pi.user("Resume: the integration tests.")
    pi.date, pi.sections = "2026-12-02", {**pi.sections, "project_context": pi.sections["project_context"] + "\n- new"}
    resumed = pi.request()
    assert _identity(resumed).key == before.key  # the history carries the first answer; an AGENTS.md edit
    out = _run(stabilizer, resumed)
    assert "Current date: 2026-12-01" in _system(out) and "2026-12-01" in day1  # the pinned date, kept
    assert any("2026-12-02" in json.dumps(m) for m in out["messages"][1:])  # the new one as a note


def test_a_genuine_head_change_does_not_split_the_session():
    pi = Pi()
    pi.answer()
    key = _identity(pi.request()).key
    pi.sections = {**pi.sections, "project_context": "# AGENTS.md\n\nUse pnpm, never npm."}
    pi.sections["tools"] += "\n- lint: run the linter"
    assert _identity(pi.request()).key == key


def test_a_retry_of_the_first_request_is_the_same_and_gets_the_same_bytes():
    stabilizer = Stabilizer(Settings())
    pi = Pi()
    first = _run(stabilizer, pi.request())
    retry = _run(stabilizer, pi.request())
    assert first == retry and _identity(pi.request()).key == _identity(pi.request()).key


def test_a_first_answer_is_its_tool_call_ids_else_its_text():
    pi = Pi()
    view = wire.wire_for(pi.request(), "acompletion").read(pi.request())
    assert first_answer(view) is None
    pi.answer()
    data = pi.request()
    with_ids = first_answer(wire.wire_for(data, "acompletion").read(data))
    pi.body.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_later", "type": "function", "function": {"name": "read", "arguments": "{}"}}]})
    data = pi.request()
    assert with_ids.startswith("ids:") and first_answer(wire.wire_for(data, "acompletion").read(data)) == with_ids
    text = Pi()
    text.user("and then?")
    data = text.request()
    assert first_answer(wire.wire_for(data, "acompletion").read(data)).startswith("text:")


# -- opencode: the title request -------------------------------------------------------------


TITLE_PROMPT = ("You are a title generator. You output ONLY a thread title. Nothing else.\n\n<task>\nGenerate a "
                "brief title that would help the user find this conversation later.\n</task>")


def _opencode(messages: list[dict], *, tools=True) -> dict:
    system = "You are opencode, an interactive CLI tool that helps users with software engineering tasks.\n\n" \
        + paragraph(random.Random(3), 30) + "\n\n" + opencode_env()
    body = {"model": "chat-model", "messages": [{"role": "system", "content": system},
                                               {"role": "system", "content": "# AGENTS.md\n\nUse pnpm."},
                                               *copy.deepcopy(messages)]}
    if tools:
        body["tools"] = openai_tools()
    return _proxy(body, opencode_headers())


def _drift(log: Path) -> list[dict]:
    return [e for e in map(json.loads, (flush_logs(), log.read_text())[1].splitlines()) if e.get("event") == "drift"] \
        if log.exists() else []


def test_the_opencode_title_request_is_its_own_stream_and_drifts_nothing(tmp_path):
    log = tmp_path / "log.jsonl"
    stabilizer = Stabilizer(Settings(log=str(log)))
    messages = [{"role": "user", "content": PROMPT}]
    title = _proxy({"model": "chat-model", "messages": [
        {"role": "system", "content": TITLE_PROMPT},
        {"role": "user", "content": f"Generate a title for this conversation:\n{PROMPT}"}]}, opencode_headers())
    _run(stabilizer, title, call_id="t")  # sent first, alongside the main loop's first request
    for turn in range(3):
        _run(stabilizer, _opencode(messages), call_id=f"m{turn}")
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{turn}x9", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"call_{turn}x9", "content": "ok"}]
    main, aux = _identity(_opencode(messages)), _identity(title)
    assert aux.stream == "aux:title" and main.stream is None and aux.key != main.key
    assert aux.affinity_key == main.affinity_key  # one session for the router
    assert _drift(log) == []


# -- Codex: automatic compaction, spawned agents ------------------------------------------------


CODEX_INSTRUCTIONS = "You are Codex, based on GPT-5. You are running as a coding agent in the Codex CLI."


def _codex(items: list[dict], headers: dict, *, tools=True) -> dict:
    body = {"model": "chat-model", "instructions": CODEX_INSTRUCTIONS, "input": copy.deepcopy(items),
            "prompt_cache_key": headers.get("session_id"), "stream": True}
    if tools:
        body["tools"] = responses_tools()
    return _proxy(body, headers)


def _user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


CONTEXT = [_user("# AGENTS.md instructions for /home/alice/src/api\n\n<INSTRUCTIONS>\nUse uv.\n</INSTRUCTIONS>"),
           _user("<environment_context>\n  <cwd>/home/alice/src/api</cwd>\n  <shell>bash</shell>\n"
                 "</environment_context>")]


def _codex_round(items: list[dict], call_id: str) -> None:
    items.append({"type": "function_call", "name": "shell", "arguments": '{"command":["ls"]}', "call_id": call_id})
    items.append({"type": "function_call_output", "call_id": call_id, "output": "README.md"})


def test_codex_compaction_is_its_own_stream_and_drifts_nothing(tmp_path):
    log = tmp_path / "log.jsonl"
    stabilizer = Stabilizer(Settings(log=str(log)))
    headers = codex_headers("0199a213-81c0-7800-8aa1-bbab2a035a53")
    items = [*CONTEXT, _user(PROMPT)]
    for turn in range(2):
        _run(stabilizer, _codex(items, headers), "aresponses", f"m{turn}")
        _codex_round(items, f"call_{turn}")
    compaction = _codex([*items, _user("You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff "
                                       "summary for another LLM that will resume the task.")], headers, tools=False)
    _run(stabilizer, compaction, "aresponses", "c")
    for turn in range(2, 4):  # the main loop, tools back
        _run(stabilizer, _codex(items, headers), "aresponses", f"m{turn}")
        _codex_round(items, f"call_{turn}")
    assert _drift(log) == []  # no "tools gone", no "tools back"
    main, aux = _identity(_codex(items, headers), "aresponses"), _identity(compaction, "aresponses")
    assert aux.key != main.key and aux.stream.endswith("aux:compaction")


def test_two_spawned_codex_agents_are_two_streams_with_or_without_their_header():
    session = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    new = {k: v for k, v in codex_headers().items() if k != "session_id"}  # 0.149+: session-id and thread-id
    main = _codex([*CONTEXT, _user(PROMPT)], {**new, "session-id": session, "thread-id": session})
    one = {**new, "session-id": session, "x-openai-subagent": "collab_spawn", "thread-id": "0199a214-aaaa"}
    two = {**new, "session-id": session, "x-openai-subagent": "collab_spawn", "thread-id": "0199a214-bbbb"}
    # The same header and the same task: only their thread ids tell them apart.
    a = _codex([*CONTEXT, _user("Explore the cart module.")], one)
    b = _codex([*CONTEXT, _user("Explore the cart module.")], two)
    identities = [_identity(r, "aresponses") for r in (main, a, b)]
    assert {i.session for i in identities} == {session} and len({i.key for i in identities}) == 3
    # No header, no thread id: the spawned agent's first prompt tells it apart; the main stream
    # keeps one key whatever its later turns hold.
    bare = codex_headers(session)
    a2 = _identity(_codex([*CONTEXT, _user("Explore the cart module.")], bare), "aresponses")
    b2 = _identity(_codex([*CONTEXT, _user("Explore the payment module.")], bare), "aresponses")
    items = [*CONTEXT, _user(PROMPT)]
    m1 = _identity(_codex(items, bare), "aresponses")
    _codex_round(items, "call_1")
    items.append(_user("And the docs."))
    m2 = _identity(_codex(items, bare), "aresponses")
    assert len({a2.key, b2.key, m1.key}) == 3 and m1.key == m2.key


# -- one identity: journal, router, hints ---------------------------------------------------------


def _cc(turns: int = 1) -> dict:
    rng = random.Random(1)
    body = claude_code_body(turns, [{"role": "user", "content": PROMPT}], prompt=claude_code_prompt(rng),
                            env=claude_code_env(), git=claude_code_git_status(), tools=claude_code_tools())
    return _proxy(body, claude_code_headers())


def _cc_332(system_prompt: str, task: str, *, subagent: bool, agent_id: str | None = None) -> dict:
    """A Claude Code 2.1.332 request (explore_cc.md): the billing block (a subagent's says so), the SDK
    line, the agent's prompt; the first user message the date reminder, then the task."""
    billing = "x-anthropic-billing-header: cc_version=2.1.332.90c; cc_entrypoint=sdk-cli;" + (
        " cc_is_subagent=true;" if subagent else "")
    body = {"model": "cc-model", "max_tokens": 32, "tools": claude_code_tools(), "system": [
        {"type": "text", "text": billing},
        {"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK."},
        {"type": "text", "text": system_prompt}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>\nAs you answer the user's questions, you can use the following "
                                     "context:\n# currentDate\nToday's date is 2026-12-03.\n\n      IMPORTANT: this "
                                     "context may or may not be relevant to your tasks. You should not respond to this "
                                     "context unless it is highly relevant to your task.\n</system-reminder>\n"},
            {"type": "text", "text": task}]}]}
    return _proxy(body, claude_code_headers(agent_id=agent_id))


def test_two_runs_of_one_claude_code_subagent_type_are_two_streams_with_or_without_their_header():
    """Claude Code 2.1.332 spawns the same subagent type after each of two prompts, with another task:
    with its ``x-claude-code-agent-id`` each run is its own stream; without it (a proxy that strips
    it) too: a subagent's head (its billing block, its own opening line) makes its task part of its
    stream. The main agent's stream stays its head's, whatever its first prompt."""
    sub = "You are an agent for Claude Code, Anthropic's official CLI for Claude. Given the user's message, ..."
    main = "\nYou are an agent working with the user on software engineering tasks. ..."
    runs = [_cc_332(sub, f"(agent: claude-code) subtask {n} @script: shell pwd", subagent=True) for n in ("one", "two")]
    streams = [_identity(r, "anthropic_messages") for r in runs]
    assert streams[0].stream != streams[1].stream and streams[0].key != streams[1].key
    assert streams[0].session == streams[1].session  # one session, two streams
    headed = [_cc_332(sub, "(agent: claude-code) same task", subagent=True, agent_id=a) for a in ("a1b2c3", "d4e5f6")]
    assert len({_identity(r, "anthropic_messages").stream for r in headed}) == 2  # the header, as before
    unbilled = [_cc_332(sub, f"task {n}", subagent=False) for n in (1, 2)]  # no billing block mark: its opening
    assert len({_identity(r, "anthropic_messages").stream for r in unbilled}) == 2
    mains = [_identity(_cc_332(main, prompt, subagent=False), "anthropic_messages").stream for prompt in ("a", "b")]
    assert mains[0] == mains[1] and "task:" not in mains[0]  # (a compaction's new first prompt keeps it)


def test_affinity_and_hints_use_the_transforms_identity():
    for data, call_type in ((Pi().request(), "acompletion"), (_cc(), "anthropic_messages"),
                            (_codex([*CONTEXT, _user(PROMPT)], codex_headers()), "aresponses")):
        identity = _identity(data, call_type)
        assert session_key(copy.deepcopy(data), call_type, settings=Settings()) == identity.affinity_key
        stabilizer = Stabilizer(Settings())
        stabilizer.stabilize_sync({**copy.deepcopy(data), "litellm_call_id": "x"}, call_type, target=VLLM)
        applied = stabilizer.applied.get("x")
        assert (applied.key, applied.affinity_key) == (identity.cache_key, identity.affinity_key)


# -- properties -------------------------------------------------------------------------------


WORKSPACES = st.sampled_from(["/home/alice/src/webshop", "/home/bob/webshop", "/srv/build/42/webshop", "/tmp/w"])


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cwd_a=WORKSPACES, cwd_b=WORKSPACES, seed_a=st.integers(0, 10**6), seed_b=st.integers(0, 10**6),
       date_a=st.dates(), date_b=st.dates())
def test_sessions_that_differ_in_workspace_or_first_answer_never_share_a_key(cwd_a, cwd_b, seed_a, seed_b,
                                                                             date_a, date_b):
    a = Pi(cwd=cwd_a, seed=seed_a, date=str(date_a))
    b = Pi(cwd=cwd_b, seed=seed_b, date=str(date_b))
    a.answer(), b.answer()
    same_answer = a.body[1]["tool_calls"][0]["id"] == b.body[1]["tool_calls"][0]["id"]
    if cwd_a != cwd_b or not same_answer:
        assert _identity(a.request()).key != _identity(b.request()).key


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), steps=st.lists(st.sampled_from(["tool", "prompt", "date", "agents", "tools"]),
                                                  min_size=1, max_size=8))
def test_a_sessions_key_is_constant_over_its_turns(seed, steps):
    """Whatever a session's later turns bring (tool rounds, prompts, a new date, an AGENTS.md edit,
    a new tool), its journal key from the second request on and its router/hint keys throughout stay."""
    pi = Pi(seed=seed)
    first = _identity(pi.request())
    pi.answer()
    second = _identity(pi.request())
    for n, step in enumerate(steps):
        if step == "tool":
            pi.answer()
        elif step == "prompt":
            pi.user(f"next {n}")
        elif step == "date":
            pi.date = f"2026-12-{n + 2:02d}"
        elif step == "agents":
            pi.sections = {**pi.sections, "project_context": pi.sections["project_context"] + f"\n- rule {n}"}
        else:
            pi.sections = {**pi.sections, "tools": pi.sections["tools"] + f"\n- extra{n}: a tool"}
        later = _identity(pi.request())
        assert later.key == second.key
        assert (later.cache_key, later.affinity_key) == (first.cache_key, first.affinity_key)


# -- Qwen Code and Gemini CLI: the agent's context is no part of the session's identity --------------
#
# Built from the requests the real CLIs sent (tests/fixtures/agents_gq/). Qwen Code's whole first
# user message is its context block (date, OS, cwd, folder tree), answered by a fixed "Got it.
# Thanks for the context!", then the typed prompt; Gemini CLI's first user message is a
# <session_context> part, then the prompt part. Both re-render the block on a resume (that day's
# date, the folder tree of now). Neither sends a session id: the key is derived.

AGENTS_GQ = FIXTURES / "agents_gq"


def _fixture(agent: str) -> dict:
    data = json.loads((AGENTS_GQ / f"{agent}.json").read_text(encoding="utf-8"))
    for body in data["requests"].values():
        body["tools"] = data["tool_sets"][body["tools"]]
    return data


GQ = {agent: _fixture(agent) for agent in ("qwen-code", "gemini-cli")}
WS_A = {"qwen-code": "/home/dev/work/qwen-code/off/ws-a", "gemini-cli": "/home/dev/work/gemini-cli/off/ws-a"}


def _gq(agent: str, body: dict) -> dict:
    return _proxy(body, GQ[agent]["headers"])


def _recorded(agent: str, name: str) -> dict:
    return copy.deepcopy(GQ[agent]["requests"][name])


def _context_part(body: dict) -> dict:
    """The text part holding the agent's context block (the first part of the first user message)."""
    return body["messages"][1]["content"][0]


def _rerender(agent: str, body: dict, *, day=None, new_file=None, cwd=None) -> dict:
    """The context block as the CLI renders it on another day, after a file was added, or in another workspace."""
    body = copy.deepcopy(body)
    part = _context_part(body)
    text = part["text"]
    if day is not None:
        text = re.sub(r"Today's date is [^(\n]*\(", f"Today's date is {day:%A, %B} {day.day}, {day:%Y} (", text)
    if new_file is not None:
        branch = "\u251c\u2500\u2500\u2500"  # the tree's "├───"
        text = text.replace(f"{branch}app.py\n", f"{branch}app.py\n{branch}{new_file}\n")
    if cwd is not None:
        text = text.replace(WS_A[agent], cwd)
    part["text"] = text
    return body


def _typed_prompt(agent: str, body: dict) -> dict:
    """The part or message holding the first typed prompt."""
    return body["messages"][3]["content"][0] if agent == "qwen-code" else body["messages"][1]["content"][1]


def _with_prompt(agent: str, body: dict, text: str) -> dict:
    body = copy.deepcopy(body)
    _typed_prompt(agent, body)["text"] = text
    return body


def _gq_key(agent: str, body: dict):
    return _identity(_gq(agent, body))


@pytest.mark.parametrize("agent", list(GQ))
def test_a_next_day_resume_with_a_changed_folder_tree_keeps_one_key(agent):
    """The recorded session (continued, resumed on the next day) and a resume whose block also shows a new file."""
    first = _gq_key(agent, _recorded(agent, "a1_first"))
    assert first.fresh and first.source == DERIVED  # no answer after the typed prompt yet (not even Qwen's "Got it")
    keys = {_gq_key(agent, _recorded(agent, name)).key for name in ("a1_last", "a2_resumed", "a3_next_day")}
    later = _rerender(agent, _recorded(agent, "a3_next_day"), day=date(2026, 12, 5), new_file="notes.md")
    keys.add(_gq_key(agent, later).key)
    assert len(keys) == 1 and first.key not in keys
    affinity = {_gq_key(agent, _recorded(agent, n)).affinity_key for n in ("a1_first", "a1_last", "a3_next_day")}
    assert affinity == {first.affinity_key, _gq_key(agent, later).affinity_key}  # the router's key holds too


@pytest.mark.parametrize("agent", list(GQ))
def test_two_sessions_with_other_first_prompts_in_one_workspace_are_two(agent):
    """Same day, same workspace, same context block, same fixed first reply (Qwen) or the same
    synthesized first tool-call ids (Gemini: ``call_run_shell_command``): the typed prompt tells them apart."""
    a = _recorded(agent, "a1_last")
    b = _with_prompt(agent, a, f"(agent: {agent}) Explain the build instead.")
    assert _context_part(a) == _context_part(b) and a["messages"][2:] == b["messages"][2:] or agent == "qwen-code"
    assert a["messages"][:3] == b["messages"][:3] or agent == "gemini-cli"  # context and fixed reply the same
    ka, kb = _gq_key(agent, a), _gq_key(agent, b)
    assert ka.key != kb.key and ka.affinity_key != kb.affinity_key
    fa, fb = (_gq_key(agent, {**body, "messages": body["messages"][:4 if agent == "qwen-code" else 2]})
              for body in (a, b))
    assert fa.fresh and fb.fresh and fa.key != fb.key


@pytest.mark.parametrize("agent", list(GQ))
def test_the_same_first_prompt_in_another_workspace_a_day_later_is_another_session(agent):
    other = _recorded(agent, "b1_other_session")
    assert _typed_prompt(agent, other) == _typed_prompt(agent, _recorded(agent, "a1_first"))
    assert _gq_key(agent, other).affinity_key != _gq_key(agent, _recorded(agent, "a1_first")).affinity_key
    # Even with the same first answer, byte for byte.
    a = _recorded(agent, "a1_last")
    answered = {**other, "messages": [*other["messages"], *a["messages"][len(other["messages"]):]]}
    assert _gq_key(agent, answered).key != _gq_key(agent, a).key


def test_gemini_synthesized_call_ids_are_not_its_identity_its_calls_are():
    """LiteLLM hands Gemini's calls back as ``call_<tool name>``: the same in every session. Two
    sessions (same prompt, same workspace, same day) whose first answers run other commands are two;
    byte-identical ones cannot be told apart without an agent id: ``x-session-id`` does."""
    agent = "gemini-cli"
    a = _recorded(agent, "a1_last")
    call = a["messages"][2]["tool_calls"][0]
    assert call["id"] == "call_run_shell_command" and synthesized_call_id(call["id"], call["function"]["name"])
    b = copy.deepcopy(a)
    b["messages"][2]["tool_calls"][0]["function"]["arguments"] = '{"command": "ls -la"}'
    assert first_answer(chat_view(a), profiles.GEMINI_CLI).startswith("calls:")
    assert _gq_key(agent, a).key != _gq_key(agent, b).key
    assert _gq_key(agent, a).key == _gq_key(agent, copy.deepcopy(a)).key  # the documented limit
    one = _identity(_proxy(a, {**GQ[agent]["headers"], "x-session-id": "ses-1"}))
    two = _identity(_proxy(a, {**GQ[agent]["headers"], "x-session-id": "ses-2"}))
    assert one.source == "header x-session-id" and one.key != two.key


@pytest.mark.parametrize("call_id, name, synthesized", [
    ("call_run_shell_command", "run_shell_command", True),
    ("call_read_file", "read_file", True),
    ("call_1", "read", True),
    ("call_be8ecdd89b604cf7841c5fe3", "run_shell_command", False),  # Qwen: the model's own
    ("toolu_01A09q90qw90lq917835lq9", "Bash", False),
    ("call_0x9", "read", True),
    ("fc_68b9c1a2e4d88193a0d3f5b7", "shell", False),
])
def test_synthesized_call_ids_are_those_without_randomness(call_id, name, synthesized):
    assert synthesized_call_id(call_id, name) is synthesized


def test_text_that_looks_like_an_agents_context_is_the_users_own():
    """Only the profile's declared blocks at the start of the first user message are the agent's."""
    # A Qwen prompt (the message after the ack) that starts like Qwen's context block: typed, kept.
    qwen = _recorded("qwen-code", "a1_last")
    opener = _context_part(qwen)["text"].split("\n", 1)[0]
    x = _with_prompt("qwen-code", qwen, f"{opener}\nPlease refactor app.py.")
    y = _with_prompt("qwen-code", qwen, f"{opener}\nPlease document app.py.")
    assert _gq_key("qwen-code", x).key != _gq_key("qwen-code", y).key
    resumed = copy.deepcopy(x)
    resumed["messages"] += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "more"}]
    assert _gq_key("qwen-code", resumed).key == _gq_key("qwen-code", x).key  # and the session holds
    # A Gemini prompt part that quotes a context block without opening with one: typed, kept.
    gemini = _recorded("gemini-cli", "a1_last")
    g1 = _with_prompt("gemini-cli", gemini, "Why does my log say <session_context>\nThis is the Gemini CLI.?")
    g2 = _with_prompt("gemini-cli", gemini, "Why does my log say <session_context>\nThis is the Gemini CLI.!")
    assert _gq_key("gemini-cli", g1).key != _gq_key("gemini-cli", g2).key
    # Another agent's block is no block for pi: the whole first message is the user's.
    a, b = Pi(prompt=f"{opener}\nfirst"), Pi(prompt=f"{opener}\nsecond")
    assert _identity(a.request()).affinity_key != _identity(b.request()).affinity_key


def test_a_qwen_context_answered_by_another_reply_stands_as_the_prompt():
    """The ack is profile data: where the reply after the context is not it, nothing is skipped."""
    body = _recorded("qwen-code", "a1_last")
    body["messages"][2]["content"] = "Sure. What should I do?"
    view = chat_view(body)
    assert first_typed(view, profiles.QWEN_CODE)[0] == 0  # the context message (the body's first item)
    assert first_typed(chat_view(_recorded("qwen-code", "a1_last")), profiles.QWEN_CODE)[0] == 2  # past the ack


def test_qwen_without_its_startup_context_keys_on_its_first_message():
    """``model.skipStartupContext``: no block, no ack; the first user message is the prompt."""
    body = _recorded("qwen-code", "a1_last")
    bare = {**body, "messages": [body["messages"][0], *body["messages"][3:]]}
    assert first_typed(chat_view(bare), profiles.QWEN_CODE)[0] == 0
    assert first_answer(chat_view(bare), profiles.QWEN_CODE) == first_answer(chat_view(body), profiles.QWEN_CODE)


# -- auxiliary calls as the real agents send them (harness/real_agents/explore_cc.md) ---------------------


def test_claude_code_compact_appends_its_instructions_to_the_last_user_message():
    """2.1.197 ``/compact``: full history and tools, the instructions as text blocks after the last
    user message's tool result, or after the user's own text. Its head and tools are the main
    stream's, so it is the main stream's request: the pinned head (a git status held at its first
    value) reaches the model on it too, and its prefix is the main conversation's."""
    body = claude_code_body(2, [{"role": "user", "content": PROMPT}], prompt=claude_code_prompt(random.Random(1)),
                            env=claude_code_env(), git=claude_code_git_status(), tools=claude_code_tools())
    main = _proxy(body, claude_code_headers())
    compact = copy.deepcopy(main)
    last = compact["messages"][-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    last["content"] += [
        {"type": "text", "text": "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\n\n"
                                 "- Do NOT use Read, Bash."},
        {"type": "text", "text": "Your task is to create a detailed summary of the conversation so far, paying close "
                                 "attention to the user's explicit requests. ... an <analysis> block followed by a "
                                 "<summary> block."}]
    m, c = _identity(main, "anthropic_messages"), _identity(compact, "anthropic_messages")
    assert c.key == m.key and c.stream == m.stream and (m.stream is None or "aux:" not in m.stream)


def test_codex_compaction_is_told_by_its_turn_metadata():
    """0.171.0: the compaction request has no tools and ``request_kind: compaction`` in
    ``x-codex-turn-metadata``; a turn with the same header kind "turn" is the main stream."""
    session = "0199a213-81c0-7800-8aa1-bbab2a035a53"

    def meta(kind: str) -> str:
        return json.dumps({"session_id": session, "thread_id": session, "request_kind": kind,
                           "thread_source": "user", "turn_id": "t-1"})
    headers = {**codex_headers(session), "session-id": session, "thread-id": session}
    items = [*CONTEXT, _user(PROMPT)]
    turn = _identity(_codex(items, {**headers, "x-codex-turn-metadata": meta("turn")}), "aresponses")
    compaction = _codex([*items, _user("Another summary request, worded differently.")],
                        {**headers, "x-codex-turn-metadata": meta("compaction")}, tools=False)
    aux = _identity(compaction, "aresponses")
    assert "aux:" not in (turn.stream or "") and aux.key != turn.key
    assert aux.stream == f"{turn.stream}\x00aux:compaction"  # told by the header, whatever its last message says


def test_opencode_sends_its_title_request_as_two_user_messages_first(tmp_path):
    """1.18.33: the title request comes before the main loop's first request, no tools, its own
    system prompt, then "Generate a title for this conversation:\\n" and the prompt as two messages."""
    log = tmp_path / "log.jsonl"
    stabilizer = Stabilizer(Settings(log=str(log)))
    title = _proxy({"model": "chat-model", "messages": [
        {"role": "system", "content": TITLE_PROMPT},
        {"role": "user", "content": "Generate a title for this conversation:\n"},
        {"role": "user", "content": PROMPT}]}, opencode_headers())
    _run(stabilizer, title, call_id="t")
    messages = [{"role": "user", "content": PROMPT}]
    for turn in range(2):
        _run(stabilizer, _opencode(messages), call_id=f"m{turn}")
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{turn}a8f3c2d19b", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"call_{turn}a8f3c2d19b", "content": "ok"}]
    assert _identity(title).stream == "aux:title" and _identity(_opencode(messages)).stream is None
    assert _drift(log) == []


# -- properties on the recorded Qwen Code and Gemini CLI shapes ----------------------------------------


GQ_WORKSPACES = st.sampled_from(["/home/dev/work/ws-a", "/home/bob/ws-a", "/srv/ci/7/app"])
GQ_PROMPTS = st.sampled_from(["Please look at this project.", "Fix the failing test.", "Explain app.py."])


def _gq_session(agent: str, *, cwd: str, day: date, prompt: str, answer: int) -> dict:
    """A session after its first answer: the recorded one, in ``cwd`` on ``day``, with its own
    prompt and first answer (Qwen: the model's random ids; Gemini: the synthesized ids, its own command)."""
    body = _with_prompt(agent, _rerender(agent, _recorded(agent, "a1_last"), day=day, cwd=cwd), prompt)
    first = body["messages"][4 if agent == "qwen-code" else 2]
    call = first["tool_calls"][0]
    call["function"]["arguments"] = json.dumps({"command": f"ls {answer}"})
    if agent == "qwen-code":
        call["id"] = "call_" + "".join(random.Random(answer).choice("0123456789abcdef") for _ in range(24))
        body["messages"][5]["tool_call_id"] = call["id"]
    return body


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent=st.sampled_from(list(GQ)), cwd_a=GQ_WORKSPACES, cwd_b=GQ_WORKSPACES, prompt_a=GQ_PROMPTS,
       prompt_b=GQ_PROMPTS, answer_a=st.integers(0, 3), answer_b=st.integers(0, 3),
       day_a=st.dates(date(2026, 1, 1), date(2027, 12, 31)), day_b=st.dates(date(2026, 1, 1), date(2027, 12, 31)))
def test_gq_sessions_that_differ_in_workspace_prompt_or_first_answer_never_share_a_key(
        agent, cwd_a, cwd_b, prompt_a, prompt_b, answer_a, answer_b, day_a, day_b):
    a = _gq_session(agent, cwd=cwd_a, day=day_a, prompt=prompt_a, answer=answer_a)
    b = _gq_session(agent, cwd=cwd_b, day=day_b, prompt=prompt_b, answer=answer_b)
    ka, kb = _gq_key(agent, a), _gq_key(agent, b)
    if (cwd_a, prompt_a, answer_a) != (cwd_b, prompt_b, answer_b):
        assert ka.key != kb.key
    else:  # the same session (another day: a resume) keeps its key; the limit without an agent id
        assert ka.key == kb.key


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent=st.sampled_from(list(GQ)), seed=st.integers(0, 10**6),
       steps=st.lists(st.sampled_from(["day", "tree", "prompt", "tool", "resume"]), min_size=1, max_size=8))
def test_a_gq_sessions_key_is_constant_over_resumes_and_turns(agent, seed, steps):
    """Whatever the later turns bring (a re-rendered context with another date or folder tree, tool
    rounds with the agent's own ids, new prompts, a Gemini resume's duplicated tool results), the
    journal key from the first answer on and the router's key throughout stay."""
    rng = random.Random(seed)
    body = _recorded(agent, "a1_last")
    first, second = _gq_key(agent, _recorded(agent, "a1_first")), _gq_key(agent, body)
    day = date(2026, 12, 3)
    for n, step in enumerate(steps):
        if step == "day":
            day = date.fromordinal(day.toordinal() + rng.randint(1, 40))
            body = _rerender(agent, body, day=day)
        elif step == "tree":
            body = _rerender(agent, body, new_file=f"new_{n}.py")
        elif step == "prompt":
            body["messages"] += [{"role": "assistant", "content": f"done {n}"},
                                 {"role": "user", "content": f"next {n}"}]
        elif step == "tool":
            name = rng.choice(["read_file", "run_shell_command"])
            call_id = f"call_{name}" if agent == "gemini-cli" else \
                "call_" + "".join(rng.choice("0123456789abcdef") for _ in range(24))
            body["messages"] += [
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": call_id, "content": f"out {n}"}]
        else:  # a resume: Gemini CLI replays each tool result twice
            if agent == "gemini-cli":
                body["messages"] = [m for message in body["messages"]
                                    for m in ([message, message] if message["role"] == "tool" else [message])]
        later = _gq_key(agent, body)
        assert later.key == second.key
        assert (later.cache_key, later.affinity_key) == (first.cache_key, first.affinity_key)


def test_the_second_request_starts_from_what_the_first_one_decided():
    """A derived session's first request has no key of its own yet (no answer); its decisions wait
    for the second request (the first with an answer) under a 10-minute time bucket: a date that
    moved in between is pinned and noted, as on any later turn."""
    stabilizer = Stabilizer(Settings())
    now = [1_800_000_000.0]
    stabilizer.clock = lambda: now[0]
    pi = Pi(date="2026-12-01", seed=5)
    first = _run(stabilizer, pi.request())
    pi.answer()
    pi.date = "2026-12-02"  # midnight between the first request and the second
    now[0] += 30
    second = _run(stabilizer, pi.request())
    assert _system(second) == _system(first)  # the head the first request sent: the prefix holds
    assert "2026-12-02" in json.dumps(second["messages"][1:])  # the new date as a note
    pi.answer()
    now[0] += 30
    third = _run(stabilizer, pi.request())
    assert third["messages"][: len(second["messages"])] == second["messages"]


def test_a_second_request_long_after_the_first_starts_on_its_own():
    """A one-off resumed later (20+ minutes) finds no first journal: it starts empty, so nothing
    another session with the same first request decided in between can reach it."""
    stabilizer = Stabilizer(Settings())
    now = [1_800_000_000.0]
    stabilizer.clock = lambda: now[0]
    pi = Pi(date="2026-12-01", seed=6)
    _run(stabilizer, pi.request())
    pi.answer()
    pi.date = "2026-12-02"
    now[0] += 1500
    later = _run(stabilizer, pi.request())
    assert "Current date: 2026-12-02" in _system(later)  # its own date, nothing pinned from before
    assert len(later["messages"]) == len(pi.request()["messages"])


# -- look-alike sessions (issue 37): one derived key, several sessions --------------------------------
#
# Sessions of pi, Qwen Code and Gemini CLI that share their derived key: the same first prompt in the
# same workspace, and the same first answer (Gemini's synthesized ids; a model that answers a prompt
# the same way). Each is its own session: a later one never shows an earlier one's pins or notes.

GQ_HEADS = {agent: GQ[agent]["requests"]["a1_first"]["messages"][0]["content"] for agent in GQ}
LOOK_DAY = date(2026, 12, 3)


class Alike:
    """An id-less session of ``agent`` (pi, qwen-code, gemini-cli), built turn by turn. ``index`` makes
    its tool results its own (``shared`` results: the same as any other session's)."""

    def __init__(self, agent: str, *, prompt: str, cwd: str, day: int, index: int, shared: bool = False):
        self.agent, self.prompt, self.cwd, self.index, self.shared = agent, prompt, cwd, index, shared
        self.start = self.day = day
        self.turns: list[dict] = []
        self.calls = 0

    def __repr__(self) -> str:
        return f"Alike({self.agent!r}, prompt={self.prompt!r}, cwd={self.cwd!r}, day={self.start}, index={self.index}, " \
               f"shared={self.shared})"

    def when(self, day: int | None = None) -> date:
        return date.fromordinal(LOOK_DAY.toordinal() + (self.day if day is None else day))

    def request(self) -> dict:
        if self.agent == "pi":
            pi = Pi(cwd=self.cwd, date=str(self.when()), prompt=self.prompt)
            pi.body += copy.deepcopy(self.turns)
            return pi.request()
        body = _rerender(self.agent, _recorded(self.agent, "a1_first"), day=self.when(), cwd=self.cwd)
        body = _with_prompt(self.agent, body, self.prompt)
        body["messages"] += copy.deepcopy(self.turns)
        return _gq(self.agent, body)

    def tool(self) -> None:
        """An answer calling a tool, and its result; the first one the same in every session of the prompt."""
        first = self.calls == 0
        name = "read_file" if first else "run_shell_command"
        if self.agent == "gemini-cli":
            call_id = f"call_{name}"  # LiteLLM's, from the name
        else:  # a model's id: the same for the same first answer, its own after that
            seed = f"{self.prompt}:{0 if first else (self.index, self.calls)}"
            call_id = "call_" + hashlib.sha256(seed.encode()).hexdigest()[:24]
        arguments = json.dumps({"file_path": "README.md"} if first else {"command": f"ls {self.calls}"})
        result = "# demo" if first and self.shared else f"output {self.index}.{self.calls}"
        self.turns += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": call_id, "content": json.dumps({"output": result})}]
        self.calls += 1

    def say(self) -> None:
        self.turns += [{"role": "assistant", "content": f"Done {self.calls}."},
                       {"role": "user", "content": f"(next {self.calls}) go on"}]

    def shown_date(self, out: dict) -> str:
        """The date the output's head (pi) or context block (Qwen Code, Gemini CLI) shows."""
        text = out["messages"][0]["content"] if self.agent == "pi" else json.dumps(out["messages"][1])
        found = re.search(r"Current date: (\d{4}-\d\d-\d\d)|Today's date is ([A-Za-z]+, [A-Za-z]+ \d+, \d{4})", text)
        return found.group(1) or found.group(2)

    def rendered(self, day: int) -> str:
        when = self.when(day)
        return str(when) if self.agent == "pi" else f"{when:%A, %B} {when.day}, {when:%Y}"


def _alike_run(sessions: list[Alike], plan: list[tuple[int, str]], stabilizer: Stabilizer | None = None,
               sent: dict[int, list[str]] | None = None):
    """Each session's outputs, request by request, for ``plan`` (session, step before the request:
    "start", "tool", "say", "day"); one stabilizer for all. ``sent``: each session's requests as sent."""
    stabilizer = stabilizer or Stabilizer(Settings())
    stabilizer.clock = lambda: 1_800_000_000.0
    outputs: dict[int, list[dict]] = {i: [] for i in range(len(sessions))}
    for index, step in plan:
        session = sessions[index]
        if step == "tool":
            session.tool()
        elif step == "say":
            session.say()
        elif step == "day":
            session.day += 1
            session.say()
        request = session.request()
        if sent is not None:
            sent[index].append(json.dumps(request, sort_keys=True))
        outputs[index].append(_run(stabilizer, request))
    return outputs


def _fresh_copies(sessions: list[Alike]) -> list[Alike]:
    return [Alike(s.agent, prompt=s.prompt, cwd=s.cwd, day=s.start, index=s.index, shared=s.shared) for s in sessions]


@pytest.mark.parametrize("agent", ["pi", "qwen-code", "gemini-cli"])
def test_the_same_prompt_the_next_day_in_the_same_workspace_is_another_session(agent):
    """The issue's held-out run: a second session a day later, same prompt, same first answer, same
    workspace. From its second request on it keeps its own date (no earlier date pinned, no note),
    while the first session, resumed after it, keeps its own pins and gets the new date as a note."""
    prompt, cwd = f"(agent: {agent}) Please look at this project.", "/home/dev/work/ws-a"
    first, second = Alike(agent, prompt=prompt, cwd=cwd, day=0, index=0), Alike(agent, prompt=prompt, cwd=cwd, day=1, index=1)
    plan = [(0, "start"), (0, "tool"), (0, "tool"), (1, "start"), (1, "tool"), (1, "tool"), (0, "day"), (1, "say"),
            (0, "tool"), (1, "tool")]
    out = _alike_run([first, second], plan)
    for n, sent in enumerate(out[1]):
        assert second.shown_date(sent) == second.rendered(1), n
        assert NOTE_MARK not in json.dumps(sent), n
    assert all(first.shown_date(sent) == first.rendered(0) for sent in out[0])  # its own pins, throughout
    assert NOTE_MARK in json.dumps(out[0][3]) and first.rendered(1) in json.dumps(out[0][3]["messages"][-2:])


NOTE_MARK = "from the start of this session"


def test_a_retry_of_a_resumed_request_gets_the_same_bytes():
    """A request that recorded how far its session got (its trace), sent again (a client's retry
    after an upstream error): the very request again, the same journal, the same bytes."""
    session = Alike("gemini-cli", prompt="(agent: g) look", cwd="/w/a", day=0, index=0)
    plan = [(0, "start"), (0, "tool"), (0, "tool"), (0, "day")]
    stabilizer = Stabilizer(Settings())
    out = _alike_run([session], plan, stabilizer)
    again = _run(stabilizer, session.request())
    assert again == out[0][-1] and session.rendered(0) in json.dumps(again["messages"][1])


def test_byte_identical_sessions_share_a_journal_and_are_shown_nothing_false():
    """The documented limit: two sessions alike in every byte so far (same day, same context, same
    answers and results) cannot be told apart: they share one journal, whose pins are each one's
    own start values; once their requests differ, each goes on with its own."""
    twins = [Alike("gemini-cli", prompt="(agent: g) hi", cwd="/w/a", day=0, index=i, shared=True) for i in (0, 1)]
    plan = [(0, "start"), (0, "tool"), (1, "start"), (1, "tool"), (0, "tool"), (1, "tool"), (1, "day"), (0, "say")]
    out = _alike_run(twins, plan)
    for index, session in enumerate(twins):
        assert all(session.shown_date(sent) == session.rendered(0) for sent in out[index])
    assert NOTE_MARK not in json.dumps(out[0])  # the other's next-day note is anchored in the other's history


@st.composite
def alike_cases(draw):
    agent = draw(st.sampled_from(["pi", "qwen-code", "gemini-cli"]))
    count = draw(st.integers(2, 3))
    sessions, plans = [], []
    for index in range(count):
        prompt = draw(st.sampled_from([f"(agent: {agent}) Please look at this project.", f"(agent: {agent}) Fix it."]))
        cwd = draw(st.sampled_from(["/home/dev/work/ws-a", "/home/bob/ws-a"]))
        sessions.append(Alike(agent, prompt=prompt, cwd=cwd, day=draw(st.integers(0, 2)), index=index,
                              shared=draw(st.booleans())))
        steps = draw(st.lists(st.sampled_from(["tool", "say", "day"]), min_size=1, max_size=5))
        plans.append([(index, "start"), (index, "tool"), *((index, step) for step in steps)])
    order = draw(st.permutations([i for i, plan in enumerate(plans) for _ in plan]))
    cursor = [0] * count
    plan = []
    for index in order:  # interleaved, each session's own steps in order
        plan.append(plans[index][cursor[index]])
        cursor[index] += 1
    return sessions, plan


def _days_seen(alike: list[Alike], sessions: list[Alike], plan: list[tuple[int, str]], index: int) -> list[set[str]]:
    """For each request of session ``index``, the dates the ``alike`` sessions were on up to then."""
    day = {i: s.start for i, s in enumerate(sessions)}
    seen: set[str] = set()
    out = []
    for i, step in plan:
        day[i] += step == "day"
        if sessions[i] in alike:
            seen |= {sessions[i].rendered(d) for d in range(sessions[i].start, day[i] + 1)}
        if i == index:
            out.append(set(seen))
    return out


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(alike_cases())
def test_interleaved_id_less_sessions_are_each_what_they_are_alone(case):
    """Generated id-less sessions of pi, Qwen Code and Gemini CLI (the same or another first prompt,
    start day and workspace, the same first answer, interleaved in any order, each going on with
    tool rounds, prompts and next-day resumes): a session whose history is its own gets, request by
    request, exactly the bytes it gets when it runs alone; one whose answers and results so far are
    another's too (only the date its requests show may tell them apart: the documented limit) is
    shown only dates that it or a session alike it was on."""
    sessions, plan = case
    sent: dict[int, list[str]] = {i: [] for i in range(len(sessions))}
    together = _alike_run(sessions, plan, sent=sent)
    for index, session in enumerate(sessions):
        alone = _alike_run(_fresh_copies([session]), [(0, step) for i, step in plan if i == index])[0]
        # its history alike another's (the same first prompt, workspace, answer and result: only what
        # the requests show tells them apart), or a request byte for byte another's
        twin = any(other is not session and session.shared and other.shared
                   and (other.prompt, other.cwd) == (session.prompt, session.cwd) for other in sessions) \
            or any(body in sent[other] for other in sent if other != index for body in sent[index][1:])
        if not twin:
            assert together[index] == alone, index
        # the days it and the sessions alike it (the same answers and results so far) were on
        alike = [other for other in sessions if other is session or (twin and other.shared
                 and (other.prompt, other.cwd) == (session.prompt, session.cwd))]
        for output, seen in zip(together[index], _days_seen(alike, sessions, plan, index)):
            assert session.shown_date(output) in seen


def test_many_look_alike_sessions_each_keep_their_own_and_the_list_stays_bounded():
    """A scheduled job that sends the same prompt in one workspace every day: each run its own journal;
    the key's first journal lists the newest ``MAX_FORKS`` (an older run's journal is then no longer
    found: its next request starts its own, its own values, never another's)."""
    from litellm_prefix.request import core as core_module

    stabilizer = Stabilizer(Settings())
    stabilizer.clock = lambda: 1_800_000_000.0
    runs = [Alike("gemini-cli", prompt="(agent: g) nightly", cwd="/w/a", day=day, index=day)
            for day in range(core_module.MAX_FORKS + 3)]
    for run in runs:
        _run(stabilizer, run.request())
        run.tool()
        out = _run(stabilizer, run.request())
        assert run.shown_date(out) == run.rendered(run.start) and NOTE_MARK not in json.dumps(out)
    journals = [Journal.decoded(raw) for _, raw, _ in stabilizer.store.snapshot()[0].values()]
    assert max(len(j.forks) for j in journals) == core_module.MAX_FORKS
    old = runs[0]  # the first run goes on: still its own pins (the key's first journal is its)
    old.day += 1
    old.say()
    out = _run(stabilizer, old.request())
    assert old.shown_date(out) == old.rendered(old.start) and NOTE_MARK in json.dumps(out)
