"""Chat completions: ``messages`` (leading system/developer messages are the head) and ``tools``."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..view import View
from ._messages import HeadFeed, check_consumed, head_length, head_texts, read_tools, rewrite_head, same_items, tools_update

name = "chat"
PART_TYPES = frozenset({"text"})


def matches(data: Mapping[str, Any]) -> bool:
    return isinstance(data.get("messages"), list) and "system" not in data


def read(data: Mapping[str, Any]) -> View:
    messages = data.get("messages") or []
    n = head_length(messages)
    return View(
        shape=name,
        head=tuple(head_texts(messages, n, PART_TYPES)),
        tools=read_tools(data),
        body=tuple(messages[n:]),
        text_part="text",
    )


def write(data: Mapping[str, Any], view: View) -> dict[str, Any]:
    messages = data.get("messages") or []
    n = head_length(messages)
    texts = HeadFeed(view)
    new_messages = rewrite_head(messages, n, texts, PART_TYPES) + list(view.body)
    check_consumed(texts)
    updates = tools_update(data, view.tools)
    if not same_items(messages, new_messages):
        updates["messages"] = new_messages
    return updates
