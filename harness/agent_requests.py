"""Realistic requests of each coding agent, as they reach the gateway (headers + body).

Shapes follow the agents' sources (see litellm_prefix/request/profiles.py ``source``): Claude Code
2.1.x on ``/v1/messages`` (billing block, identity line, prompt blocks with
``cache_control``, ``<env>``, ``gitStatus:``, MCP tools, the last mark on the newest
message, ``metadata.user_id`` JSON), Codex on ``/v1/responses`` (``originator``,
``session_id`` header, ``prompt_cache_key``, ``<environment_context>`` items), opencode on
chat completions (``opencode/<version>`` user agent, ``x-session-affinity``, indented env
lines, instructions in a second system message), pi (``pi/<version>`` user agent).
"""
from __future__ import annotations

import copy
import hashlib
import json
import random

from harness.realistic import TOOL_NAMES, anthropic_tools, openai_tools, paragraph, responses_tools, shuffled

CC_VERSION = "2.1.90"
CC_SESSION = "5f0c7a8e-3b1d-4c1e-9a57-2f3e8d6b1a90"


def billing_block(turn: int, version: str = CC_VERSION) -> str:
    cch = hashlib.sha256(f"cch-{turn}".encode()).hexdigest()[:5]
    return f"x-anthropic-billing-header: cc_version={version}.a1b; cc_entrypoint=cli; cch={cch};"


def claude_code_headers(session: str = CC_SESSION, agent_id: str | None = None) -> dict[str, str]:
    headers = {
        "user-agent": f"claude-cli/{CC_VERSION} (external, cli)",
        "x-app": "cli",
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27",
        "anthropic-version": "2023-06-01",
        "x-claude-code-session-id": session,
    }
    if agent_id:
        headers["x-claude-code-agent-id"] = agent_id
    return headers


def claude_code_user_id(session: str = CC_SESSION, legacy: bool = False) -> str:
    if legacy:
        return f"user_{'ab' * 32}_account_4d2c9e10-0000-4000-8000-000000000001_session_{session}"
    return json.dumps({"device_id": "d" * 64, "account_uuid": "4d2c9e10-0000-4000-8000-000000000001",
                       "session_id": session})


def claude_code_prompt(rng: random.Random, subagent: str | None = None) -> str:
    if subagent:
        return (f"You are an agent for Claude Code, Anthropic's official CLI for Claude. {subagent}\n\n"
                + "\n\n".join(paragraph(rng, 4) for _ in range(6)))
    return ("You are an interactive agent that helps users with software engineering tasks. Use the instructions "
            "below and the tools available to you to assist the user.\n\n"
            + "\n\n".join(paragraph(rng, 6) for _ in range(24)))


def claude_code_env(date: str = "2026-12-01", cwd: str = "/home/alice/src/api") -> str:
    return ("Here is useful information about the environment you are running in:\n<env>\n"
            f"Working directory: {cwd}\nIs directory a git repo: Yes\nPlatform: linux\nOS Version: Linux 6.8.0\n"
            f"Today's date: {date}\n</env>\nYou are powered by the model named Sonnet 4.5.")


def claude_code_git_status(status: str = "M src/app.py", commits: str = "a1b2c3d fix login\nd4e5f6a add tests") -> str:
    return "\n\n".join([
        "gitStatus: This is the git status at the start of the conversation. Note that this status is a snapshot "
        "in time, and will not update during the conversation.",
        "Current branch: main",
        "Main branch (you will usually use this for PRs): main",
        f"Status:\n{status}",
        f"Recent commits:\n{commits}",
    ])


MCP_TOOLS = ["mcp__github__create_issue", "mcp__github__list_prs", "mcp__linear__search", "mcp__sentry__events"]


def claude_code_tools(mcp_order: list[str] | None = None) -> list[dict]:
    tools = anthropic_tools(TOOL_NAMES[:12] + (mcp_order or MCP_TOOLS))
    return tools


def mark_last(messages: list[dict]) -> list[dict]:
    """Claude Code's moving mark: only the newest message carries ``cache_control`` (string → one text part)."""
    out = copy.deepcopy(messages)
    last = out[-1]
    content = last["content"]
    if isinstance(content, str):
        last["content"] = [{"type": "text", "text": content, "cache_control": {"type": "ephemeral"}}]
    else:
        content[-1] = {**content[-1], "cache_control": {"type": "ephemeral"}}
    return out


