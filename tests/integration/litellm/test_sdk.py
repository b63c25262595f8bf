"""End to end through the LiteLLM SDK: the deployment hook rewrites what reaches the upstream."""
from __future__ import annotations

import json

import litellm
import pytest

from harness.procs import sdk_callbacks
from harness.realistic import (
    TOOL_NAMES,
    anthropic_tools,
    conversation,
    install_root,
    openai_tools,
    pi_system_prompt,
    responses_tools,
    shuffled,
)
from litellm_prefix.hook import PrefixStabilizer
from litellm_prefix.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def sdk_callback():
    handler = PrefixStabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home"))
    with sdk_callbacks(handler):
        yield handler


async def test_acompletion_turns_reach_upstream_with_identical_heads(upstream, sdk_callback):
    upstream.take()
    for root, seed, turns in (("a", 1, 1), ("b", 2, 2)):
        order = shuffled(TOOL_NAMES, seed)
        response = await litellm.acompletion(
            model="openai/upstream-sdk", api_base=f"{upstream.url}/v1", api_key="dummy",
            messages=[{"role": "system", "content": pi_system_prompt(root=install_root(root), tool_order=order)},
                      *conversation(turns)],
            tools=openai_tools(order), metadata={"session_id": "sdk-session"},
        )
        assert response.choices[0].message.content == "ok"
    first, second = [json.loads(r["body"]) for r in upstream.take()]
    assert first["messages"][0] == second["messages"][0] and first["tools"] == second["tools"]
    assert "/srv/pi-home/docs" in first["messages"][0]["content"]
    assert [t["function"]["name"] for t in first["tools"]] == shuffled(TOOL_NAMES, 1)  # the first turn's order, kept
    assert sdk_callback.core.stats["drift"] == 0


async def test_streaming_acompletion(upstream, sdk_callback):
    upstream.take()
    order = shuffled(TOOL_NAMES, 3)
    stream = await litellm.acompletion(
        model="openai/upstream-sdk", api_base=f"{upstream.url}/v1", api_key="dummy", stream=True,
        messages=[{"role": "system", "content": pi_system_prompt(root=install_root("c"))}, {"role": "user", "content": "hi"}],
        tools=openai_tools(order),
    )
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
    assert text == "ok"
    (body,) = [json.loads(r["body"]) for r in upstream.take()]
    assert body["stream"] is True and [t["function"]["name"] for t in body["tools"]] == order  # (toolOrder auto: as sent)


async def test_aresponses(upstream, sdk_callback):
    upstream.take()
    await litellm.aresponses(
        model="openai/upstream-sdk-resp", api_base=f"{upstream.url}/v1", api_key="dummy",
        instructions=pi_system_prompt(root=install_root("b")), input=[{"role": "user", "content": "hi"}],
        tools=responses_tools(shuffled(TOOL_NAMES, 4)),
    )
    (body,) = [json.loads(r["body"]) for r in upstream.take()]
    assert "/srv/pi-home/docs" in body["instructions"]
    assert [t["name"] for t in body["tools"]] == shuffled(TOOL_NAMES, 4)  # (toolOrder auto: as sent)


async def test_anthropic_messages_acreate(upstream, sdk_callback):
    upstream.take()
    await litellm.anthropic.messages.acreate(
        model="anthropic/claude-sonnet-4-5", api_base=upstream.url, api_key="dummy", max_tokens=32,
        system=pi_system_prompt(root=install_root("a")), messages=[{"role": "user", "content": "hi"}],
        tools=anthropic_tools(shuffled(TOOL_NAMES, 5)),
    )
    (record,) = upstream.take()
    body = json.loads(record["body"])
    system = body["system"] if isinstance(body["system"], str) else body["system"][0]["text"]
    assert "/srv/pi-home/docs" in system
    assert [t["name"] for t in body["tools"]] == shuffled(TOOL_NAMES, 5)  # (toolOrder auto: as sent)
