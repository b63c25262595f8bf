"""The plugin's response headers (``x-litellm-prefix-head``, ``x-litellm-prefix-agent``) on every route
the hooks see, through the test session's real proxy: chat completions, ``/v1/messages``,
``/v1/responses``, Gemini's native ``generateContent`` and ``streamGenerateContent`` (LiteLLM turns
those into a chat call of its own, with another call id: the request's metadata names it), and the
pass-through routes, whose raw body no hook rewrites (the headers say what it showed).

Each request names its agent the way the agent does (its user agent or head), and the header says
which profile the plugin found; the head header is the fingerprint of the head the plugin saw.
"""
from __future__ import annotations

import json

import httpx
import pytest

from harness.procs import PASS_THROUGH
from harness.real_agents.harness import GROUP_ON

GEMINI_HEAD = "You are Gemini CLI, an autonomous CLI agent specializing in software engineering tasks."
QWEN_UA = "QwenCode/0.24.4 (linux; x64)"
GEMINI_UA = "GeminiCLI/0.61.0/scripted-agents (linux; x64; terminal)"


def _gemini_body(prompt: str) -> dict:
    return {"contents": [{"role": "user", "parts": [{"text": prompt}]}],
            "systemInstruction": {"parts": [{"text": GEMINI_HEAD}]}}


def _headers(response: httpx.Response) -> dict[str, str]:
    assert response.status_code == 200, response.text[:500]
    return {k: v for k, v in response.headers.items() if k.startswith("x-litellm-prefix-")}


def _check(response: httpx.Response, agent: str) -> None:
    headers = _headers(response)
    assert headers.get("x-litellm-prefix-agent") == agent, headers
    assert len(headers.get("x-litellm-prefix-head", "")) >= 8, headers


def test_chat_completions(proxy):
    body = {"model": "chat-model", "messages": [{"role": "system", "content": "You are Qwen Code, an interactive "
                                                "CLI agent developed by Alibaba Group."}, {"role": "user", "content": "hi"}]}
    _check(proxy.post("/v1/chat/completions", body, **{"user-agent": QWEN_UA}), "qwen-code")


def test_anthropic_messages(proxy):
    body = {"model": "claude-model", "max_tokens": 16, "system": "You are Claude Code, Anthropic's official CLI for Claude.",
            "messages": [{"role": "user", "content": "hi"}]}
    _check(proxy.post("/v1/messages", body, **{"user-agent": "claude-cli/2.1.332 (external, cli)", "x-app": "cli"}),
           "claude-code")


def test_responses(proxy):
    body = {"model": "resp-model", "instructions": "You are Codex, a coding agent based on GPT-5.", "input": "hi"}
    _check(proxy.post("/v1/responses", body, originator="codex_exec"), "codex")


@pytest.mark.parametrize("method", ["generateContent", "streamGenerateContent?alt=sse"])
def test_gemini_native_routes(proxy, method):
    """LiteLLM's google_genai adapter calls ``litellm.acompletion`` itself: the deployment hook sees
    that call, under a call id of its own; the headers hook the client's request, under its id."""
    response = proxy.client.post(f"/v1beta/models/{GROUP_ON}:{method}", json=_gemini_body(f"(agent: h) {method}"),
                                 headers={"x-goog-api-key": proxy.key, "user-agent": GEMINI_UA})
    _check(response, "gemini-cli")
    if method.startswith("stream"):
        assert "data: " in response.text


def test_the_headers_of_the_gemini_route_are_those_of_the_call_the_plugin_took(proxy):
    """The head header on the native route is the head of the chat call LiteLLM made of it: the same
    request through the chat route gets the same one."""
    native = proxy.client.post(f"/v1beta/models/{GROUP_ON}:generateContent", json=_gemini_body("(agent: h) same"),
                               headers={"x-goog-api-key": proxy.key, "user-agent": GEMINI_UA})
    chat = proxy.post("/v1/chat/completions", {"model": GROUP_ON, "messages": [
        {"role": "system", "content": GEMINI_HEAD}, {"role": "user", "content": "(agent: h) same"}]},
        **{"user-agent": GEMINI_UA})
    assert _headers(native)["x-litellm-prefix-head"] == _headers(chat)["x-litellm-prefix-head"]


def test_pass_through_chat(proxy, upstream):
    body = {"model": "upstream-chat", "messages": [{"role": "system", "content": "You are Qwen Code, an interactive CLI "
                                                    "agent developed by Alibaba Group."}, {"role": "user", "content": "hi"}]}
    upstream.take()
    response = proxy.post(f"{PASS_THROUGH}/v1/chat/completions", body, **{"user-agent": QWEN_UA})
    _check(response, "qwen-code")
    sent = [json.loads(r["body"]) for r in upstream.take()]
    assert sent == [body]  # the raw body went on as the client sent it


def test_pass_through_gemini(proxy, upstream):
    upstream.take()
    response = proxy.post(f"{PASS_THROUGH}/gemini/generate", _gemini_body("hi"),
                          **{"user-agent": GEMINI_UA})
    _check(response, "gemini-cli")
    assert [json.loads(r["body"]) for r in upstream.take()] == [_gemini_body("hi")]
