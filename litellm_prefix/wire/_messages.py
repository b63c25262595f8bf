"""Helpers shared by the shapes whose head is a leading run of system messages."""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..view import field_of, is_system_message


def head_length(items: Sequence[Any]) -> int:
    """How many leading items are system/developer messages (the head)."""
    n = 0
    for item in items:
        if not is_system_message(item):
            break
        n += 1
    return n


def content_texts(content: Any, part_types: frozenset[str]) -> list[str]:
    """The text segments of a content value: a string is one; text parts are one each."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            part["text"]
            for part in content
            if isinstance(part, Mapping) and part.get("type") in part_types and isinstance(part.get("text"), str)
        ]
    return []


def with_content_texts(content: Any, texts: Iterator[str], part_types: frozenset[str]) -> Any:
    """``content`` with its text segments taken from ``texts``; unchanged objects are kept."""
    if isinstance(content, str):
        new = next(texts)
        return content if new == content else new
    if isinstance(content, list):
        changed = False
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") in part_types and isinstance(part.get("text"), str):
                new = next(texts)
                if new != part["text"]:
                    part = {**part, "text": new}
                    changed = True
            parts.append(part)
        return parts if changed else content
    return content


def head_texts(items: Sequence[Any], n: int, part_types: frozenset[str]) -> list[str]:
    texts: list[str] = []
    for item in items[:n]:
        texts.extend(content_texts(field_of(item, "content"), part_types))
    return texts


def rewrite_head(items: Sequence[Any], n: int, texts: Iterator[str], part_types: frozenset[str]) -> list[Any]:
    out = []
    for item in items[:n]:
        content = item.get("content")
        new_content = with_content_texts(content, texts, part_types)
        out.append(item if new_content is content else {**item, "content": new_content})
    return out


def same_items(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def tools_update(data: Mapping[str, Any], tools: tuple[Any, ...] | None) -> dict[str, Any]:
    original = data.get("tools")
    if tools is None or not isinstance(original, list) or same_items(original, tools):
        return {}
    return {"tools": list(tools)}


def read_tools(data: Mapping[str, Any]) -> tuple[Any, ...] | None:
    tools = data.get("tools")
    return tuple(tools) if isinstance(tools, list) else None


def check_consumed(texts: Iterator[str]) -> None:
    if next(texts, None) is not None:
        raise ValueError("a rule changed the number of head segments")
