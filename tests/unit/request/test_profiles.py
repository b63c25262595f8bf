"""Agent profiles: detection, the agents' own session ids, subagent streams, Claude Code's
billing block, and marks that never decide identity or change."""
from __future__ import annotations

import copy
import json
import random
import typing

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.agent_requests import (
    CC_SESSION,
    billing_block,
    claude_code_body,
    claude_code_env,
    claude_code_git_status,
    claude_code_headers,
    claude_code_prompt,
    claude_code_tools,
    claude_code_user_id,
    codex_headers,
    opencode_env,
    opencode_headers,
    pi_headers,
)
from harness.realistic import TOOL_NAMES, openai_tools, pi_system_prompt, responses_tools
from litellm_prefix.measure.sinks import flush_logs
from litellm_prefix.request import profiles
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.journal import content_hash
from litellm_prefix.request.rules.notes import unfolded
from litellm_prefix.request.session import scoped_key, session_id, session_stream, tenant_of
from litellm_prefix.request.target import Target
from litellm_prefix.request.view import View
from litellm_prefix.settings import ProfilesSetting, Settings, SettingsError, load_settings
from tests.support import examples

VLLM = Target(model="hosted_vllm/qwen3-coder", provider="hosted_vllm")
ANTHROPIC = Target(model="anthropic/claude-sonnet-4-5", provider="anthropic")


def _proxy(body: dict, headers: dict) -> dict:
    return {**copy.deepcopy(body), "proxy_server_request": {"headers": dict(headers), "body": {}}}


def _cc_session(turns: int, *, billing=True, date="2026-12-01", status="M src/app.py", seed=1, subagent=None):
    """Claude Code requests of one session, turn by turn (each appends to the last)."""
    rng = random.Random(seed)
    prompt = claude_code_prompt(rng, subagent)
    messages: list[dict] = []
    out = []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"Task {turn}: make the tests pass in module m{turn}"})
        out.append(claude_code_body(turn, messages, prompt=prompt, env=claude_code_env(date),
                                    git=claude_code_git_status(status), tools=claude_code_tools(), billing=billing))
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{turn}", "name": "read",
                                                           "input": {"path": f"src/m{turn}.py"}}]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn}",
                                                      "content": "def f():\n    return 1\n"}]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Done with task {turn}."}]})
    return out


# -- profiles as data ------------------------------------------------------------------


def test_profile_names_are_the_ones_settings_accept():
    force = ProfilesSetting.model_fields["force"].annotation  # dict[str, Literal[...names, "none"]]
    assert set(typing.get_args(typing.get_args(force)[1])) == set(profiles.names()) | {"none"}
    for profile in profiles.PROFILES:
        assert profile.source, profile.name
        from litellm_prefix.settings import VOLATILE_PRESETS

        assert set(profile.volatile_presets) <= set(VOLATILE_PRESETS), profile.name


@pytest.mark.parametrize("headers, expected", [
    (claude_code_headers(), "claude-code"),
    ({"user-agent": "claude-cli/2.1.90 (external, cli)"}, "claude-code"),
    ({"x-app": "cli", "user-agent": "Anthropic/JS 0.60.0"}, "claude-code"),
    ({"anthropic-beta": "interleaved-thinking-2025-05-14,claude-code-20250219"}, "claude-code"),
    (codex_headers(), "codex"),
    ({"originator": "codex_exec"}, "codex"),
    ({"user-agent": "codex_cli_rs/0.149.0 (Mac OS 15.1.0; arm64) iTerm.app/3.5.10"}, "codex"),
    (opencode_headers(), "opencode"),
    ({"x-opencode-session": "ses_1", "user-agent": "Mozilla/5.0"}, "opencode"),
    (pi_headers(), "pi"),
    ({"user-agent": "OpenAI/Python 1.99.1"}, None),
    ({"user-agent": "curl/8.5.0", "x-session-id": "abcdefgh"}, None),
])
def test_agents_are_recognised_from_their_request_headers(headers, expected):
    profile = profiles.detect({"proxy_server_request": {"headers": headers}}, ("You are a helpful assistant.",),
                              Settings())
    assert (profile.name if profile else None) == expected


