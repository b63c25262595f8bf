"""End to end, on every LiteLLM release `make test` runs (README, "LiteLLM versions"): where a
LiteLLM release does itself what a rule or hint of ours does, the upstream gets the same bytes.

The overlaps (``target.litellm_does``): mid-conversation system messages (LiteLLM places them
per model; our rule converts them only where LiteLLM would hoist them or the deployment
declares no support), Claude Code's billing block (left to LiteLLM where its provider config
strips it, removed by us elsewhere), ``prompt_cache_key`` from Claude Code's session id (LiteLLM's
``/v1/messages`` bridges fill it; our hint never sets a key on that route), and the session id
LiteLLM's router and pod discovery read (given once, by ``affinity``).

Each request's upstream body is cut to the fields these decide and compared with one expected
byte string (``fixtures/litellm_versions_upstream.json``), the same file for every release.
"""
from __future__ import annotations

import json
import os

from tests.support import FIXTURES

EXPECTED = FIXTURES / "litellm_versions_upstream.json"
BILLING = "x-anthropic-billing-header: cc_version=2.1.37.abc; cc_entrypoint=cli; cch=0f3a9;"
CLAUDE_CODE_USER_ID = json.dumps({"device_id": "d" * 64, "account_uuid": "",
                                  "session_id": "5b0e3c1a-7d2f-4e39-9f0a-2c6d8e1b4a77"})
# The fields of an upstream body that the overlapping rules decide.
FIELDS = ("system", "messages", "metadata", "prompt_cache_key", "user")
# Through the /v1/messages -> Responses bridge, LiteLLM itself decides where the system prompt
# goes (1.108: ``instructions``; 1.110: a developer message in ``input``; each stable per
# session): only the key and the user field are ours to compare there.
BRIDGED_FIELDS = ("prompt_cache_key", "user")


# Past every provider's minimum cacheable prefix (1,024 tokens): the cache marks are decided too.
CONVENTIONS = " Follow the repository's conventions and keep every edit small." * 100


def _chat_with_reminder(model: str) -> dict:
    return {"model": model, "max_tokens": 16, "messages": [
        {"role": "system", "content": "You are a coding agent. Work in the repository you are given." + CONVENTIONS},
        {"role": "user", "content": "List the files in src/."},
        {"role": "assistant", "content": "src/ holds main.py and util.py."},
        {"role": "system", "content": "Reminder: the user's plan mode is now off."},
        {"role": "user", "content": "Open main.py."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_read_1", "type": "function", "function": {"name": "read", "arguments": '{"path": "main.py"}'}}]},
        {"role": "tool", "tool_call_id": "call_read_1", "content": ""},  # an empty result: marked on its block
    ], "tools": [{"type": "function", "function": {"name": "read", "description": "Read a file.", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]}


def _claude_code_messages(model: str) -> dict:
    return {"model": model, "max_tokens": 16, "metadata": {"user_id": CLAUDE_CODE_USER_ID},
            "system": [{"type": "text", "text": BILLING},
                       {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude." + CONVENTIONS}],
            "messages": [{"role": "user", "content": "List the files in src/."},
                         {"role": "assistant", "content": "src/ holds main.py and util.py."},
                         {"role": "user", "content": "Open main.py."}]}


CASES = {
    # a self-hosted server that declares no mid-conversation system support: our rule converts
    "chat, mid-conversation system, vllm (declared false)": (
        "/v1/chat/completions", _chat_with_reminder("vllm-model"), FIELDS),
    # Claude on chat completions: LiteLLM places the reminder itself; our rule leaves it
    "chat, mid-conversation system, anthropic": ("/v1/chat/completions", _chat_with_reminder("claude-model"), FIELDS),
    # Claude Code through LiteLLM's bridge to an OpenAI-compatible server: billing block (ours to
    # remove), prompt_cache_key (LiteLLM's, from the session id; our hint sets none on this route)
    "messages, Claude Code, bridged to an OpenAI-compatible server": (
        "/v1/messages", _claude_code_messages("chat-model"), BRIDGED_FIELDS),
    # Claude Code to Anthropic's API shape on another host: billing block
    "messages, Claude Code, anthropic": ("/v1/messages", _claude_code_messages("claude-model"), FIELDS),
}


def _decided(raw: str, fields: tuple[str, ...]) -> str:
    """The body's fields the overlapping rules decide, as sent (key order kept), compact."""
    body = json.loads(raw)
    return json.dumps({k: body[k] for k in fields if k in body}, ensure_ascii=False, separators=(",", ":"))


def test_the_overlapping_rules_send_the_same_bytes_on_every_litellm_release(proxy, upstream):
    from importlib.metadata import version

    got = {}
    for name, (route, body, fields) in CASES.items():
        upstream.take()
        proxy.post(route, body, **{"x-session-id": f"versions-{len(got)}"})
        raws = [r["body"] for r in upstream.take()]
        assert len(raws) == 1, name
        assert "x-anthropic-billing-header" not in raws[0], name  # removed by us or by LiteLLM, never sent
        got[name] = _decided(raws[0], fields)
    if os.environ.get("WRITE_FIXTURES") == "1":  # after a deliberate change: rewrite, then
        EXPECTED.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")  # check it on every release
    expected = json.loads(EXPECTED.read_text())
    for name in CASES:
        assert got[name] == expected[name], f"{name} (LiteLLM {version('litellm')})"
