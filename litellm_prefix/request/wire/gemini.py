"""Gemini's native shape (``/v1beta/models/{model}:generateContent`` and ``:streamGenerateContent``):
``systemInstruction`` (or ``system_instruction``) is the head, ``contents`` the body, and the
function declarations of ``tools`` the tool list.

LiteLLM forwards these routes in this shape only to a deployment that takes it (Gemini, Vertex's
Gemini API: ``wire.wire_for`` asks ``target.receives_gemini_shape``); to any other it makes a chat
completion of the request itself, whose own deployment hook sees chat messages.

The rules read chat messages, so each content is presented as one (``Content``): ``role`` ``user``
(``model`` becomes ``assistant``; any other role is kept as it came) and ``content``, its parts in
order: a text part as a chat text part (``{"type": "text", **part}``: its other keys, a thought
signature, kept), a function call as a ``tool_use`` part and a function response as a
``tool_result`` part (their name, arguments, id and response readable by the session's identity,
which reads Anthropic's blocks so), any other part (``inlineData``, ``fileData``, ...) as an opaque
``gemini`` part; every non-text part carries the client's own part (``part``), which is what is
written back, byte for byte. No text rule sees inside them.

Writing back: a message that is still the object ``read`` made is the client's own content (the
same object); a changed or added message is converted back (``assistant`` -> ``model``, text parts
without their ``type``, every other part as it came). A message this shape cannot carry (a system
message: Gemini's contents have no such role; ``view.alternates_roles`` makes the notes user turns,
folded into a neighbour) raises ``ValueError``: the request then passes as the client sent it.

Tools: only where ``tools`` is one or more objects that hold ``functionDeclarations`` (or
``function_declarations``) and nothing else are the declarations the tool list (by ``name``);
otherwise (``googleSearch``, ``codeExecution``, ...) the tools are left alone (``None``).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..view import View
from ._messages import HeadFeed, check_consumed, same_items, with_part_texts

name = "gemini"
TEXT = "text"  # the view's text part type
SYSTEM_KEYS = ("systemInstruction", "system_instruction")
DECLARATION_KEYS = ("functionDeclarations", "function_declarations")
_TO_CHAT = {"model": "assistant"}
_TO_GEMINI = {"assistant": "model"}
_CALL_KEYS = ("functionCall", "function_call")
_RESPONSE_KEYS = ("functionResponse", "function_response")


class Content(dict):
    """A Gemini content as the rules read it (a chat message); ``original``: the client's content."""

    __slots__ = ("original",)


def matches(data: Mapping[str, Any]) -> bool:
    return isinstance(data.get("contents"), list)


# -- reading --------------------------------------------------------------------------------


def _system(data: Mapping[str, Any]) -> tuple[str | None, Any]:
    """(key, value) of the request's system instruction; (None, None) where it has none."""
    for key in SYSTEM_KEYS:
        value = data.get(key)
        if value is not None:
            return key, value
    return None, None


def _is_text(part: Any) -> bool:
    return isinstance(part, Mapping) and isinstance(part.get("text"), str)


def _head_texts(system: Any) -> list[str]:
    if isinstance(system, str):
        return [system]
    parts = system.get("parts") if isinstance(system, Mapping) else None
    return [part["text"] for part in parts if _is_text(part)] if isinstance(parts, list) else []


def _first(part: Mapping[str, Any], keys: tuple[str, str]) -> Any:
    for key in keys:
        value = part.get(key)
        if value is not None:
            return value
    return None


def _chat_part(part: Any) -> dict[str, Any]:
    if not isinstance(part, Mapping):
        raise ValueError("a Gemini part is not an object")
    if isinstance(part.get("text"), str) and _first(part, _CALL_KEYS) is None and _first(part, _RESPONSE_KEYS) is None:
        return {"type": TEXT, **part}
    call = _first(part, _CALL_KEYS)
    if isinstance(call, Mapping):
        return {"type": "tool_use", "id": call.get("id"), "name": call.get("name"), "input": call.get("args"),
                "part": part}
    response = _first(part, _RESPONSE_KEYS)
    if isinstance(response, Mapping):
        return {"type": "tool_result", "tool_use_id": response.get("id"), "name": response.get("name"),
                "content": response.get("response"), "part": part}
    return {"type": "gemini", "part": part}


