"""Requests rendered the way a chat template sees them: ChatML, tools in the first system turn,
late system turns hoisted to the front where the target hoists them.

One renderer for the live measurement (``prefix``) and the offline tools (``replay``,
``report``): both count the same layout. Pure functions of a ``Turn`` (a request, its route
and its target); no tokenizer, no store, nothing of the transform.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..request.target import hoists_system_messages

ROUTES = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}
_META_KEYS = ("session_id", "route", "target")


@dataclass(frozen=True)
class Turn:
    session: str
    route: str
    request: dict[str, Any]
    target: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_line(cls, raw: Mapping[str, Any]) -> Turn:
        request = {k: v for k, v in raw.items() if k not in _META_KEYS}
        route = raw.get("route", "chat")
        if route not in ROUTES:
            raise ValueError(f"unknown route {route!r} (use one of {', '.join(ROUTES)})")
        return cls(str(raw.get("session_id", "")), route, request, dict(raw.get("target") or {}))


def _sorted_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _tool_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _text(content: Any, dumps: Callable[[Any], str] = _sorted_json) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                out.append(part["text"])
            else:
                out.append(dumps(part))
        return "".join(out)
    return dumps(content)


def messages_of(turn: Turn, dumps: Callable[[Any], str] = _sorted_json) -> list[tuple[str, str]]:
    """(role, text) pairs as a chat template would see them, head first (``dumps``: JSON with sorted keys)."""
    request = turn.request
    out: list[tuple[str, str]] = []
    if turn.route == "messages":
        system = request.get("system")
        if system:
            out.append(("system", _text(system, dumps)))
        for message in request.get("messages") or []:
            out.append((message.get("role", "user"), _text(message.get("content"), dumps)))
    elif turn.route == "responses":
        if isinstance(request.get("instructions"), str):
            out.append(("system", request["instructions"]))
        items = request.get("input")
        if isinstance(items, str):
            out.append(("user", items))
        for item in items if isinstance(items, list) else []:
            role = item.get("role") or item.get("type", "item")
            text = _text(item.get("content"), dumps) if "content" in item else dumps(item)
            out.append(("system" if role == "developer" else role, text))
    elif turn.route == "gemini":  # Gemini's native routes: systemInstruction, then contents
        system = request.get("systemInstruction", request.get("system_instruction"))
        if isinstance(system, str):
            out.append(("system", system))
        elif isinstance(system, Mapping):
            out.append(("system", _text(system.get("parts"), dumps)))
        for content in request.get("contents") or []:
            if not isinstance(content, Mapping):
                out.append(("user", dumps(content)))
                continue
            role = content.get("role") or "user"
            out.append(("assistant" if role == "model" else role, _text(content.get("parts"), dumps)))
    else:
        out.extend(chat_pair(message, dumps) for message in request.get("messages") or [])
    return out


def chat_pair(message: Mapping[str, Any], dumps: Callable[[Any], str] = _sorted_json) -> tuple[str, str]:
    """(role, text) of one chat-completions message, as ``messages_of`` gives it."""
    text = _text(message.get("content"), dumps)
    if message.get("tool_calls"):
        text += dumps(message["tool_calls"])
    role = message.get("role", "user")
    return ("system" if role == "developer" else role, text)


def later_part(index: int, role: str, text: str, framed: bool = False) -> tuple[str, Any]:
    """The part of turn ``index`` >= 1 in ``render_parts`` (not hoisted): one part per turn."""
    label, prefix, suffix = f"messages[{index}]", f"<|im_start|>{role}\n", "<|im_end|>\n"
    return label, ((prefix, text, suffix) if framed else f"{prefix}{text}{suffix}")


def end_part(framed: bool = False) -> tuple[str, Any]:
    return "end", (("<|im_start|>assistant\n", "", "") if framed else "<|im_start|>assistant\n")


def hoists(target: Mapping[str, Any]) -> bool:
    return hoists_system_messages(str(target.get("provider") or ""), bool(target.get("system_messages_first")))


def render(turn: Turn) -> str:
    """ChatML text of a request: tools in the first system turn; late system turns hoisted where the target does."""
    return "".join(text for _, text in render_parts(turn))


def render_parts(turn: Turn, dumps: Callable[[Any], str] = _sorted_json,
                 tool_dumps: Callable[[Any], str] = _tool_json, tool_text: str | None = None,
                 framed: bool = False) -> list[tuple[str, Any]]:
    """``render`` as labelled parts (``system``, ``tools``, ``messages[i]``, ``end``) whose texts join to it.

    ``dumps``/``tool_dumps``: the JSON encoders (sorted keys / the tool's own key order); the
    live measurement passes faster ones, which may space the JSON differently, and may pass
    the tools' text itself (``tool_text``: the JSON the rules already made of them).
    ``framed``: each part as ``(prefix, body, suffix)`` instead of their concatenation (the
    body is the message's own string: the measurement looks a long one up without copying it)."""
    def part(prefix: str, body: str, suffix: str) -> Any:
        return (prefix, body, suffix) if framed else f"{prefix}{body}{suffix}"

    pairs = messages_of(turn, dumps)
    if hoists(turn.target):
        head = [p for p in pairs if p[0] == "system"]
        pairs = ([("system", "\n\n".join(t for _, t in head))] if head else []) + [p for p in pairs if p[0] != "system"]
    tools = turn.request.get("tools")
    if tool_text is None or not tools:
        tool_text = "\n".join(tool_dumps(t) for t in tools) if tools else ""
    out: list[tuple[str, Any]] = []
    if tool_text and (not pairs or pairs[0][0] != "system"):
        out.append(("tools", part("<|im_start|>system\n# Tools\n", tool_text, "<|im_end|>\n")))
    for index, (role, text) in enumerate(pairs):
        if index == 0 and tool_text and role == "system":
            out.append(("system", part(f"<|im_start|>{role}\n", text, "")))
            out.append(("tools", part("\n\n# Tools\n", tool_text, "<|im_end|>\n")))
        elif index == 0:
            label = "system" if role == "system" else "messages[0]"
            out.append((label, part(f"<|im_start|>{role}\n", text, "<|im_end|>\n")))
        else:
            out.append(later_part(index, role, text, framed))
    out.append(end_part(framed))
    return out
