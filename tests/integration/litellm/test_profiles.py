"""End to end through a real LiteLLM proxy: agents recognised from their own headers, with no
setting beyond the callback. Assertions are on the bytes the recording upstream received."""
from __future__ import annotations

import json
import random

from harness.agent_requests import (
    claude_code_body,
    claude_code_env,
    claude_code_git_status,
    claude_code_headers,
    claude_code_prompt,
    claude_code_tools,
    opencode_env,
    opencode_headers,
)
from harness.procs import log_records
from harness.realistic import TOOL_NAMES, openai_tools, shuffled


def _log(proxy) -> list[dict]:
    return log_records(proxy.prefix_log)  # once the proxy's log writer has caught up


def _claude_code_turns(first_user: str, n: int, seed: int = 3) -> list[dict]:
    rng = random.Random(seed)
    prompt = claude_code_prompt(rng)
    messages: list[dict] = [{"role": "user", "content": first_user}]
    out = []
    for turn in range(n):
        out.append(claude_code_body(turn, messages, prompt=prompt, env=claude_code_env(), git=claude_code_git_status(),
                                    tools=claude_code_tools(shuffled(["mcp__github__create_issue", "mcp__linear__search",
                                                                      "mcp__sentry__events"], turn)),
                                    model="vllm-model"))
        messages = messages + [{"role": "assistant", "content": [{"type": "text", "text": f"Step {turn} done."}]},
                               {"role": "user", "content": f"continue with step {turn + 1}"}]
    return out


def test_claude_code_on_a_self_hosted_deployment_loses_the_billing_block_and_keeps_its_session(proxy, upstream):
    """/v1/messages with Claude Code's headers to hosted_vllm (LiteLLM translates to chat
    completions and would forward the billing block): the upstream never sees the block,
    every turn extends the last byte for byte although ``cch`` and the marks move, the
    session comes from ``x-claude-code-session-id``, and the agent is named everywhere."""
    upstream.take()
    before = len(_log(proxy))
    session = "e2e0c7a8-3b1d-4c1e-9a57-2f3e8d6b1a90"
    responses = [proxy.post("/v1/messages", body, **claude_code_headers(session))
                 for body in _claude_code_turns("Fix the failing login test.", 3)]
    assert all(r.headers.get("x-litellm-prefix-agent") == "claude-code" for r in responses)
    records = upstream.take()
    assert [r["path"] for r in records] == ["/v1/chat/completions"] * 3
    raws = [r["body"] for r in records]
    assert not any("x-anthropic-billing-header" in raw for raw in raws)
    bodies = [json.loads(raw) for raw in raws]
    heads = [json.dumps([m for m in b["messages"] if m["role"] == "system"], sort_keys=True) for b in bodies]
    assert heads[0] == heads[1] == heads[2]
    assert bodies[0]["tools"] == bodies[1]["tools"] == bodies[2]["tools"]
    assert bodies[0]["messages"][0]["content"][0]["text"].startswith("You are Claude Code")
    new = _log(proxy)[before:]
    assert not [r for r in new if r.get("event") == "drift"]
    rewrites = [r for r in new if r.get("event") == "rewrite"]
    assert len(rewrites) == 3 and all(r["agent"] == "claude-code" for r in rewrites)
    assert all(any(rule["rule"] == "billing_block" and rule["action"] == "removed" for rule in r["rules"])
               for r in rewrites)
    sessions = {r["session"] for r in rewrites}
    assert len(sessions) == 1

    # Same header, another first user message (a resumed or compacted conversation): same session.
    # Another header, the same first user message: another session.
    proxy.post("/v1/messages", _claude_code_turns("Something else entirely.", 1)[0], **claude_code_headers(session))
    proxy.post("/v1/messages", _claude_code_turns("Fix the failing login test.", 1)[0],
               **claude_code_headers("e2e11111-2222-3333-4444-555555555555"))
    upstream.take()
    later = [r for r in _log(proxy)[before:] if r.get("event") == "rewrite"][3:]
    assert later[0]["session"] in sessions and later[1]["session"] not in sessions


def test_opencode_on_chat_completions_is_recognised_by_its_user_agent(proxy, upstream):
    upstream.take()
    system = [{"role": "system", "content": "You are opencode, an interactive CLI tool.\n\n" + opencode_env()},
              {"role": "system", "content": "Instructions from: /home/alice/src/web/AGENTS.md\nUse pnpm."}]
    messages = [{"role": "user", "content": "add a dark mode toggle"}]
    for turn in range(2):
        body = {"model": "vllm-model", "messages": system + messages, "tools": openai_tools(shuffled(TOOL_NAMES, turn))}
        response = proxy.post("/v1/chat/completions", body, **opencode_headers("ses_e2e_opencode"))
        assert response.headers.get("x-litellm-prefix-agent") == "opencode"
        messages = messages + [{"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]
    first, second = [json.loads(r["body"]) for r in upstream.take()]
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert first["tools"] == second["tools"]