def message_of(content: Any) -> Content:
    """A Gemini content as a chat message, its keys in the content's order (``parts`` -> ``content``)."""
    if not isinstance(content, Mapping) or not isinstance(content.get("parts"), list) or "content" in content:
        raise ValueError("a Gemini content is not an object with a list of parts")
    message = Content()
    for key, value in content.items():
        if key == "parts":
            message["content"] = [_chat_part(part) for part in value]
        elif key == "role":
            message["role"] = _TO_CHAT.get(value, value)
        else:
            message[key] = value
    message.setdefault("role", "user")
    message.original = content
    return message


def _declaration_lists(tools: Any) -> list[tuple[str, list[Any]]] | None:
    """(key, declarations) of each tool object, where every one is function declarations alone."""
    if not isinstance(tools, list) or not tools:
        return None
    found = []
    for tool in tools:
        if not isinstance(tool, Mapping) or len(tool) != 1:
            return None
        key = next(iter(tool))
        if key not in DECLARATION_KEYS or not isinstance(tool[key], list):
            return None
        found.append((key, tool[key]))
    return found


def read(data: Mapping[str, Any]) -> View:
    _, system = _system(data)
    lists = _declaration_lists(data.get("tools"))
    return View(
        shape=name,
        head=tuple(_head_texts(system)),
        tools=None if lists is None else tuple(d for _, declarations in lists for d in declarations),
        body=tuple(message_of(content) for content in data.get("contents") or ()),
        text_part=TEXT,
    )


# -- writing --------------------------------------------------------------------------------


def _gemini_part(part: Any) -> Any:
    if isinstance(part, Mapping):
        if part.get("type") == TEXT and isinstance(part.get("text"), str):
            return {k: v for k, v in part.items() if k != "type"}
        if "part" in part:
            return part["part"]
    raise ValueError("a part Gemini's contents cannot carry")


def content_of(message: Any) -> Any:
    """The Gemini content for a view message: the client's own where ``message`` is what ``read`` made."""
    if type(message) is Content:
        return message.original
    if not isinstance(message, Mapping):
        raise ValueError("a message Gemini's contents cannot carry")
    role = message.get("role")
    if role in ("system", "developer", "tool") or "tool_calls" in message:
        raise ValueError("a message Gemini's contents cannot carry")
    out: dict[str, Any] = {}
    for key, value in message.items():
        if key == "content":
            if isinstance(value, str):
                out["parts"] = [{"text": value}]
            elif isinstance(value, list):
                out["parts"] = [_gemini_part(part) for part in value]
            else:
                raise ValueError("a message without content")
        elif key == "role":
            out["role"] = _TO_GEMINI.get(value, value)
        else:
            out[key] = value
    return out


def _system_update(system: Any, texts: HeadFeed) -> Any:
    """``system`` with its text parts taken from ``texts``; the same object where none changed."""
    if isinstance(system, str):
        new = texts.take(system)
        return "" if new is None else (system if new == system else new)
    parts = system.get("parts") if isinstance(system, Mapping) else None
    if not isinstance(parts, list):
        return system
    new_parts = with_part_texts(parts, texts, _is_text)
    return system if new_parts is parts else {**system, "parts": new_parts}


def _tools_update(data: Mapping[str, Any], tools: tuple[Any, ...] | None) -> dict[str, Any]:
    lists = _declaration_lists(data.get("tools"))
    if tools is None or lists is None:
        return {}
    flat = [d for _, declarations in lists for d in declarations]
    if same_items(flat, tools):
        return {}
    if len(tools) != len(flat):  # (no rule adds or removes a tool) one object holds them all
        return {"tools": [{lists[0][0]: list(tools)}]}
    new, at = [], 0
    for tool, (key, declarations) in zip(data["tools"], lists):
        taken = tools[at:at + len(declarations)]
        at += len(declarations)
        new.append(tool if same_items(declarations, taken) else {key: list(taken)})
    return {"tools": new}


def write(data: Mapping[str, Any], view: View) -> dict[str, Any]:
    updates = _tools_update(data, view.tools)
    texts = HeadFeed(view)
    key, system = _system(data)
    if key is not None:
        new_system = _system_update(system, texts)
        if new_system is not system:
            updates[key] = new_system
    check_consumed(texts)
    contents = data.get("contents") or []
    new_contents = [content_of(message) for message in view.body]
    if not same_items(contents, new_contents):
        updates["contents"] = new_contents
    return updates
