"""End to end: the session's real LiteLLM proxy (with the plugin) in front of the provider emulators
(harness/providers), one appended two-turn conversation per route, not streamed and streamed.

Each second turn must read from the emulator's cache, and the usage LiteLLM answers must carry the
emulator's numbers (what LiteLLM's cost tracking and the plugin's measurement read). Every
conversation carries a new nonce in its system prompt and first prompt, so no other test's entry
(and no other session the plugin remembers) can serve it.
"""
from __future__ import annotations

import json
import uuid

import pytest

from harness.providers.wire import parse_sse
from harness.realistic import anthropic_tools, openai_tools, paragraph, responses_tools

TOOLS = ["bash", "read"]
MARK = {"type": "ephemeral"}


def _nonce() -> str:
    return uuid.uuid4().hex[:12]


def _system(nonce: str) -> str:
    import random

    return f"[{nonce}] You are a careful coding agent.\n" + paragraph(random.Random(nonce), 120)


def _records(providers, nonce: str) -> list[dict]:
    return [r for r in providers.records() if nonce in json.dumps(r.get("body"))]


def _post(proxy, path: str, body: dict, nonce: str, stream: bool):
    response = proxy.post(path, body, **{"x-session-id": f"e2e-providers-{nonce}"})
    return parse_sse(response.text) if stream else response.json()


def _last_usage(events: list, key: str = "usage") -> dict:
    return [d[key] for _, d in events if isinstance(d, dict) and d.get(key)][-1]


def _two_reads(providers, nonce: str, field) -> tuple[dict, dict]:
    """The emulator's usage of the conversation's two requests; the second reads from the cache."""
    records = _records(providers, nonce)
    assert [r["status"] for r in records] == [200, 200], [r.get("error") for r in records]
    first, second = (r["usage"] for r in records)
    assert field(first) == 0 < field(second)
    return first, second


@pytest.mark.parametrize("stream", [False, True])
def test_chat_to_anthropic_reads_the_first_turn_from_the_cache(proxy, providers, stream):
    nonce = _nonce()
    messages = [{"role": "system", "content": _system(nonce)},
                {"role": "user", "content": [{"type": "text", "text": f"({nonce}) first", "cache_control": MARK}]}]
    extra = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    body = {"model": "hosted-anthropic", "messages": messages, "tools": openai_tools(TOOLS), **extra}
    _post(proxy, "/v1/chat/completions", body, nonce, stream)
    messages = [messages[0], {"role": "user", "content": f"({nonce}) first"}, {"role": "assistant", "content": "done"},
                {"role": "user", "content": [{"type": "text", "text": "second", "cache_control": MARK}]}]
    out = _post(proxy, "/v1/chat/completions", {**body, "messages": messages}, nonce, stream)
    _, second = _two_reads(providers, nonce, lambda u: u["cache_read_input_tokens"])
    usage = _last_usage(out) if stream else out["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == second["cache_read_input_tokens"]
    assert usage["prompt_tokens"] == (second["input_tokens"] + second["cache_read_input_tokens"]
                                      + second["cache_creation_input_tokens"])


@pytest.mark.parametrize("stream", [False, True])
def test_messages_to_anthropic_reads_the_first_turn_from_the_cache(proxy, providers, stream):
    nonce = _nonce()
    body = {"model": "hosted-anthropic", "max_tokens": 100, "stream": stream, "tools": anthropic_tools(TOOLS),
            "system": [{"type": "text", "text": _system(nonce), "cache_control": MARK}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": f"({nonce}) first", "cache_control": MARK}]}]}
    _post(proxy, "/v1/messages", body, nonce, stream)
    body["messages"] = [{"role": "user", "content": f"({nonce}) first"}, {"role": "assistant", "content": "done"},
                        {"role": "user", "content": [{"type": "text", "text": "second", "cache_control": MARK}]}]
    out = _post(proxy, "/v1/messages", body, nonce, stream)
    _, second = _two_reads(providers, nonce, lambda u: u["cache_read_input_tokens"])
    usage = next(d["message"]["usage"] for _, d in out if d.get("type") == "message_start") if stream else out["usage"]
    assert usage["cache_read_input_tokens"] == second["cache_read_input_tokens"]
    assert usage["cache_creation_input_tokens"] == second["cache_creation_input_tokens"]


@pytest.mark.parametrize("stream", [False, True])
def test_chat_to_gpt_5_6_reads_the_implicit_breakpoint_of_the_first_turn(proxy, providers, stream):
    nonce = _nonce()
    messages = [{"role": "system", "content": _system(nonce)}, {"role": "user", "content": f"({nonce}) first"}]
    extra = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    body = {"model": "hosted-openai", "messages": messages, "tools": openai_tools(TOOLS), **extra}
    _post(proxy, "/v1/chat/completions", body, nonce, stream)
    body["messages"] = messages + [{"role": "assistant", "content": "done"}, {"role": "user", "content": "second"}]
    out = _post(proxy, "/v1/chat/completions", body, nonce, stream)
    first, second = _two_reads(providers, nonce, lambda u: u["prompt_tokens_details"]["cached_tokens"])
    assert first["prompt_tokens_details"]["cache_write_tokens"] > 0
    usage = _last_usage(out) if stream else out["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == second["prompt_tokens_details"]["cached_tokens"]
    assert usage["prompt_tokens_details"]["cache_write_tokens"] == second["prompt_tokens_details"]["cache_write_tokens"]


@pytest.mark.parametrize("stream", [False, True])
def test_responses_to_gpt_5_6_reads_the_implicit_breakpoint_of_the_first_turn(proxy, providers, stream):
    nonce = _nonce()
    first_input = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"({nonce}) first"}]}]
    body = {"model": "hosted-openai", "instructions": _system(nonce), "input": first_input,
            "tools": responses_tools(TOOLS), "stream": stream}
    _post(proxy, "/v1/responses", body, nonce, stream)
    body["input"] = first_input + [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "second"}]}]
    out = _post(proxy, "/v1/responses", body, nonce, stream)
    _, second = _two_reads(providers, nonce, lambda u: u["input_tokens_details"]["cached_tokens"])
    usage = next(d["response"]["usage"] for _, d in out if d.get("type") == "response.completed") if stream else out["usage"]
    assert usage["input_tokens_details"]["cached_tokens"] == second["input_tokens_details"]["cached_tokens"]
    assert usage["input_tokens"] == second["input_tokens"]


