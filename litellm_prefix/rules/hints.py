"""Provider cache hints: ``prompt_cache_key`` and Anthropic ``cache_control`` breakpoints.

Hosted providers route and cache by hints the client often does not send. Both rules are
pure functions of (request fields, shape, context) -> (fields to set, events), run on the
request that goes to the chosen deployment (the deployment hook), after the view rules.

- ``set_prompt_cache_key``: OpenAI picks a cache machine from a hash of about the first
  256 tokens combined with ``prompt_cache_key``. Sent only where the provider documents
  using it for its cache (``PROMPT_CACHE_KEY_PROVIDERS``: OpenAI's own API, chat and
  Responses; Azure OpenAI; Mistral's API), LiteLLM forwards it (the shell asks
  ``litellm.get_supported_openai_params`` for that provider and route), and the client
  sent none. Never to a self-hosted OpenAI-compatible server (``hosted_vllm``, ollama...,
  and an ``openai/`` deployment whose ``api_base`` is not OpenAI's: most often a vLLM or
  llama.cpp server, which ignores the key, and a body field it does not know is one
  more thing for a strict server to reject), unless the deployment asks for it
  (``model_info.litellm_prefix.promptCacheKey: true``, ``Target.wants_prompt_cache_key``).
  The key is a hash of the tenant-scoped session key: the same on every turn and every
  replica of one session, different between tenants, never the raw session id. A
  client's own key is never touched.
- ``place_cache_breakpoints``: Anthropic-family targets (Anthropic, Bedrock, Vertex Claude)
  read the cache only up to explicit breakpoints. When neither the client nor the LiteLLM
  config (``cache_control_injection_points``) marked anything, two marks: one at the end of
  the head in Anthropic's cache order (tools -> system -> messages: the last system block,
  else the last tool) and one on the last message. The head mark sits on the same block
  every turn; the message mark moves to the newest message each turn, which is Anthropic's
  own incremental pattern (a breakpoint is not part of the cached bytes, and each one looks
  back up to 20 blocks for the previous turn's entry). A request that already carries any
  mark (the client's, or ours on a retry) is left exactly as it is: a client's own marks are
  never moved or added to, and the total never exceeds Anthropic's 4.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ..context import Context, Event, Target
from ..view import is_system_message
from .mid_system import openai_own_api

MARK: Mapping[str, str] = {"type": "ephemeral"}
# Providers whose own API documents ``prompt_cache_key`` for its prompt cache (OpenAI's prompt
# caching guide, Azure OpenAI's and Mistral's); ``openai`` only on OpenAI's own host.
PROMPT_CACHE_KEY_PROVIDERS = frozenset({"openai", "azure", "mistral"})
MARK_KEYS = ("cache_control", "prompt_cache_breakpoint")
# Anthropic content blocks that may carry cache_control (thinking blocks may not).
MARKABLE_BLOCKS = frozenset({"text", "image", "image_url", "document", "file", "tool_use", "tool_result",
                             "search_result", "input_audio"})


@lru_cache(maxsize=4096)
def prompt_cache_key_for(session_key: str) -> str:
    """The key sent for one session: a hash of the tenant-scoped session key (never the raw id).
    (Remembered: a session asks for its key on every request.)"""
    return "lp-" + hashlib.sha256(f"prompt-cache-key\x00{session_key}".encode()).hexdigest()[:32]


def target_uses_prompt_cache_key(target: Target) -> bool:
    """LiteLLM forwards the key to this target, and the target reads it for its cache (or the
    deployment asked for it)."""
    if not target.accepts_prompt_cache_key:
        return False
    if target.wants_prompt_cache_key:
        return True
    return target.provider in PROMPT_CACHE_KEY_PROVIDERS and (
        target.provider != "openai" or openai_own_api(target.api_base))


def set_prompt_cache_key(data: Mapping[str, Any], shape: str, ctx: Context) -> tuple[dict[str, Any], list[Event]]:
    if (
        not ctx.settings.prompt_cache_key
        or not target_uses_prompt_cache_key(ctx.target)
        or shape not in ("chat", "responses")
        or not ctx.session_key
        or data.get("prompt_cache_key") is not None
    ):
        return {}, []
    key = prompt_cache_key_for(ctx.session_key)
    return {"prompt_cache_key": key}, [Event("prompt_cache_key", {"key": key})]


# -- cache_control breakpoints -------------------------------------------------------


def _marked(value: Any) -> bool:
    return isinstance(value, Mapping) and any(value.get(k) is not None for k in MARK_KEYS)


def count_marks(data: Mapping[str, Any]) -> int:
    """Breakpoints the request already carries: tools, system blocks, messages, their parts and tool calls."""
    n = 0
    for tool in data.get("tools") or ():
        n += _marked(tool)
    system = data.get("system")
    if isinstance(system, list):
        n += sum(_marked(block) for block in system)
    for message in data.get("messages") or ():
        if not isinstance(message, Mapping):
            continue
        n += _marked(message)
        content = message.get("content")
        if isinstance(content, list):
            n += sum(_marked(part) for part in content)
        for call in message.get("tool_calls") or ():
            n += _marked(call)
    return n


def _with_mark(block: Mapping[str, Any]) -> dict[str, Any]:
    return {**block, "cache_control": dict(MARK)}


def _markable(block: Any) -> bool:
    if not isinstance(block, Mapping) or block.get("type") not in MARKABLE_BLOCKS:
        return False
    return block.get("type") != "text" or bool(block.get("text"))


def _marked_content(content: Any) -> Any | None:
    """``content`` with a mark on its last markable block (a string becomes one text block); None if none."""
    if isinstance(content, str):
        return [_with_mark({"type": "text", "text": content})] if content else None
    if isinstance(content, list):
        for i in range(len(content) - 1, -1, -1):
            if _markable(content[i]):
                return [*content[:i], _with_mark(content[i]), *content[i + 1:]]
    return None


def _marked_last_tool(tools: Any) -> list[Any] | None:
    if isinstance(tools, list) and tools and isinstance(tools[-1], Mapping):
        return [*tools[:-1], _with_mark(tools[-1])]
    return None


def _marked_message(message: Any) -> Any | None:
    if not isinstance(message, Mapping):
        return None
    content = _marked_content(message.get("content"))
    return None if content is None else {**message, "content": content}


def place_cache_breakpoints(data: Mapping[str, Any], shape: str, ctx: Context) -> tuple[dict[str, Any], list[Event]]:
    if (
        not ctx.settings.cache_breakpoints
        or not ctx.target.reads_cache_control
        or shape not in ("chat", "anthropic")
        or data.get("cache_control_injection_points")
        or data.get("cache_control") is not None
        or count_marks(data) > 0
    ):
        return {}, []
    messages = data.get("messages")
    if not isinstance(messages, list):
        return {}, []
    updates: dict[str, Any] = {}
    placed: list[str] = []
    new_messages = list(messages)
    if shape == "anthropic":
        system = data.get("system")
        new_system = _marked_content(system) if isinstance(system, (str, list)) else None
        if isinstance(system, list) and system and new_system is not None and new_system[-1] is system[-1]:
            new_system = None  # only the last system block ends the head
        if new_system is not None:
            updates["system"] = new_system
            placed.append("system")
        head = 0
    else:
        head = 0
        while head < len(messages) and is_system_message(messages[head]):
            head += 1
        if head:
            marked = _marked_message(messages[head - 1])
            if marked is not None:
                new_messages[head - 1] = marked
                placed.append("system")
    if not placed:
        tools = _marked_last_tool(data.get("tools"))
        if tools is not None:
            updates["tools"] = tools
            placed.append("tools")
    if len(messages) > head:
        marked = _marked_message(messages[-1])
        if marked is not None:
            new_messages[-1] = marked
            placed.append("last_message")
    if any(a is not b for a, b in zip(new_messages, messages)):
        updates["messages"] = new_messages
    if not placed:
        return {}, []
    return updates, [Event("cache_breakpoints", {"placed": placed})]
