"""Anthropic Messages (``POST /v1/messages``) with Anthropic's prompt-cache rules and usage fields.

LiteLLM calls ``{api_base}/v1/messages`` for an ``anthropic/claude-…`` deployment, both for the
proxy's ``/v1/messages`` route and for a chat-completions request it translates
(``llms/anthropic/pass_through/messages/transformation.py`` ``get_complete_url``).

Rules (Anthropic's prompt-caching docs,
https://platform.claude.com/docs/en/build-with-claude/prompt-caching, unless a line says it is our
choice):

- cache order tools -> system -> messages; each tool, each system block and each message content
  block is one block; a ``tool_result`` with its nested content is one block (a string content is
  the one text block it renders as);
- the cache is read and written only at ``cache_control`` breakpoints; a top-level request
  ``cache_control`` (automatic caching) marks the last cacheable block (not a thinking block) and
  takes one of the four slots; where that block carries its own mark, its own stays (our choice:
  the docs do not say);
- more than 4 marks -> HTTP 400, ``A maximum of 4 blocks with cache_control may be provided. Found
  N.``; a ``ttl: "1h"`` mark after a ``"5m"`` one -> HTTP 400 (the docs: longer TTLs first; the
  message text is ours); a TTL other than ``5m``/``1h`` -> HTTP 400;
- a mark nested inside a ``tool_result``'s content: nothing public shows Anthropic treats it as a
  breakpoint. ``nested_marks`` decides (our choice): ``"limit"`` (default, conservative) counts it
  toward the 4-mark limit but it is no breakpoint; ``"breakpoint"`` also makes the ``tool_result``
  block a breakpoint; ``"ignore"`` neither;
- minimum cacheable prefix per model: LiteLLM's cost map ``prompt_cache_min_tokens`` (1,024 Sonnet
  4.5, 4,096 Haiku 4.5 and Opus 4.5), else ``MINIMUM_TABLE`` (1,024 Sonnet/Opus 4.x, 2,048 Haiku
  3.x); a shorter breakpoint neither reads nor writes;
- each breakpoint looks back at most 20 block boundaries (itself included); the read is the
  longest hit; every breakpoint at or above the minimum writes (creates or refreshes) its entry;
  ``cache_creation_input_tokens`` = from the end of the read to the last breakpoint;
  ``input_tokens`` the rest; entries live 5 min (``ttl: "1h"``: 3,600 s), refreshed on every hit;
  scoped per model and API key (``cache.AnthropicRules``);
- usage: ``input_tokens``, ``cache_creation_input_tokens``, ``cache_read_input_tokens``,
  ``cache_creation: {ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}``, ``output_tokens``.

Wire: the request becomes a chat view for the scripted model's ``decide`` (system -> a system
message; text -> user/assistant text; ``tool_use`` -> assistant ``tool_calls``; ``tool_result`` ->
a ``tool`` message); the reply is a ``message`` (text / ``tool_use`` blocks, ids ``toolu_…``) or
Anthropic's event stream (``message_start`` … ``message_stop``, as in Anthropic's streaming docs,
https://docs.anthropic.com/en/docs/build-with-claude/streaming).
"""
from __future__ import annotations

import hashlib
import json
import re
import uuid
from typing import Any

from harness.providers.cache import IMAGE_TOKENS, AnthropicRules, Charge, Part, prompt_of, tokens_with_images
from harness.providers.wire import Exchange, Rejected, caller_key, cost_entry, sse

TTL_SECONDS = {"5m": 300, "1h": 3600}
MAX_MARKS = 4
NESTED_MARKS = ("limit", "breakpoint", "ignore")
# Used where the cost map has no prompt_cache_min_tokens (first match on the model name).
MINIMUM_TABLE = ((re.compile(r"haiku-4|opus-4-[5-9]|opus-[5-9]"), 4096), (re.compile(r"haiku"), 2048),
                 (re.compile(r"."), 1024))
NOT_CACHEABLE = frozenset({"thinking", "redacted_thinking"})