def claude_code_body(turn: int, messages: list[dict], *, prompt: str, env: str, git: str,
                     tools: list[dict], billing: bool = True, session: str = CC_SESSION, model: str = "cc-model",
                     stream: bool = False) -> dict:
    system = []
    if billing:
        system.append({"type": "text", "text": billing_block(turn)})
    system += [
        {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
         "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": prompt + "\n\n" + env + "\n\n" + git, "cache_control": {"type": "ephemeral"}},
    ]
    return {"model": model, "max_tokens": 32, "system": system, "messages": mark_last(messages), "tools": tools,
            "metadata": {"user_id": claude_code_user_id(session)}, "stream": stream}


def codex_headers(session: str = "0199a213-81c0-7800-8aa1-bbab2a035a53") -> dict[str, str]:
    return {"originator": "codex_cli_rs", "user-agent": "codex_cli_rs/0.149.0 (Ubuntu 24.4.0; x86_64) xterm-256color",
            "session_id": session, "openai-beta": "responses=experimental"}


def opencode_headers(session: str = "ses_7a1c2e9f0ffe1q2w3e4r5t6y7u") -> dict[str, str]:
    return {"user-agent": "opencode/1.0.150 ai-sdk/provider-utils/3.0.17 runtime/bun/1.3.4",
            "x-session-affinity": session, "x-session-id": session}


def opencode_env(date: str = "Tue Dec 01 2026") -> str:
    return ("Here is some useful information about the environment you are running in:\n<env>\n"
            "  Working directory: /home/alice/src/web\n  Is directory a git repo: yes\n  Platform: linux\n"
            f"  Today's date: {date}\n</env>")


def pi_headers() -> dict[str, str]:
    return {"user-agent": "pi/0.74.2 (linux; node/v22.11.0; x64)"}


def gemini_native(request: dict, started_ms: int = 1796534018000) -> dict:
    """Gemini CLI's native ``generateContent`` body for one of its requests in chat form (as LiteLLM
    translated it for a chat deployment: ``tests/fixtures/agents_gq/gemini-cli.json``), LiteLLM's
    translation undone: the system message as ``systemInstruction``, each user message as a ``user``
    content (text parts), each assistant message as a ``model`` content (its text, then one
    ``functionCall`` per tool call, with the id Gemini CLI gives it: ``<name>_<ms>_<n>``, from
    ``started_ms`` on), each run of tool messages as one ``user`` content of ``functionResponse``
    parts (Gemini CLI sends each response twice, as the chat form shows), the tools as one
    ``functionDeclarations`` object (``parametersJsonSchema``)."""
    system = [m for m in request["messages"] if m["role"] == "system"]
    contents: list[dict] = []
    calls: dict[str, list[str]] = {}  # chat tool-call id -> Gemini CLI's ids, oldest first
    turn = 0
    for message in request["messages"]:
        role, content = message["role"], message.get("content")
        if role == "system":
            continue
        if role == "user":
            texts = [content] if isinstance(content, str) else [p["text"] for p in content if p.get("type") == "text"]
            contents.append({"parts": [{"text": t} for t in texts], "role": "user"})
        elif role == "assistant":
            turn += 1
            parts = [{"text": content}] if isinstance(content, str) and content else []
            for n, call in enumerate(message.get("tool_calls") or []):
                name = call["function"]["name"]
                call_id = f"{name}_{started_ms + 1000 * turn}_{n}"
                calls.setdefault(call["id"], []).append(call_id)
                parts.append({"functionCall": {"id": call_id, "args": json.loads(call["function"]["arguments"]),
                                               "name": name}})
            contents.append({"parts": parts, "role": "model"})
        elif role == "tool":
            ids = calls.get(message["tool_call_id"]) or [message["tool_call_id"]]
            name = message["tool_call_id"].removeprefix("call_")
            part = {"functionResponse": {"name": name, "response": json.loads(message["content"]), "id": ids[-1]}}
            if contents and contents[-1]["role"] == "user" and all("functionResponse" in p for p in contents[-1]["parts"]):
                contents[-1]["parts"].append(part)
            else:
                contents.append({"parts": [part], "role": "user"})
    body: dict = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": [{"text": m["content"]} for m in system]}
    if request.get("tools"):
        body["tools"] = [{"functionDeclarations": [
            {"name": t["function"]["name"], "description": t["function"].get("description", ""),
             "parametersJsonSchema": t["function"].get("parameters") or {"type": "object", "properties": {}}}
            for t in request["tools"]]}]
    body["generationConfig"] = {"temperature": 1, "topP": 0.95, "topK": 64, "thinkingConfig": {"includeThoughts": True}}
    return body


__all__ = [
    "TOOL_NAMES", "billing_block", "gemini_native", "claude_code_body", "claude_code_env", "claude_code_git_status",
    "claude_code_headers", "claude_code_prompt", "claude_code_tools", "claude_code_user_id", "codex_headers",
    "mark_last", "openai_tools", "opencode_env", "opencode_headers", "pi_headers", "responses_tools", "shuffled",
]
