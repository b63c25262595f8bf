"""The neutral view of a request that every rule reads and returns.

The *head* is the leading system text (one string per text segment, in order) plus
the tool list; the *body* is everything after the head (chat messages, Responses
input items), kept as the client's own objects. Rules never see the wire shape:
``wire/`` adapters read a request into a ``View`` and write a changed ``View`` back.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


class View:
    """An immutable request view: ``shape``, ``head`` (tuple of system text segments), ``tools``, ``body``.

    A rule that rewrites sections of a head segment may hand over the segment as a
    ``sections.SectionedText`` (``replace(segments=...)``) instead of a joined string: the
    next rule that works on sections reads them without a parse, and ``head`` joins each
    such segment once, when first read (so two section rules in a row copy a long head
    once, not twice). ``head`` is always a tuple of strings for every reader.
    """

    __slots__ = ("shape", "tools", "body", "text_part", "head_aside", "head_dropped", "_head", "_segments",
                 "_system_roles")

    def __init__(self, shape: str, head: tuple[str, ...] | None = None, tools: tuple[Any, ...] | None = None,
                 body: tuple[Any, ...] = (), text_part: str = "text", *, segments: tuple[Any, ...] | None = None,
                 head_aside: frozenset[int] = frozenset(), head_dropped: frozenset[int] = frozenset()):
        # head_aside: client head segments taken out of ``head`` (by position among the client's
        # segments), written back exactly as sent unless also in ``head_dropped`` (removed).
        if head is None and segments is None:
            head = ()
        for name, value in (("shape", shape), ("tools", tools), ("body", body), ("text_part", text_part),
                            ("head_aside", head_aside), ("head_dropped", head_dropped),
                            ("_head", head), ("_segments", segments), ("_system_roles", None)):
            object.__setattr__(self, name, value)

    @property
    def head(self) -> tuple[str, ...]:
        head = self._head
        if head is None:
            head = tuple(segment if isinstance(segment, str) else segment.text for segment in self._segments)
            object.__setattr__(self, "_head", head)
        return head

    @property
    def system_roles(self) -> tuple[int, ...]:
        """Positions in ``body`` of the mappings whose role is ``system`` or ``developer`` (found
        once per body: the rules that act on mid-conversation system text look only there)."""
        found = self._system_roles
        if found is None:
            found = tuple(index for index, item in enumerate(self.body)
                          if (type(item) is dict or isinstance(item, Mapping)) and item.get("role") in SYSTEM_ROLES)
            object.__setattr__(self, "_system_roles", found)
        return found

    @property
    def segments(self) -> tuple[Any, ...]:
        """The head's segments: strings, or ``SectionedText`` where a rule left sections unjoined."""
        return self._segments if self._segments is not None else self.head

    def replace(self, **changes: Any) -> View:
        fields = {"shape": self.shape, "tools": self.tools, "body": self.body, "text_part": self.text_part,
                  "head_aside": self.head_aside, "head_dropped": self.head_dropped}
        if "head" in changes:
            fields["head"], fields["segments"] = changes.pop("head"), None
        elif "segments" in changes:
            fields["head"], fields["segments"] = None, changes.pop("segments")
        else:
            fields["head"], fields["segments"] = self._head, self._segments
        unknown = set(changes) - {"shape", "tools", "body", "text_part", "head_aside", "head_dropped"}
        if unknown:
            raise TypeError(f"View has no field {sorted(unknown)[0]!r}")
        fields.update(changes)
        view = View(**fields)
        if fields["body"] is self.body and self._system_roles is not None:  # the same body: found once per request
            object.__setattr__(view, "_system_roles", self._system_roles)
        return view

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def _key(self) -> tuple[Any, ...]:
        return (self.shape, self.head, self.tools, self.body, self.text_part, self.head_aside, self.head_dropped)

    def __eq__(self, other: object) -> bool:
        return self._key() == other._key() if isinstance(other, View) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (tools and body hold dicts)

    def __repr__(self) -> str:
        return (f"View(shape={self.shape!r}, head={self.head!r}, tools={self.tools!r}, body={self.body!r}, "
                f"text_part={self.text_part!r})")


def field_of(item: Any, key: str) -> Any:
    """A field of a message or item, whether a dict or an object (``litellm.Message``)."""
    if type(item) is dict or isinstance(item, Mapping):  # (the ABC check is slow; most are dicts)
        return item.get(key)
    return getattr(item, key, None)


SYSTEM_ROLES = frozenset({"system", "developer"})
TEXT_PART_TYPES = frozenset({"text", "input_text"})  # a text part: chat and Anthropic ``text``, Responses ``input_text``
# Shapes whose body has no system role and alternates user and model turns (Gemini's ``contents``,
# ``wire/gemini.py``): whatever the target, a note there is a user turn folded into a neighbour.
_ALTERNATING_SHAPES = frozenset({"gemini"})


def alternates_roles(shape: str) -> bool:
    """The body of this shape holds no system message and no two user messages in a row."""
    return shape in _ALTERNATING_SHAPES


def is_user_message(item: Any) -> bool:
    """A user message (chat message or Responses ``message`` item)."""
    return field_of(item, "role") == "user" and field_of(item, "type") in (None, "message")


def is_system_message(item: Any) -> bool:
    """A system or developer message (chat message or Responses ``message`` item)."""
    return (type(item) is dict or isinstance(item, Mapping)) and item.get("role") in SYSTEM_ROLES \
        and item.get("type", "message") == "message"


def tool_description(tool: Any) -> str | None:
    """A tool's description in any shape: OpenAI ``function.description``, Anthropic/Responses ``description``."""
    if not isinstance(tool, dict):
        return None
    function = tool.get("function")
    if isinstance(function, dict):
        return function.get("description")
    return tool.get("description")


def with_tool_description(tool: dict, description: str) -> dict:
    """``tool`` (a copy) with ``description`` where ``tool_description`` reads it."""
    function = tool.get("function")
    if isinstance(function, dict):
        return {**tool, "function": {**function, "description": description}}
    return {**tool, "description": description}


def tool_name(tool: Any) -> str:
    """The name of a tool in any shape: OpenAI ``function.name``, Anthropic/Responses ``name``."""
    if type(tool) is not dict and not isinstance(tool, Mapping):  # (the ABC check is slow; most are dicts)
        return ""
    function = tool.get("function")
    if function is not None and (type(function) is dict or isinstance(function, Mapping)) \
            and isinstance(function.get("name"), str):
        return function["name"]
    name = tool.get("name")
    if isinstance(name, str):
        return name
    return str(tool.get("type") or "")