@pytest.mark.parametrize("stream", [False, True])
def test_chat_to_gemini_reads_the_first_turn_implicitly(proxy, providers, stream):
    nonce = _nonce()
    messages = [{"role": "system", "content": _system(nonce)}, {"role": "user", "content": f"({nonce}) first"}]
    extra = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    body = {"model": "hosted-gemini", "messages": messages, "tools": openai_tools(TOOLS), **extra}
    _post(proxy, "/v1/chat/completions", body, nonce, stream)
    body["messages"] = messages + [{"role": "assistant", "content": "done"}, {"role": "user", "content": "second"}]
    out = _post(proxy, "/v1/chat/completions", body, nonce, stream)
    _, second = _two_reads(providers, nonce, lambda u: u["cachedContentTokenCount"])
    usage = _last_usage(out) if stream else out["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == second["cachedContentTokenCount"]
    assert usage["prompt_tokens"] == second["promptTokenCount"]


@pytest.mark.parametrize("stream", [False, True])
def test_native_gemini_route_reads_the_first_turn_implicitly(proxy, providers, stream):
    nonce = _nonce()
    contents = [{"role": "user", "parts": [{"text": f"({nonce}) first"}]}]
    body = {"systemInstruction": {"parts": [{"text": _system(nonce)}]}, "contents": contents,
            "tools": [{"functionDeclarations": [{"name": "run_shell_command", "description": "Run a command.",
                                                 "parametersJsonSchema": {"type": "object", "properties": {
                                                     "command": {"type": "string"}}}}]}]}
    path = ("/v1beta/models/hosted-gemini:streamGenerateContent?alt=sse" if stream
            else "/v1beta/models/hosted-gemini:generateContent")
    _post(proxy, path, body, nonce, stream)
    body["contents"] = contents + [{"role": "model", "parts": [{"text": "done"}]},
                                   {"role": "user", "parts": [{"text": "second"}]}]
    out = _post(proxy, path, body, nonce, stream)
    _, second = _two_reads(providers, nonce, lambda u: u["cachedContentTokenCount"])
    usage = _last_usage(out, "usageMetadata") if stream else out["usageMetadata"]
    assert usage["cachedContentTokenCount"] == second["cachedContentTokenCount"]
    assert usage["promptTokenCount"] == second["promptTokenCount"]


GEMINI_CLI_HEAD = "You are Gemini CLI, an autonomous CLI agent specializing in software engineering tasks."
BRANCH = "\u251c\u2500\u2500\u2500"  # the folder tree's "├───"


def _session_context(nonce: str, day: str, *files: str) -> str:
    """Gemini CLI 0.61's first-message context (getEnvironmentContext), for a workspace of its own."""
    entries = "".join(f"{BRANCH}{name}\n" for name in files)
    return (f"<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
            f"Today's date is {day} (formatted according to the user's locale).\nMy operating system is: linux\n"
            f"The project's temporary directory is: /home/dev/.gemini/tmp/{nonce}\n"
            f"- **Workspace Directories:**\n  - /home/dev/{nonce}/ws\n- **Directory Structure:**\n\n"
            f"Showing up to 200 items (files + folders).\n\n/home/dev/{nonce}/ws/\n{entries}\u2514\u2500\u2500\u2500.git/...\n"
            f"\n\n</session_context>")


def test_native_gemini_route_to_gemini_sends_the_first_context_on_a_resume(proxy, providers):
    """Gemini CLI on its native route to a Gemini deployment (LiteLLM forwards ``contents`` as they came):
    resumed the next day after a file was added, it re-renders its ``<session_context>``; the upstream
    gets the first day's context and the new date and tree as a note after the new prompt, every other
    content as sent (the emulator's record is what LiteLLM sent)."""
    nonce = _nonce()
    headers = {"user-agent": "GeminiCLI-tui/0.61.0/gemini-2.5-flash (linux; x64; terminal)"}
    path = "/v1beta/models/hosted-gemini:generateContent"
    call = {"functionCall": {"id": f"run_shell_command_{int(uuid.uuid4().int % 10**13)}_0",
                             "args": {"command": "git status --short"}, "name": "run_shell_command"}}
    answer = {"functionResponse": {"name": "run_shell_command", "response": {"output": "Output: (empty)"},
                                   "id": call["functionCall"]["id"]}}
    first = {"parts": [{"text": _session_context(nonce, "Thursday, December 3, 2026", "app.py", "README.md")},
                       {"text": f"({nonce}) Please look at this project."}], "role": "user"}
    body = {"systemInstruction": {"parts": [{"text": f"{GEMINI_CLI_HEAD}\n\n{_system(nonce)}"}]},
            "tools": [{"functionDeclarations": [{"name": "run_shell_command", "description": "Run a command.",
                                                 "parametersJsonSchema": {"type": "object", "properties": {
                                                     "command": {"type": "string"}}}}]}],
            "contents": [first], "generationConfig": {"temperature": 1}}
    proxy.post(path, body, **headers)
    body["contents"] = [first, {"parts": [call], "role": "model"}, {"parts": [answer, answer], "role": "user"}]
    proxy.post(path, body, **headers)
    resumed = {**first, "parts": [{"text": _session_context(nonce, "Friday, December 4, 2026", "app.py", "notes.md",
                                                            "README.md")}, first["parts"][1]]}
    prompt = {"parts": [{"text": "(agent: gemini-cli) What changed?"}], "role": "user"}
    body["contents"] = [resumed, *body["contents"][1:], {"parts": [{"text": "looked"}], "role": "model"}, prompt]
    proxy.post(path, body, **headers)

    records = _records(providers, nonce)
    assert [r["status"] for r in records] == [200, 200, 200], [r.get("error") for r in records]
    sent = records[-1]["body"]
    assert sent["contents"][0] == first  # the first day's context, byte for byte
    assert sent["contents"][1:-1] == body["contents"][1:-1]  # the call, both responses, the answer
    last = sent["contents"][-1]["parts"]
    assert len(last) == 1 and last[0]["text"].startswith(prompt["parts"][0]["text"] + "\n\n")
    note = last[0]["text"]
    assert "Today's date is Friday, December 4, 2026" in note and f"{BRANCH}notes.md" in note
    assert records[-1]["usage"]["cachedContentTokenCount"] > 0  # the first day's prefix is read
