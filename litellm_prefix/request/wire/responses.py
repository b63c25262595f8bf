"""Responses API: ``instructions`` plus leading system/developer ``input`` items are the head; flat ``tools``."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..view import View
from ._messages import HeadFeed, check_consumed, head_length, head_texts, read_tools, rewrite_head, same_items, tools_update

name = "responses"
PART_TYPES = frozenset({"input_text", "text"})


def matches(data: Mapping[str, Any]) -> bool:
    return "input" in data and isinstance(data.get("input"), (list, str))


def _items(data: Mapping[str, Any]) -> list[Any]:
    items = data.get("input")
    return items if isinstance(items, list) else []


def read(data: Mapping[str, Any]) -> View:
    instructions = data.get("instructions")
    items = _items(data)
    n = head_length(items)
    head = ([instructions] if isinstance(instructions, str) else []) + head_texts(items, n, PART_TYPES)
    return View(shape=name, head=tuple(head), tools=read_tools(data), body=tuple(items[n:]), text_part="input_text")


def write(data: Mapping[str, Any], view: View) -> dict[str, Any]:
    updates = tools_update(data, view.tools)
    texts = HeadFeed(view)
    instructions = data.get("instructions")
    if isinstance(instructions, str):
        new = texts.take(instructions)
        if new is None:
            updates["instructions"] = ""
        elif new != instructions:
            updates["instructions"] = new
    if isinstance(data.get("input"), list):
        items = _items(data)
        n = head_length(items)
        new_items = rewrite_head(items, n, texts, PART_TYPES) + list(view.body)
        if not same_items(items, new_items):
            updates["input"] = new_items
    check_consumed(texts)
    return updates