@pytest.mark.parametrize("head, expected", [
    ((billing_block(0), "You are Claude Code, Anthropic's official CLI for Claude.", "prompt"), "claude-code"),
    (("You are Claude Code, Anthropic's official CLI for Claude.", "prompt"), "claude-code"),
    (("You are an agent for Claude Code, Anthropic's official CLI for Claude. Given the user's message",), "claude-code"),
    (("You are Codex, a coding agent based on GPT-5. You and the user share the same workspace.",), "codex"),
    (("You are a coding agent running in the Codex CLI, a terminal-based coding assistant.",), "codex"),
    (("You are opencode, an interactive CLI tool that helps users with software engineering tasks.\n\n"
      + opencode_env(),), "opencode"),
    (("You are an expert coding assistant operating inside pi, a coding agent harness. You help users",), "pi"),
    ((pi_system_prompt(target_tokens=2000),), "pi"),
    (("You are a helpful assistant.\nCurrent time: 2026-12-01T10:00:01Z",), None),
])
def test_agents_are_recognised_from_their_head_without_headers(head, expected):
    profile = profiles.detect({}, head, Settings())
    assert (profile.name if profile else None) == expected


def test_detection_can_be_forced_per_model_glob_or_turned_off(monkeypatch):
    cc = {"proxy_server_request": {"headers": claude_code_headers()}}
    forced = Settings(profiles={"force": {"local/*": "codex", "plain": "none"}})
    assert profiles.detect(cc, (), forced, ("group", "local/qwen")).name == "codex"
    assert profiles.detect(cc, (), forced, ("plain",)) is None
    assert profiles.detect(cc, (), forced, ("other",)).name == "claude-code"
    assert profiles.detect(cc, (), Settings(profiles="off")) is None
    monkeypatch.setenv("LITELLM_PREFIX_PROFILES", "off")
    assert load_settings().profiles.detect is False
    from litellm_prefix.settings import _validate

    with pytest.raises(SettingsError, match="profiles"):
        _validate({"profiles": {"force": {"*": "cursor"}}}, "test file")


def test_a_profile_turns_on_its_presets_and_patterns_by_merging_into_settings():
    base = Settings()
    cc = profiles.apply(base, profiles.CLAUDE_CODE)
    assert {"todays-date", "git-status"} <= set(cc.volatile_presets)
    assert profiles.apply(base, profiles.PI).volatile_presets == ["current-date"]
    assert profiles.apply(base, profiles.OPENCODE).volatile_presets == ["todays-date"]
    assert profiles.apply(base, None) is base
    assert base.volatile_presets == []  # the global settings are untouched
    user = Settings(volatile_presets=["current-date"])
    assert profiles.apply(user, profiles.CLAUDE_CODE).volatile_presets == ["current-date", "todays-date", "git-status"]


# -- the agents' own session ids -----------------------------------------------------------


def _sid(data: dict, head=("x",)) -> tuple[str, str]:
    profile = profiles.detect(data, head, Settings())
    return session_id(data, View(shape="chat", head=tuple(head), tools=None, body=()), profile)


def test_claude_code_session_id_from_header_then_user_id_json_then_legacy():
    body = {"metadata": {"user_id": claude_code_user_id("11111111-2222-3333-4444-555555555555")}}
    assert _sid(_proxy(body, claude_code_headers(CC_SESSION))) == (CC_SESSION, "header:x-claude-code-session-id")
    older = {k: v for k, v in claude_code_headers().items() if k != "x-claude-code-session-id"}
    assert _sid(_proxy(body, older)) == ("11111111-2222-3333-4444-555555555555", "metadata:user_id|json:session_id")
    legacy = {"metadata": {"user_id": claude_code_user_id("aaaaaaaa-2222-3333-4444-555555555555", legacy=True)}}
    assert _sid(_proxy(legacy, older)) == ("aaaaaaaa-2222-3333-4444-555555555555",
                                           r"metadata:user_id|re:_session_([A-Za-z0-9-]{8,})$")
    # Neither shape: no id of the agent's own (the session is derived, or named another way).
    for odd in ("{not json", '{"session_id": 7}', "user_abc_account_1", ""):
        assert _sid(_proxy({"metadata": {"user_id": odd}}, older))[1] not in profiles.CLAUDE_CODE.session_sources
    # The SDK path (no headers): the head says Claude Code, user_id carries the session.
    assert _sid(body, head=(billing_block(0),))[0] == "11111111-2222-3333-4444-555555555555"


