"""Helpers shared by the shapes whose head is a leading run of system messages."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
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


DROP = object()  # with_content_texts: the whole content was one dropped segment


class HeadFeed:
    """The view's head segments, fed back in the client's order: a segment the view set aside
    is written back as sent (``take`` returns it), or removed (``take`` returns ``None``)."""

    def __init__(self, view: Any) -> None:
        self._texts = iter(view.head)
        self._aside = view.head_aside
        self._dropped = view.head_dropped
        self._position = 0

    def take(self, original: str) -> str | None:
        position = self._position
        self._position += 1
        if position in self._aside:
            return None if position in self._dropped else original
        return next(self._texts)

    def __iter__(self):
        return self._texts

    def __next__(self) -> str:
        return next(self._texts)


def _take(texts: Any, original: str) -> str | None:
    take = getattr(texts, "take", None)
    return take(original) if take is not None else next(texts)


def with_content_texts(content: Any, texts: Iterator[str], part_types: frozenset[str]) -> Any:
    """``content`` with its text segments taken from ``texts``; unchanged objects are kept.

    ``DROP`` when the content was a single string segment that ``texts`` removes.
    """
    if isinstance(content, str):
        new = _take(texts, content)
        if new is None:
            return DROP
        return content if new == content else new
    if isinstance(content, list):
        return with_part_texts(content, texts, lambda part: (
            isinstance(part, Mapping) and part.get("type") in part_types and isinstance(part.get("text"), str)))
    return content


def with_part_texts(parts: list[Any], texts: Iterator[str], is_text: Callable[[Any], bool]) -> list[Any]:
    """``parts`` with the ``text`` of each part ``is_text`` accepts taken from ``texts`` (a part whose
    text ``texts`` removes is left out); the same list where nothing changed."""
    changed = False
    out = []
    for part in parts:
        if is_text(part):
            new = _take(texts, part["text"])
            if new is None:
                changed = True
                continue
            if new != part["text"]:
                part = {**part, "text": new}
                changed = True
        out.append(part)
    return out if changed else parts


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
        if new_content is DROP or (new_content is not content and new_content == []):
            continue  # a head message whose only text was removed
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
