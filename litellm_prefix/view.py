"""The neutral view of a request that every rule reads and returns.

The *head* is the leading system text (one string per text segment, in order) plus
the tool list; the *body* is everything after the head (chat messages, Responses
input items), kept as the client's own objects. Rules never see the wire shape:
``wire/`` adapters read a request into a ``View`` and write a changed ``View`` back.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class View:
    shape: str  # "chat" | "anthropic" | "responses"
    head: tuple[str, ...]
    tools: tuple[Any, ...] | None
    body: tuple[Any, ...]
    # The text-part type this shape uses inside content lists ("text" or "input_text").
    text_part: str = "text"
    # Client head segments taken out of ``head`` (by position among the client's segments):
    # written back exactly as sent, unless also in ``head_dropped`` (removed from the request).
    head_aside: frozenset[int] = frozenset()
    head_dropped: frozenset[int] = frozenset()

    def replace(self, **changes: Any) -> "View":
        return dataclasses.replace(self, **changes)


def field_of(item: Any, key: str) -> Any:
    """A field of a message or item, whether a dict or an object (``litellm.Message``)."""
    if isinstance(item, Mapping):
        return item.get(key)
    return getattr(item, key, None)


SYSTEM_ROLES = frozenset({"system", "developer"})


def is_system_message(item: Any) -> bool:
    """A system or developer message (chat message or Responses ``message`` item)."""
    return isinstance(item, Mapping) and item.get("role") in SYSTEM_ROLES and item.get("type", "message") == "message"


def tool_name(tool: Any) -> str:
    """The name of a tool in any shape: OpenAI ``function.name``, Anthropic/Responses ``name``."""
    if not isinstance(tool, Mapping):
        return ""
    function = tool.get("function")
    if isinstance(function, Mapping) and isinstance(function.get("name"), str):
        return function["name"]
    name = tool.get("name")
    if isinstance(name, str):
        return name
    return str(tool.get("type") or "")