def test_codex_session_id_from_its_headers_then_prompt_cache_key():
    new = {"originator": "codex_cli_rs", "session-id": "s-new", "thread-id": "t-1"}
    assert _sid(_proxy({}, new)) == ("s-new", "header:session-id")
    assert _sid(_proxy({}, {"originator": "codex_cli_rs", "thread-id": "t-1"})) == ("t-1", "header:thread-id")
    assert _sid(_proxy({}, codex_headers("conv-9"))) == ("conv-9", "header:session_id")
    assert _sid(_proxy({}, {"originator": "codex_cli_rs", "x-client-request-id": "conv-7"})) == (
        "conv-7", "header:x-client-request-id")
    assert _sid(_proxy({"prompt_cache_key": "pck-1"}, {"originator": "codex_cli_rs"})) == (
        "pck-1", "body:prompt_cache_key")


def test_opencode_session_id_from_affinity_or_its_own_header():
    assert _sid(_proxy({}, opencode_headers("ses_abc"))) == ("ses_abc", "header:x-session-affinity")
    assert _sid(_proxy({}, {"user-agent": "opencode/1.0.150", "x-opencode-session": "ses_z"})) == (
        "ses_z", "header:x-opencode-session")


def test_agent_session_ids_are_always_tenant_scoped():
    data = _proxy({}, claude_code_headers())
    raw = _sid(data)[0]
    a = scoped_key(tenant_of({}, api_key_hash="key-a"), raw)
    b = scoped_key(tenant_of({}, api_key_hash="key-b"), raw)
    assert a != b and raw not in a


# -- subagents ------------------------------------------------------------------------------


def _run(stabilizer, body, headers, target=VLLM, call_id=None):
    data = _proxy(body, headers)
    if call_id:
        data["litellm_call_id"] = call_id
    return stabilizer.stabilize_sync(data, "anthropic_messages", target=target)


def test_a_subagent_is_its_own_stream_and_never_a_change_of_the_main_head(tmp_path):
    log = tmp_path / "log.jsonl"
    stabilizer = Stabilizer(Settings(log=str(log)))
    main = _cc_session(4)
    explore = _cc_session(3, seed=9, subagent="Given the user's message, search the codebase.")
    named = _cc_session(2, seed=5, subagent="You review code.")
    order = [(main[0], None), (explore[0], None), (main[1], None), (explore[1], None), (named[0], "agent-7"),
             (main[2], None), (named[1], "agent-7"), (explore[2], None), (main[3], None)]
    for n, (body, agent_id) in enumerate(order):
        _run(stabilizer, body, claude_code_headers(agent_id=agent_id), call_id=f"c{n}")
    drift = [json.loads(line) for line in (flush_logs(), log.read_text())[1].splitlines() if '"drift"' in line]
    assert drift == []
    keys = set(stabilizer.store._data) if hasattr(stabilizer.store, "_data") else None
    data = _proxy(main[0], claude_code_headers())
    view = View(shape="anthropic", head=tuple(b["text"] for b in main[0]["system"]), tools=None, body=())
    sub_view = View(shape="anthropic", head=tuple(b["text"] for b in explore[0]["system"]), tools=None, body=())
    cc = profiles.CLAUDE_CODE
    assert session_stream(data, view, cc) != session_stream(data, sub_view, cc)
    assert session_stream(_proxy(main[0], claude_code_headers(agent_id="a1")), view, cc) == "agent:a1"
    # The billing block and the identity line are shared: the stream is the same every turn.
    assert session_stream(data, view, cc) == session_stream(
        data, View(shape="anthropic", head=tuple(b["text"] for b in main[3]["system"]), tools=None, body=()), cc)
    assert keys is None or len(keys) >= 3


def test_a_real_change_of_the_main_head_is_still_reported(tmp_path):
    log = tmp_path / "log.jsonl"
    stabilizer = Stabilizer(Settings(log=str(log)))
    first, second = _cc_session(2)
    second = copy.deepcopy(second)
    second["system"][-1]["text"] = second["system"][-1]["text"].replace("Platform: linux", "Platform: darwin")
    _run(stabilizer, first, claude_code_headers(), call_id="a")
    out = _run(stabilizer, second, claude_code_headers(), call_id="b")
    assert "Platform: darwin" in out["system"][-1]["text"]
    drift = [json.loads(line) for line in (flush_logs(), log.read_text())[1].splitlines() if '"drift"' in line]
    assert len(drift) == 1 and drift[0]["agent"] == "claude-code"
    assert stabilizer.response_headers("b")["x-litellm-prefix-agent"] == "claude-code"


# -- the billing block -------------------------------------------------------------------------


