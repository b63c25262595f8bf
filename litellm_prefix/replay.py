"""Replay a recorded session and count what an exact-prefix cache must prefill again.

A session file is JSON Lines, one request per line: the request body (OpenAI chat
shape by default) plus ``session_id``, optionally ``route`` (``chat``, ``messages`` for
Anthropic ``/v1/messages``, ``responses`` for ``/v1/responses``) and ``target``
(``{"provider": ..., "system_messages_first": ...}``: what the serving side does with
late system messages). Requests are rendered the way a chat template would see them
(ChatML, tools in the system turn, late system messages hoisted to the front where the
target hoists them) and tokenized with ``cl100k_base`` (shipped with LiteLLM, offline).

Two cache models, both per session:
- ``lcp``: one slot, longest common token prefix with the previous request (llama.cpp
  ``-np 1``, OpenAI-style prefix caching);
- ``blocks``: 16-token blocks keyed by a hash chained over all earlier blocks, every
  block seen in the session kept (vLLM automatic prefix caching, unlimited memory).
"""
from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

BLOCK = 16
ROUTES = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}
_CALL_TYPES = {"chat": "acompletion", "messages": "anthropic_messages", "responses": "aresponses"}
_META_KEYS = ("session_id", "route", "target")


@lru_cache(maxsize=1)
def encoding():
    """cl100k_base from the copy LiteLLM ships (no download, no LiteLLM import)."""
    spec = importlib.util.find_spec("litellm")
    if spec and spec.submodule_search_locations:
        cache = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
        if cache.is_dir():
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache))
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def tokens(text: str) -> list[int]:
    return encoding().encode(text, disallowed_special=())


@dataclass(frozen=True)
class Turn:
    session: str
    route: str
    request: dict[str, Any]
    target: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_line(cls, raw: Mapping[str, Any]) -> "Turn":
        request = {k: v for k, v in raw.items() if k not in _META_KEYS}
        route = raw.get("route", "chat")
        if route not in ROUTES:
            raise ValueError(f"unknown route {route!r} (use one of {', '.join(ROUTES)})")
        return cls(str(raw.get("session_id", "")), route, request, dict(raw.get("target") or {}))


def load(path: str | Path) -> list[Turn]:
    turns = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                try:
                    turns.append(Turn.from_line(json.loads(line)))
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"{path}:{number}: {exc}") from None
    return turns


# -- rendering ---------------------------------------------------------------------------


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
    from .rules.mid_system import HOISTING_PROVIDERS

    return target.get("provider") in HOISTING_PROVIDERS or bool(target.get("system_messages_first"))


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


# -- cache models ----------------------------------------------------------------------


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@dataclass
class CacheModel:
    """Both cache models over one session's requests."""

    previous: list[int] = field(default_factory=list)
    blocks: set[bytes] = field(default_factory=set)

    def feed(self, ids: list[int]) -> tuple[int, int]:
        """(re-processed tokens by lcp, by blocks) for the next request."""
        lcp = common_prefix(self.previous, ids)
        self.previous = ids
        digest = b""
        cached = 0
        hit = True
        for start in range(0, len(ids) - len(ids) % BLOCK, BLOCK):
            digest = hashlib.sha256(digest + json.dumps(ids[start : start + BLOCK]).encode()).digest()
            if hit and digest in self.blocks:
                cached += BLOCK
            else:
                hit = False
            self.blocks.add(digest)
        return len(ids) - lcp, len(ids) - cached


@dataclass
class Totals:
    prompt: int = 0
    lcp: int = 0
    blocks: int = 0
    per_turn: list[int] = field(default_factory=list)

    def add(self, prompt: int, lcp: int, blocks: int) -> None:
        self.prompt += prompt
        self.lcp += lcp
        self.blocks += blocks
        self.per_turn.append(lcp)

    @property
    def hit_rate(self) -> float:
        return 1 - self.lcp / self.prompt if self.prompt else 0.0


def account(turns: Iterable[Turn]) -> Totals:
    models: dict[str, CacheModel] = {}
    totals = Totals()
    for turn in turns:
        ids = tokens(render(turn))
        lcp, blocks = models.setdefault(turn.session, CacheModel()).feed(ids)
        totals.add(len(ids), lcp, blocks)
    return totals


def stabilized(turns: list[Turn], settings) -> list[Turn]:
    """The same turns as the plugin would send them (one in-memory journal per replay)."""
    from .context import Target
    from .core import Stabilizer

    stabilizer = Stabilizer(settings)
    out = []
    for turn in turns:
        data = copy.deepcopy(turn.request)
        data.setdefault("metadata", {})["session_id"] = turn.session
        if turn.route == "messages":
            data["litellm_metadata"] = data.pop("metadata")
        target = Target(provider=str(turn.target.get("provider", "")),
                        system_messages_first=bool(turn.target.get("system_messages_first")))
        result = stabilizer.stabilize_sync(data, _CALL_TYPES[turn.route], target=target)
        result.pop("metadata", None)
        result.pop("litellm_metadata", None)
        out.append(Turn(turn.session, turn.route, dict(result), turn.target))
    return out


# -- diff ------------------------------------------------------------------------------


def explain(a: Mapping[str, Any], b: Mapping[str, Any], route: str = "chat") -> dict[str, Any]:
    """Why request ``b`` does not reuse ``a``'s prefix: where, in which part, and the cost."""
    from . import wire
    from .context import Context
    from .drift import head_record, what_changed
    from .settings import Settings

    first, second = Turn("diff", route, dict(a)), Turn("diff", route, dict(b))
    text_a, text_b = render(first), render(second)
    ids_a, ids_b = tokens(text_a), tokens(text_b)
    lcp = common_prefix(ids_a, ids_b)
    char = len(encoding().decode(ids_b[:lcp]))
    adapter = wire.wire_for(b, _CALL_TYPES[route])
    changed: list[str] = []
    if adapter is not None:
        ctx = Context(settings=Settings())
        record_a, _ = head_record(adapter.read(a), ctx)
        record_b, _ = head_record(adapter.read(b), ctx)
        changed = what_changed(record_a, record_b)
        if not changed:
            changed = ["messages"] if lcp < len(ids_a) else []
    return {
        "identical": text_a == text_b,
        "first_diff_char": char,
        "first_diff_token": lcp,
        "changed": changed,
        "tokens_a": len(ids_a),
        "tokens_b": len(ids_b),
        "reprefill_tokens": len(ids_b) - lcp,
        "context": {"a": text_a[max(0, char - 40) : char + 40], "b": text_b[max(0, char - 40) : char + 40]},
    }
