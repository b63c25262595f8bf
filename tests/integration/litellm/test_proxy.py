"""End to end: a real LiteLLM proxy process with the plugin, in front of a recording upstream.

Assertions are on the bytes the upstream received.
"""
from __future__ import annotations

import json

import pytest

from harness.procs import log_records
from harness.realistic import (
    TOOL_NAMES,
    anthropic_tools,
    conversation,
    openai_tools,
    pi_sections,
    pi_system_prompt,
    render_pi,
    responses_tools,
    shuffled,
)
from litellm_prefix.offline.replay import common_prefix
from tests.support import ROOT


def _drift_events(proxy, session_marker: str | None = None) -> list[dict]:
    return [r for r in log_records(proxy.prefix_log) if r.get("event") == "drift"]  # once the writer caught up


def _chat_turn(root: str, order_seed: int, turns: int, system_sections=None, **extra) -> dict:
    order = shuffled(TOOL_NAMES, order_seed)
    sections = system_sections or pi_sections(root=root, tool_order=order)
    return {"model": "chat-model", "messages": [{"role": "system", "content": render_pi(sections)}, *conversation(turns)],
            "tools": openai_tools(order), **extra}


def _head_end(raw: str) -> int:
    """Where the first user message starts in a raw chat body: everything before it is the head."""
    return raw.index('{"role":"user"')


@pytest.mark.parametrize("stream", [False, True])
def test_chat_turns_with_moved_install_and_shuffled_tools_reach_upstream_byte_stable(proxy, upstream, install_roots, stream):
    upstream.take()
    session = f"e2e-chat-{int(stream)}"
    drift_before = len(_drift_events(proxy))
    for turn, (root, seed) in enumerate([(install_roots[0], 1), (install_roots[1], 2), (install_roots[0], 3)]):
        body = _chat_turn(root, seed, turns=turn + 1, stream=stream)
        response = proxy.post("/v1/chat/completions", body, **{"x-session-id": session})
        if stream:
            assert "data: [DONE]" in response.text
        else:
            assert response.json()["choices"][0]["message"]["content"] == "ok"
        assert response.headers.get("x-litellm-prefix-head")
    raws = [r["body"] for r in upstream.take()]
    assert len(raws) == 3
    bodies = [json.loads(r) for r in raws]
    # identical heads: system text and tools
    assert bodies[0]["messages"][0] == bodies[1]["messages"][0] == bodies[2]["messages"][0]
    assert bodies[0]["tools"] == bodies[1]["tools"] == bodies[2]["tools"]
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == shuffled(TOOL_NAMES, 1)  # the first turn's order, kept
    system = bodies[0]["messages"][0]["content"]
    assert "/srv/pi-home/docs" in system and "node_modules" not in system
    # on the wire: each turn's bytes share everything up to the end of the previous turn's head
    for earlier, later in zip(raws, raws[1:]):
        assert common_prefix(earlier, later) > _head_end(later)
    assert len(_drift_events(proxy)) == drift_before  # no warning for normalised noise


def test_genuine_system_change_reaches_upstream_with_one_drift_event(proxy, upstream, install_roots):
    upstream.take()
    session = "e2e-genuine-change"
    before = len(_drift_events(proxy))
    base = pi_sections(root=install_roots[0])
    changed = dict(base, rules=base["rules"] + "\n- Always run the linter before committing.")
    headers = []
    for sections in (base, changed, changed):
        body = {"model": "chat-model", "messages": [{"role": "system", "content": render_pi(sections)},
                                                     {"role": "user", "content": "go"}]}
        headers.append(proxy.post("/v1/chat/completions", body, **{"x-session-id": session}).headers)
    raws = [json.loads(r["body"]) for r in upstream.take()]
    assert "Always run the linter" not in raws[0]["messages"][0]["content"]
    assert "Always run the linter" in raws[1]["messages"][0]["content"]  # on that very request
    events = _drift_events(proxy)[before:]
    assert len(events) == 1 and events[0]["changed"] == ["section:rules"]
    assert "x-litellm-prefix-drift" not in headers[0]
    assert "changed=section:rules" in headers[1]["x-litellm-prefix-drift"]
    assert "x-litellm-prefix-drift" not in headers[2]
    assert "Always run the linter" not in proxy.prefix_log.read_text()


def test_late_system_message_becomes_user_note_where_deployment_declares_no_support(proxy, upstream):
    upstream.take()
    messages = [{"role": "system", "content": pi_system_prompt()}, *conversation(2),
                {"role": "system", "content": "Reminder: keep answers short."}]
    proxy.post("/v1/chat/completions", {"model": "vllm-model", "messages": messages})
    proxy.post("/v1/chat/completions", {"model": "chat-model", "messages": messages})
    vllm, plain = [json.loads(r["body"]) for r in upstream.take()]
    assert vllm["messages"][-1]["role"] == "user"
    assert vllm["messages"][-1]["content"].startswith("Operator note (not from the user)")
    # (after an assistant turn, at the end of the request: its own user message, closed like a folded note)
    assert vllm["messages"][-1]["content"].endswith("Reminder: keep answers short.\n\n(End of note.)")
    assert [m["role"] for m in vllm["messages"][:-1]] == [m["role"] for m in messages[:-1]]
    assert plain["messages"][-1] == {"role": "system", "content": "Reminder: keep answers short."}