def test_billing_block_is_removed_for_a_self_hosted_target_and_counted(tmp_path):
    log = tmp_path / "log.jsonl"
    stabilizer = Stabilizer(Settings(log=str(log)))
    outs = [_run(stabilizer, body, claude_code_headers(), call_id=f"r{n}") for n, body in enumerate(_cc_session(3))]
    for out in outs:
        assert not any(b["text"].startswith("x-anthropic-billing-header") for b in out["system"])
        assert out["system"][0]["text"].startswith("You are Claude Code")
        assert out["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert outs[0]["system"] == outs[2]["system"]
    assert stabilizer.stats["billing_removed"] == 3
    records = [json.loads(line) for line in (flush_logs(), log.read_text())[1].splitlines()]
    billing = [r for rec in records for r in rec.get("rules", ()) if r["rule"] == "billing_block"]
    assert len(billing) == 3 and billing[0]["action"] == "removed" and billing[0]["cacheable_tokens_est"] > 1000
    assert all(rec["agent"] == "claude-code" for rec in records)


def test_billing_block_is_left_exactly_as_sent_for_anthropic_first_party():
    stabilizer = Stabilizer(Settings())
    for n, body in enumerate(_cc_session(3)):
        sent = copy.deepcopy(body)
        out = _run(stabilizer, body, claude_code_headers(), target=ANTHROPIC, call_id=f"a{n}")
        assert out["system"][0] == sent["system"][0]
        assert out["system"][0]["text"] == billing_block(n)
    assert stabilizer.stats["billing_removed"] == 0


@pytest.mark.parametrize("target, settings, kept", [
    (Target(provider="anthropic", api_base="https://api.anthropic.com"), Settings(), True),
    (Target(provider="anthropic", api_base="http://127.0.0.1:8080"), Settings(), False),  # llama.cpp's /v1/messages
    (VLLM, Settings(keep_billing_header=True), True),
    (Target(provider="vertex_ai", strips_billing=True), Settings(), True),  # LiteLLM strips it itself
    (Target(provider="openai"), Settings(), False),
])
def test_billing_block_decision_by_target_and_setting(target, settings, kept):
    body = _cc_session(1)[0]
    out = Stabilizer(settings).stabilize_sync(_proxy(body, claude_code_headers()), "anthropic_messages", target=target)
    assert (out["system"][0]["text"] == billing_block(0)) is kept


def test_billing_block_removal_is_idempotent_and_works_on_the_translated_chat_shape():
    stabilizer = Stabilizer(Settings())
    chat = {"model": "m", "messages": [
        {"role": "system", "content": [{"type": "text", "text": billing_block(3)},
                                       {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."}]},
        {"role": "system", "content": billing_block(4)},
        {"role": "user", "content": "hi"}]}
    out = stabilizer.stabilize_sync(copy.deepcopy(chat), "acompletion", target=VLLM)
    assert out["messages"] == [
        {"role": "system", "content": [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."}]},
        {"role": "user", "content": "hi"}]
    again = stabilizer.stabilize_sync(copy.deepcopy(out), "acompletion", target=VLLM)
    assert again["messages"] == out["messages"]


def test_litellm_strip_decision_matches_litellm_provider_configs():
    from litellm_prefix.request.target import litellm_strips_billing

    assert litellm_strips_billing("anthropic_messages", "hosted_vllm/qwen", "hosted_vllm", None) is False
    assert litellm_strips_billing("anthropic_messages", "anthropic/claude-sonnet-4-5", "anthropic", None) is False
    assert litellm_strips_billing("anthropic_messages", "deepseek/deepseek-chat", "deepseek", None) is True
    assert litellm_strips_billing("anthropic_messages", "vertex_ai/claude-sonnet-4", "vertex_ai", None) is True
    # A deployment opted into forwarding /v1/messages untranslated (LiteLLM 1.108: its generic
    # openai_like messages config keeps the block), so the gateway removes it there too.
    assert litellm_strips_billing("anthropic_messages", "hosted_vllm/qwen", "hosted_vllm",
                                  {"supported_endpoints": ["/v1/messages"]}) is False
    assert litellm_strips_billing("acompletion", "hosted_vllm/qwen", "hosted_vllm", None) is False


# -- marks never decide identity or change -----------------------------------------------------


def test_content_hash_ignores_marks_and_the_marked_string_form():
    plain = {"role": "user", "content": "hello"}
    marked = {"role": "user", "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]}
    assert content_hash(plain) == content_hash(marked)
    assert content_hash({"role": "user", "content": "hellp"}) != content_hash(marked)


def _strip_marks(body: dict) -> dict:
    """The request without any mark (a marked one-part text content back to its string)."""
    out = copy.deepcopy(body)

    def strip(value):
        if isinstance(value, dict):
            value.pop("cache_control", None)
            for v in value.values():
                strip(v)
        elif isinstance(value, list):
            for v in value:
                strip(v)

    strip(out)
    for message in out["messages"]:  # the marked string form back to a string
        c = message["content"]
        if isinstance(c, list) and len(c) == 1 and c[0].get("type") == "text" and set(c[0]) == {"type", "text"}:
            message["content"] = c[0]["text"]
    return out


def _move_marks(body: dict, rng: random.Random) -> dict:
    """The same request with the client's marks somewhere else (or nowhere)."""
    out = _strip_marks(body)
    spots = [("system", i) for i in range(len(out["system"]))] + [("tools", i) for i in range(len(out["tools"]))] + \
            [("messages", i) for i in range(len(out["messages"]))]
    for where, i in rng.sample(spots, k=min(len(spots), rng.randint(0, 4))):
        if where == "messages":
            content = out["messages"][i]["content"]
            if isinstance(content, str):
                out["messages"][i]["content"] = [{"type": "text", "text": content, "cache_control": {"type": "ephemeral"}}]
            else:
                content[-1] = {**content[-1], "cache_control": {"type": "ephemeral"}}
        else:
            out[where][i] = {**out[where][i], "cache_control": {"type": "ephemeral"}}
    return out


def _decisions(stabilizer: Stabilizer, bodies, target, log_path):
    outs = []
    for n, body in enumerate(bodies):
        outs.append(_run(stabilizer, body, claude_code_headers(), target=target, call_id=f"m{n}"))
    events = [json.loads(line) for line in (flush_logs(), log_path.read_text())[1].splitlines()] if log_path.exists() else []
    return outs, events


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), date_turn=st.integers(1, 4), status_turn=st.integers(1, 4),
       shuffle_turn=st.integers(1, 4), anthropic=st.booleans())
def test_moving_the_client_marks_changes_no_identity_and_no_decision(tmp_path_factory, seed, date_turn, status_turn,
                                                                      shuffle_turn, anthropic):
    """For any session, marks moved turn by turn: the same session, the same rule events and
    drift, the same bytes after the marks are set aside, and each mark where the client put it."""
    rng = random.Random(seed)
    base = _cc_session(5, seed=seed % 7)
    for n, body in enumerate(base):  # the session's own changes: a date, a git status, MCP order
        text = body["system"][-1]["text"]
        if n >= date_turn:
            text = text.replace("Today's date: 2026-12-01", "Today's date: 2026-12-02")
        if n >= status_turn:
            text = text.replace("M src/app.py", "M src/app.py\nM src/db.py")
        body["system"][-1]["text"] = text
        if n >= shuffle_turn:
            body["tools"] = list(reversed(body["tools"]))
    moved = [_move_marks(body, rng) for body in base]
    target = ANTHROPIC if anthropic else VLLM
    tmp = tmp_path_factory.mktemp("marks")
    outs_a, events_a = _decisions(Stabilizer(Settings(log=str(tmp / "a.jsonl"))),
                                  base, target, tmp / "a.jsonl")
    outs_b, events_b = _decisions(Stabilizer(Settings(log=str(tmp / "b.jsonl"))),
                                  moved, target, tmp / "b.jsonl")
    assert events_a == events_b
    for out_a, out_b, sent in zip(outs_a, outs_b, moved):
        assert _strip_marks(out_a) == _strip_marks(out_b)
        _assert_marks_kept(sent, out_b)


def _marks(body: dict) -> list[tuple]:
    found = []
    for block in body["system"]:
        if "cache_control" in block:
            found.append(("system", block["text"][:40]))
    for tool in body["tools"]:
        if "cache_control" in tool:
            found.append(("tool", tool["name"]))
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, list) and any("cache_control" in part for part in content if isinstance(part, dict)):
            # by the client's content: notes may sit in between, or be folded into it (a self-hosted target)
            found.append(("message", content_hash(unfolded(message))))
    return found


def _assert_marks_kept(sent: dict, out: dict) -> None:
    """Every client mark is still there (system blocks and messages in place; the tool-sort rule
    moves a mark on the last tool to the new last tool, as before)."""
    sent_marks, out_marks = _marks(sent), _marks(out)
    sent_other = [m for m in sent_marks if m[0] != "tool"]
    out_other = [m for m in out_marks if m[0] != "tool"]
    sent_other = [m for m in sent_other if not (m[0] == "system" and m[1].startswith("x-anthropic-billing"))]
    out_other = [m for m in out_other if not (m[0] == "system" and m[1].startswith("x-anthropic-billing"))]
    assert sent_other == out_other
    assert len([m for m in out_marks if m[0] == "tool"]) == len([m for m in sent_marks if m[0] == "tool"])


def test_opencode_and_codex_requests_are_detected_and_keyed_by_their_own_ids():
    stabilizer = Stabilizer(Settings())
    oc = {"model": "m", "messages": [
        {"role": "system", "content": "You are opencode, an interactive CLI tool.\n\n" + opencode_env()},
        {"role": "system", "content": "Instructions from: /home/alice/src/web/AGENTS.md\nUse pnpm."},
        {"role": "user", "content": "hi"}], "tools": openai_tools(TOOL_NAMES[:5])}
    data = _proxy(oc, opencode_headers("ses_1"))
    data["litellm_call_id"] = "oc1"
    stabilizer.stabilize_sync(data, "acompletion", target=VLLM)
    assert stabilizer.response_headers("oc1")["x-litellm-prefix-agent"] == "opencode"
    cx = {"model": "m", "instructions": "You are Codex, a coding agent.", "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "tools": responses_tools(TOOL_NAMES[:5]), "prompt_cache_key": "0199a213"}
    data = _proxy(cx, codex_headers("0199a213"))
    data["litellm_call_id"] = "cx1"
    stabilizer.stabilize_sync(data, "aresponses", target=Target(provider="openai"))
    assert stabilizer.response_headers("cx1")["x-litellm-prefix-agent"] == "codex"


def test_keep_billing_header_per_model_for_a_gateway_in_front_of_anthropic():
    settings = Settings(models={"corp/*": {"keepBillingHeader": True}})
    body = _cc_session(1)[0]
    target = Target(provider="anthropic", api_base="https://llm-gateway.corp.example")
    kept = Stabilizer(settings).stabilize_sync(_proxy(body, claude_code_headers()), "anthropic_messages",
                                               target=target, model_names=("corp/claude",))
    assert kept["system"][0]["text"] == billing_block(0)
    removed = Stabilizer(settings).stabilize_sync(_proxy(body, claude_code_headers()), "anthropic_messages",
                                                  target=target, model_names=("other",))
    assert removed["system"][0]["text"] != billing_block(0)


def test_codex_review_and_compaction_runs_are_their_own_streams():
    data = _proxy({}, {**codex_headers("conv-1"), "x-openai-subagent": "compact"})
    view = View(shape="responses", head=("You are Codex, a coding agent.",), tools=None, body=())
    assert session_id(data, view, profiles.CODEX)[0] == "conv-1"
    assert session_stream(data, view, profiles.CODEX) == "agent:compact"
    # The main loop (it always has tools) is the main stream; the same request without tools and
    # without the header (Codex's automatic compaction) is not (issue 24: it used to land there).
    main = View(shape="responses", head=view.head, tools=({"type": "function", "name": "shell"},), body=())
    assert session_stream(_proxy({}, codex_headers("conv-1")), main, profiles.CODEX) is None
    assert session_stream(_proxy({}, codex_headers("conv-1")), view, profiles.CODEX).startswith("aux:no-tools:")


def test_pi_session_id_and_unknown_agents_keep_litellm_session_ids():
    assert _sid(_proxy({}, {**pi_headers(), "session_id": "pi-s-1"})) == ("pi-s-1", "header:session_id")
    unknown = {"litellm_session_id": "abc12345", **_proxy({}, {"user-agent": "OpenAI/Python 1.99.1"})}
    assert _sid(unknown) == ("abc12345", "litellm_session_id")


def test_a_date_near_the_start_of_the_main_prompt_does_not_split_its_stream():
    def view(prompt):
        return View(shape="anthropic", head=(billing_block(1), "You are Claude Code, Anthropic's official CLI for Claude.",
                                             prompt), tools=None, body=())

    data = _proxy({}, claude_code_headers())
    cc = profiles.CLAUDE_CODE
    day1 = session_stream(data, view("Session started 2026-12-01 23:59:59. You are an interactive agent."), cc)
    day2 = session_stream(data, view("Session started 2026-12-02 00:00:03. You are an interactive agent."), cc)
    other = session_stream(data, view("Session started 2026-12-01 23:59:59. You review pull requests."), cc)
    assert day1 == day2 != other
