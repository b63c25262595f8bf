"""Anthropic messages (``/v1/messages``): top-level ``system`` (string or text blocks), ``tools``."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..view import View
from ._messages import DROP, HeadFeed, check_consumed, content_texts, read_tools, same_items, tools_update, with_content_texts

name = "anthropic"
PART_TYPES = frozenset({"text"})


def matches(data: Mapping[str, Any]) -> bool:
    return isinstance(data.get("messages"), list)


def read(data: Mapping[str, Any]) -> View:
    messages = data.get("messages") or []
    return View(
        shape=name,
        head=tuple(content_texts(data.get("system"), PART_TYPES)),
        tools=read_tools(data),
        body=tuple(messages),
        text_part="text",
    )


def write(data: Mapping[str, Any], view: View) -> dict[str, Any]:
    updates = tools_update(data, view.tools)
    system = data.get("system")
    texts = HeadFeed(view)
    new_system = with_content_texts(system, texts, PART_TYPES)
    check_consumed(texts)
    if new_system is not system:
        updates["system"] = [] if new_system is DROP else new_system
    messages = data.get("messages") or []
    if not same_items(messages, view.body):
        updates["messages"] = list(view.body)
    return updates