def test_model_info_override_keeps_tool_order(proxy, upstream):
    upstream.take()
    order = shuffled(TOOL_NAMES, 4)
    proxy.post("/v1/chat/completions", {"model": "keep-order-model", "messages": [{"role": "user", "content": "x"}],
                                        "tools": openai_tools(order)})
    (body,) = [json.loads(r["body"]) for r in upstream.take()]
    assert [t["function"]["name"] for t in body["tools"]] == order


def test_anthropic_messages_route(proxy, upstream, install_roots):
    upstream.take()
    for root, seed in ((install_roots[0], 5), (install_roots[1], 6)):
        tools = anthropic_tools(shuffled(TOOL_NAMES, seed))
        tools[-1]["cache_control"] = {"type": "ephemeral"}
        body = {"model": "claude-model", "max_tokens": 64,
                "system": [{"type": "text", "text": pi_system_prompt(root=root), "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": "hello"}], "tools": tools}
        response = proxy.post("/v1/messages", body, **{"x-session-id": "e2e-anthropic"})
        assert response.json()["content"][0]["text"] == "ok"
    records = upstream.take()
    assert all(r["path"] == "/v1/messages" for r in records)
    first, second = [json.loads(r["body"]) for r in records]
    assert first["system"] == second["system"] and first["tools"] == second["tools"]
    assert [t["name"] for t in first["tools"]] == shuffled(TOOL_NAMES, 5)  # the first turn's order, kept
    assert [("cache_control" in t) for t in first["tools"]] == [False] * (len(TOOL_NAMES) - 1) + [True]
    assert "/srv/pi-home/docs" in first["system"][0]["text"]
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}


def test_responses_route(proxy, upstream, install_roots):
    upstream.take()
    for root, seed in ((install_roots[0], 7), (install_roots[1], 8)):
        body = {"model": "resp-model", "instructions": pi_system_prompt(root=root),
                "input": [{"role": "developer", "content": "Sandbox: workspace-write"},
                          {"role": "user", "content": "list files"},
                          {"role": "developer", "content": "Reminder: approvals are on."}],
                "tools": responses_tools(shuffled(TOOL_NAMES, seed))}
        proxy.post("/v1/responses", body, **{"x-session-id": "e2e-responses"})
    records = upstream.take()
    assert all(r["path"] == "/v1/responses" for r in records)
    first, second = [json.loads(r["body"]) for r in records]
    assert first["instructions"] == second["instructions"] and first["tools"] == second["tools"]
    assert "/srv/pi-home/docs" in first["instructions"]
    assert [t["name"] for t in first["tools"]] == shuffled(TOOL_NAMES, 7)  # the first turn's order, kept
    assert first["input"][-1]["role"] == "developer"  # OpenAI keeps it in place: left alone


def test_anthropic_route_bridged_to_another_api_keeps_notes_in_place(proxy, upstream):
    """/v1/messages to an OpenAI-compatible deployment: LiteLLM translates the call (here into
    the Responses API) and runs the deployment hook again on the translated shape. The
    history-dependent rules must run once, on the client's own request: each turn's
    upstream body extends the previous one, and the git-status note is sent once."""
    from litellm_prefix.offline.replay import load

    upstream.take()
    scenario = ROOT / "bench" / "scenarios" / "claude-code.noisy.jsonl"
    for turn in load(scenario)[:9]:
        proxy.post("/v1/messages", {**turn.request, "model": "chat-model"}, **{"x-session-id": "bridged-claude"})
    bodies = [json.loads(r["body"]) for r in upstream.take()]
    key = "input" if "input" in bodies[0] else "messages"
    for earlier, later in zip(bodies, bodies[1:]):
        assert later[key][: len(earlier[key])] == earlier[key]
    assert json.dumps(bodies[-1]).count("Update (git-status)") == 1


def test_replay_via_a_running_proxy(proxy, upstream, capsys):
    """`litellm-prefix replay FILE --via URL` sends each request through the proxy and sums cached tokens."""
    from litellm_prefix.offline.cli import main

    upstream.take()
    scenario = ROOT / "bench" / "scenarios" / "pi.clean.jsonl"
    assert main(["replay", str(scenario), "--via", proxy.url, "--key", proxy.key, "--model", "chat-model"]) == 0
    out = capsys.readouterr().out
    per_request = [line for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert len(per_request) == 12 and "total: prompt" in out
    assert len(upstream.take()) == 12
