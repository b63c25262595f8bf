"""Qwen Code 0.15.10 and Gemini CLI 0.61.0 profiles, on requests recorded from the real CLIs.

The fixtures (tests/fixtures/agents_gq/) are what each CLI sent through a LiteLLM proxy with the
plugin off, Gemini's Google-native request already translated to chat completions by LiteLLM (the
shape the plugin sees): a session of three prompts (continued, resumed on the next calendar day),
a second session, and a prompt that runs a subagent. System prompts and tool descriptions are cut
(their openings kept); the request headers are the ones each CLI sent to the proxy.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.agent_requests import claude_code_headers, codex_headers, opencode_headers, pi_headers
from litellm_prefix.measure.sinks import flush_logs
from litellm_prefix.request import profiles
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.session import session_id, session_stream, workspace
from litellm_prefix.request.target import Target
from litellm_prefix.request.wire import chat
from litellm_prefix.settings import Settings
from tests.support import FIXTURES

AGENTS_GQ = FIXTURES / "agents_gq"
VLLM = Target(model="hosted_vllm/scripted", provider="hosted_vllm")


def _load(name: str) -> dict:
    data = json.loads((AGENTS_GQ / f"{name}.json").read_text(encoding="utf-8"))
    for body in data["requests"].values():
        body["tools"] = data["tool_sets"][body["tools"]]
    return data


QWEN = _load("qwen-code")
GEMINI = _load("gemini-cli")
AGENTS = {"qwen-code": QWEN, "gemini-cli": GEMINI}


def _proxy(body: dict, headers: dict) -> dict:
    return {**copy.deepcopy(body), "proxy_server_request": {"headers": dict(headers), "body": {}}}


def _detect(data: dict, body: dict) -> str | None:
    profile = profiles.detect(data, chat.read(body).head, Settings())
    return profile.name if profile else None


# -- detection -------------------------------------------------------------------------------


@pytest.mark.parametrize("headers, expected", [
    (QWEN["headers"], "qwen-code"),
    ({"user-agent": "QwenCode/0.14.2 (darwin; arm64)"}, "qwen-code"),
    # DashScope's provider (Qwen OAuth, dashscope base URLs) repeats it in its own header.
    ({"user-agent": "OpenAI/JS 5.11.0", "x-dashscope-useragent": "QwenCode/0.15.10 (win32; x64)"}, "qwen-code"),
    (GEMINI["headers"], "gemini-cli"),
    ({"user-agent": "GeminiCLI/0.61.0/gemini-2.5-pro (darwin; arm64; terminal)"}, "gemini-cli"),
    ({"user-agent": "GeminiCLI-acp-zed/0.61.0/gemini-2.5-flash (linux; x64; terminal)"}, "gemini-cli"),
    ({"user-agent": "CloudCodeVSCode/0.61.0 (aidev_client; os_type=Linux; os_version=6.8; arch=x64; "
                    "host_path=VSCode/1.99.0; proxy_client=geminicli)"}, "gemini-cli"),
    # The SDKs underneath say nothing about the agent.
    ({"user-agent": "google-genai-sdk/1.30.0 gl-node/v20.20.2", "x-goog-api-client": "google-genai-sdk/1.30.0"}, None),
    ({k: v for k, v in QWEN["headers"].items() if k != "user-agent"}, None),
    ({"user-agent": "QwenCodeHelper 1.0"}, None),
    ({"user-agent": "my-GeminiCLI-wrapper/1.0"}, None),
])
def test_qwen_code_and_gemini_cli_are_recognised_from_their_request_headers(headers, expected):
    body = {"messages": [{"role": "system", "content": "You are a helpful assistant."}]}
    assert _detect(_proxy(body, headers), body) == expected


@pytest.mark.parametrize("agent, name", [(a, n) for a, data in AGENTS.items() for n in data["requests"]
                                         if not (a == "qwen-code" and "subagent" in n)])
def test_recorded_requests_are_recognised_from_their_head_alone(agent, name):
    """The SDK path (no headers): the system prompt's opening says which agent it is. Gemini CLI's
    generalist subagent opens with the main agent's identity line; Qwen Code's subagents have a head
    of their own (they are recognised by the header on the proxy)."""
    body = AGENTS[agent]["requests"][name]
    assert _detect({}, body) == agent


@pytest.mark.parametrize("agent", list(AGENTS))
def test_recorded_requests_are_recognised_from_headers_whatever_their_head(agent):
    data = AGENTS[agent]
    for body in data["requests"].values():
        assert _detect(_proxy(body, data["headers"]), body) == agent


def test_the_new_signatures_match_only_their_own_agent():
    heads = {
        "qwen-code": chat.read(QWEN["requests"]["a1_first"]).head[0],
        "gemini-cli": chat.read(GEMINI["requests"]["a1_first"]).head[0],
        "gemini-cli-subagent": chat.read(GEMINI["requests"]["d_subagent"]).head[0],
        "gemini-cli-0.1": "You are an interactive CLI agent specializing in software engineering tasks. Your primary "
                          "goal is to help users safely and efficiently",
    }
    assert profiles._profiles_matching(heads["qwen-code"]) == {"qwen-code"}
    for key in ("gemini-cli", "gemini-cli-subagent", "gemini-cli-0.1"):
        assert profiles._profiles_matching(heads[key]) == {"gemini-cli"}, key
    # Neither matches a look-alike opening of another agent.
    for other in ("You are Qwen Code's reviewer.", "You are an interactive CLI agent.", "You are Gemini, a model."):
        assert profiles._profiles_matching(other) == frozenset(), other


@pytest.mark.parametrize("headers, expected", [
    (claude_code_headers(), "claude-code"),
    (codex_headers(), "codex"),
    (opencode_headers(), "opencode"),
    (pi_headers(), "pi"),
])
def test_the_other_agents_are_still_recognised_as_before(headers, expected):
    # Their header, with a Qwen Code or Gemini CLI head: the header wins, as for every profile.
    for data in AGENTS.values():
        body = data["requests"]["a1_first"]
        assert _detect(_proxy(body, headers), body) == expected


def test_both_profiles_can_be_forced_by_model_glob():
    settings = Settings(profiles={"force": {"qwen*": "qwen-code", "gemini-*": "gemini-cli"}})
    assert profiles.detect({}, ("You are a helpful assistant.",), settings, ("qwen3-coder",)).name == "qwen-code"
    assert profiles.detect({}, ("x",), settings, ("gemini-2.5-pro",)).name == "gemini-cli"


# -- sessions and streams ----------------------------------------------------------------------


def _view(body: dict):
    return chat.read(body)


@pytest.mark.parametrize("agent, expected", [
    ("qwen-code", "/home/dev/work/qwen-code/off/ws-a"),
    ("gemini-cli", "/home/dev/work/gemini-cli/off/ws-a"),
])
def test_the_workspace_is_read_from_the_agents_context_block(agent, expected):
    profile = profiles.BY_NAME[agent]
    for name in ("a1_first", "a2_resumed", "a3_next_day"):
        assert workspace(_view(AGENTS[agent]["requests"][name]), profile) == expected
    other = workspace(_view(AGENTS[agent]["requests"]["b1_other_session"]), profile)
    assert other.endswith("/ws-b")


def test_qwen_code_subagents_are_streams_of_their_own_and_the_main_stream_holds_across_prompts():
    profile = profiles.QWEN_CODE
    reqs = QWEN["requests"]

    def stream(name):
        return session_stream(_proxy(reqs[name], QWEN["headers"]), _view(reqs[name]), profile)

    # The main stream: the first prompt after the context block, the same on every turn, resumed or not.
    assert stream("a1_first") == stream("a1_last") == stream("a2_resumed") == stream("a3_next_day")
    assert stream("d_main") == stream("d_main_after")
    assert stream("d_subagent") == stream("d_subagent_2")
    assert len({stream("a1_first"), stream("d_main"), stream("d_subagent")}) == 3


def _drift(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in (flush_logs(), log.read_text())[1].splitlines() if '"drift"' in line]


@pytest.mark.parametrize("agent, order", [
    ("qwen-code", ["d_main", "d_subagent", "d_subagent_2", "d_main_after"]),
    ("gemini-cli", ["d_main", "d_main_2", "d_subagent", "d_subagent_2", "d_main_after"]),
])
def test_a_subagent_never_reads_as_a_change_of_the_main_head(tmp_path, agent, order):
    log = tmp_path / "log.jsonl"
    stabilizer = Stabilizer(Settings(log=str(log)))
    data = AGENTS[agent]
    for n, name in enumerate(order):
        request = _proxy(data["requests"][name], data["headers"])
        request["litellm_call_id"] = f"c{n}"
        stabilizer.stabilize_sync(request, "acompletion", target=VLLM)
        assert stabilizer.response_headers(f"c{n}")["x-litellm-prefix-agent"] == agent
    assert _drift(log) == []


@pytest.mark.parametrize("agent", list(AGENTS))
def test_a_real_change_of_the_main_head_is_still_reported(tmp_path, agent):
    log = tmp_path / "log.jsonl"
    stabilizer = Stabilizer(Settings(log=str(log)))
    data = AGENTS[agent]
    first = data["requests"]["a1_last"]
    changed = copy.deepcopy(data["requests"]["a1_last"])
    system = changed["messages"][0]
    system["content"] += "\n- Never push to a remote repository."  # an instruction file edited mid-session
    stabilizer.stabilize_sync({**_proxy(first, data["headers"]), "litellm_call_id": "a"}, "acompletion", target=VLLM)
    out = stabilizer.stabilize_sync({**_proxy(changed, data["headers"]), "litellm_call_id": "b"}, "acompletion",
                                    target=VLLM)
    assert out["messages"][0]["content"].endswith("\n- Never push to a remote repository.")
    drift = _drift(log)
    assert len(drift) == 1 and drift[0]["agent"] == agent


def _aux_request(agent: str, system: str | None, last_user: str | None) -> dict:
    body = copy.deepcopy(AGENTS[agent]["requests"]["a1_last"])
    if system is not None:
        body["messages"][0]["content"] = system
    if last_user is not None:
        body["messages"].append({"role": "user", "content": last_user})
    body.pop("tools")
    return body


@pytest.mark.parametrize("agent, system, last_user, kind", [
    ("qwen-code", "Generate a concise, sentence-case title (3-7 words) that captures what this "
                  "programming-assistant session is about.", None, "title"),
    ("qwen-code", "\nYou are the component that summarizes internal chat history into a given structure.", None,
     "compaction"),
    ("gemini-cli", "\nYou are a specialized system component responsible for distilling chat history into a "
                   "structured XML <state_snapshot>.", None, "compaction"),
    ("gemini-cli", "You are a diagnostic agent that determines whether a conversational AI assistant is stuck in an "
                   "unproductive loop.", None, "loop-check"),
    ("gemini-cli", None, "Summarize the user's primary intent or goal in this conversation in ONE sentence "
                         "(max 80 characters).", "summary"),
])
def test_auxiliary_calls_are_streams_of_their_own(agent, system, last_user, kind):
    profile = profiles.BY_NAME[agent]
    main = AGENTS[agent]["requests"]["a1_last"]
    aux = _aux_request(agent, system, last_user)
    main_stream = session_stream(_proxy(main, {}), _view(main), profile)
    aux_stream = session_stream(_proxy(aux, {}), _view(aux), profile)
    assert main_stream is None or "aux:" not in main_stream
    assert aux_stream is not None and f"aux:{kind}" in aux_stream


@pytest.mark.parametrize("agent", list(AGENTS))
def test_no_agent_session_id_is_claimed_where_the_agent_sends_none(agent):
    """Neither CLI sends a session id to an OpenAI-compatible or Gemini-native gateway: the key is derived."""
    data = AGENTS[agent]
    body = data["requests"]["a2_resumed"]
    _, source = session_id(_proxy(body, data["headers"]), _view(body), profiles.BY_NAME[agent])
    assert source == "derived"