def minimum_tokens(model: str) -> int:
    entry = cost_entry(model, "anthropic")
    if isinstance(entry.get("prompt_cache_min_tokens"), int):
        return entry["prompt_cache_min_tokens"]
    return next(n for pattern, n in MINIMUM_TABLE if pattern.search(model))


def error_body(message: str, kind: str = "invalid_request_error") -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": f"req_{uuid.uuid4().hex[:24]}"}


def reject(message: str) -> Rejected:
    return Rejected(400, error_body(message), message)


def ttl_of(mark: Any, where: str) -> int:
    if not isinstance(mark, dict) or mark.get("type") != "ephemeral":
        raise reject(f"{where}.cache_control.type: Input should be 'ephemeral'")
    ttl = mark.get("ttl", "5m")
    if ttl not in TTL_SECONDS:
        raise reject(f"{where}.cache_control.ttl: Input should be '5m' or '1h'")
    return TTL_SECONDS[ttl]


def blocks_of(content: Any) -> list:
    """A content as its list of blocks (a string is the one text block it renders as)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def is_image(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "image"


def _tokens(content: Any) -> int:
    return tokens_with_images(content, is_image, IMAGE_TOKENS["anthropic"])


def nested_mark_ttls(block: dict, where: str) -> list[int]:
    if block.get("type") != "tool_result" or not isinstance(block.get("content"), list):
        return []
    return [ttl_of(inner["cache_control"], f"{where}.content[{n}]") for n, inner in enumerate(block["content"])
            if isinstance(inner, dict) and inner.get("cache_control") is not None]


def request_parts(body: dict, nested_marks: str = "limit") -> tuple[list[Part], list[int]]:
    """The request's blocks in cache order, and the TTLs of every mark that counts toward the limit,
    in order."""
    parts: list[Part] = []
    counted: list[int] = []

    def add(label: str, content: dict, mark: Any, nested: list[int] = ()) -> None:
        ttl = ttl_of(mark, label) if mark is not None else None
        if nested_marks != "ignore":
            counted.extend(nested)
        if ttl is None and nested and nested_marks == "breakpoint":
            ttl = max(nested)
        if mark is not None:
            counted.append(ttl)
        parts.append(Part(label, content, ttl, _tokens(content)))

    for i, tool in enumerate(body.get("tools") or []):
        add(f"tools[{i}]", {"tool": tool}, tool.get("cache_control") if isinstance(tool, dict) else None)
    for i, block in enumerate(blocks_of(body.get("system"))):
        add(f"system[{i}]", {"system": block}, block.get("cache_control") if isinstance(block, dict) else None)
    for i, message in enumerate(body.get("messages") or []):
        role = message.get("role")
        for j, block in enumerate(blocks_of(message.get("content"))):
            where = f"messages[{i}].content[{j}]"
            if not isinstance(block, dict):
                parts.append(Part(where, {"role": role, "block": block}))
                continue
            add(where, {"role": role, "block": block}, block.get("cache_control"), nested_mark_ttls(block, where))
    automatic = body.get("cache_control")
    if automatic is not None:
        ttl = ttl_of(automatic, "cache_control")
        last = next((n for n in range(len(parts) - 1, -1, -1) if _cacheable(parts[n])), None)
        if last is not None and parts[last].ttl is None:
            parts[last] = Part(parts[last].label, parts[last].content, ttl, parts[last].tokens)
            counted.append(ttl)
    return parts, counted


def _cacheable(part: Part) -> bool:
    block = part.content.get("block") if isinstance(part.content, dict) else None
    return not (isinstance(block, dict) and block.get("type") in NOT_CACHEABLE)


def check_marks(counted: list[int]) -> None:
    if len(counted) > MAX_MARKS:
        raise reject(f"A maximum of {MAX_MARKS} blocks with cache_control may be provided. Found {len(counted)}.")
    for earlier, later in zip(counted, counted[1:]):
        if later > earlier:
            raise reject("Prompt caching: a cache_control block with ttl='1h' cannot come after one with ttl='5m'; "
                         "longer TTLs must come first.")


# -- the chat view -------------------------------------------------------------------------


def text_of_blocks(content: Any) -> str:
    return "\n".join(b.get("text", "") for b in blocks_of(content) if isinstance(b, dict) and b.get("type") == "text")


def _image_part(block: dict) -> dict:
    source = block.get("source") or {}
    url = source.get("url") or f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_messages(content: Any) -> list[dict]:
    out: list[dict] = []
    parts: list[dict] = []
    for block in blocks_of(content):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_result":
            result = block.get("content")
            out.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                        "content": result if isinstance(result, str) else text_of_blocks(result)})
        elif kind == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            parts.append(_image_part(block))
    if parts:
        out.append({"role": "user", "content": parts})
    return out


def _assistant_message(content: Any) -> dict:
    blocks = [b for b in blocks_of(content) if isinstance(b, dict)]
    message: dict[str, Any] = {"role": "assistant", "content": text_of_blocks(blocks) or None}
    calls = [{"id": b.get("id"), "type": "function",
              "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})}}
             for b in blocks if b.get("type") == "tool_use"]
    if calls:
        message["tool_calls"] = calls
    return message


def chat_view(body: dict) -> dict:
    messages: list[dict] = []
    system = text_of_blocks(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for message in body.get("messages") or []:
        if message.get("role") == "assistant":
            messages.append(_assistant_message(message.get("content")))
        else:
            messages.extend(_user_messages(message.get("content")))
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                               "parameters": t.get("input_schema") or {}}}
             for t in body.get("tools") or [] if isinstance(t, dict) and t.get("name")]
    view: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    if tools:
        view["tools"] = tools
    return view


# -- one exchange ----------------------------------------------------------------------------


def prepare(body: dict, headers: dict[str, str], nested_marks: str = "limit") -> Exchange:
    if not isinstance(body.get("messages"), list):
        raise reject("messages: Field required")
    model = str(body.get("model") or "")
    parts, counted = request_parts(body, nested_marks)
    check_marks(counted)
    rules = AnthropicRules(minimum=minimum_tokens(model))
    return Exchange("anthropic", model, rules, f"anthropic|{model}|{caller_key(headers)}", prompt_of(parts),
                    chat_view(body), bool(body.get("stream")))


def usage_of(charge: Charge, output_tokens: int) -> dict:
    return {"input_tokens": charge.input, "cache_creation_input_tokens": charge.write_total,
            "cache_read_input_tokens": charge.read,
            "cache_creation": {"ephemeral_5m_input_tokens": charge.written.get(300, 0),
                               "ephemeral_1h_input_tokens": charge.written.get(3600, 0)},
            "output_tokens": output_tokens}


def content_of(reply: dict) -> list[dict]:
    """The reply's content blocks; a tool call's ``toolu_`` id is derived from ``decide``'s id (the
    same answer, the same id)."""
    if "tool_calls" in reply:
        return [{"type": "tool_use", "id": "toolu_" + hashlib.sha256(c["id"].encode()).hexdigest()[:24], "name": c["name"],
                 "input": json.loads(c["arguments"] or "{}")} for c in reply["tool_calls"]]
    return [{"type": "text", "text": reply.get("text") or ""}]


def message_of(model: str, content: list[dict], usage: dict) -> dict:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}


def events_of(message: dict) -> list[bytes]:
    """``message`` as Anthropic streams it."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
    out = [sse({"type": "message_start", "message": start}, "message_start"), sse({"type": "ping"}, "ping")]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(sse({"type": "content_block_start", "index": index, "content_block": opening}, "content_block_start"))
        out.append(sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"))
        out.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    out.append(sse({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": usage}, "message_delta"))
    out.append(sse({"type": "message_stop"}, "message_stop"))
    return out


def output_tokens_of(content: list[dict]) -> int:
    return max(1, len(json.dumps(content)) // 4)


def count_tokens(body: dict) -> dict:
    """``POST /v1/messages/count_tokens``: the prompt's estimate."""
    parts, _ = request_parts(body, "ignore")
    return {"input_tokens": prompt_of(parts).tokens}
