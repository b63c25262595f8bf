"""Adapters: every shape reads into a View and writes back copy-on-write."""
from __future__ import annotations

import copy

from harness.realistic import TINY_PNG, anthropic_tools, conversation, openai_tools, pi_system_prompt, responses_tools
from litellm_prefix.request import wire
from litellm_prefix.request.view import View


class Secret:
    """Stands for the logging object and secrets in ``data``: must never be copied."""

    def __deepcopy__(self, memo):
        raise AssertionError("data was deep-copied")


def test_chat_head_is_the_leading_system_run_with_text_parts():
    data = {"messages": [
        {"role": "system", "content": "A"},
        {"role": "developer", "content": [{"type": "text", "text": "B", "cache_control": {"type": "ephemeral"}},
                                          {"type": "image_url", "image_url": {"url": TINY_PNG}}]},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "late"},
    ], "litellm_logging_obj": Secret()}
    adapter = wire.wire_for(data, "acompletion")
    view = adapter.read(data)
    assert view.head == ("A", "B") and len(view.body) == 2
    updates = adapter.write(data, view.replace(head=("A", "B2")))
    new = updates["messages"]
    assert new[0] is data["messages"][0]
    assert new[1]["content"][0] == {"type": "text", "text": "B2", "cache_control": {"type": "ephemeral"}}
    assert new[1]["content"][1] is data["messages"][1]["content"][1]
    assert new[2] is data["messages"][2] and new[3] is data["messages"][3]
    assert data["messages"][1]["content"][0]["text"] == "B"  # client's objects untouched
    assert adapter.write(data, view) == {}  # unchanged view, no updates


def test_anthropic_system_string_and_blocks():
    for system in ("SYS", [{"type": "text", "text": "SYS", "cache_control": {"type": "ephemeral"}}]):
        data = {"model": "claude", "system": system, "messages": [{"role": "user", "content": "x"}],
                "tools": anthropic_tools(["b", "a"])}
        adapter = wire.wire_for(data, "anthropic_messages")
        assert adapter.name == "anthropic"
        view = adapter.read(data)
        assert view.head == ("SYS",) and [t["name"] for t in view.tools] == ["b", "a"]
        updates = adapter.write(data, view.replace(head=("NEW",), tools=tuple(reversed(view.tools))))
        assert [t["name"] for t in updates["tools"]] == ["a", "b"]
        if isinstance(system, str):
            assert updates["system"] == "NEW"
        else:
            assert updates["system"] == [{"type": "text", "text": "NEW", "cache_control": {"type": "ephemeral"}}]


def test_responses_instructions_and_leading_developer_items():
    data = {"model": "m", "instructions": "I", "input": [
        {"role": "developer", "content": [{"type": "input_text", "text": "D"}]},
        {"role": "user", "content": "hi"},
    ], "tools": responses_tools(["b", "a"])}
    adapter = wire.wire_for(data, "aresponses")
    view = adapter.read(data)
    assert view.head == ("I", "D") and view.text_part == "input_text"
    updates = adapter.write(data, view.replace(head=("I2", "D2")))
    assert updates["instructions"] == "I2"
    assert updates["input"][0]["content"] == [{"type": "input_text", "text": "D2"}]
    assert updates["input"][1] is data["input"][1]


def test_responses_string_input_is_kept():
    data = {"model": "m", "instructions": "I", "input": "just text"}
    adapter = wire.wire_for(data, "aresponses")
    view = adapter.read(data)
    assert view.head == ("I",) and view.body == ()
    assert adapter.write(data, view.replace(head=("J",))) == {"instructions": "J"}


def test_unknown_shapes_are_not_touched():
    assert wire.wire_for({"prompt": "x"}, "atext_completion") is None
    assert wire.wire_for({"input": ["a"]}, "aembedding") is None


def test_realistic_round_trip_is_identity():
    data = {"model": "m", "messages": [{"role": "system", "content": pi_system_prompt()}, *conversation(6)],
            "tools": openai_tools(), "stream": True}
    snapshot = copy.deepcopy(data)
    adapter = wire.wire_for(data, None)
    assert adapter.name == "chat"
    assert adapter.write(data, adapter.read(data)) == {}
    assert data == snapshot


def test_view_is_frozen():
    """Every field refuses assignment with the frozen-instance error, and keeps its value.

    (``head`` is a read-only property, so assigning it would raise anyway: the data fields are
    the ones the freeze protects.)"""
    import dataclasses

    import pytest

    view = View("chat", ("a",), ({"name": "t"},), ({"role": "user", "content": "hi"},))
    for name, value in (("shape", "anthropic"), ("tools", ()), ("body", ()), ("text_part", "input_text"),
                        ("head_aside", frozenset({0})), ("_head", ("b",))):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(view, name, value)
    assert (view.shape, view.head, view.tools, view.body, view.text_part) == (
        "chat", ("a",), ({"name": "t"},), ({"role": "user", "content": "hi"},), "text")
