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
- ``place_cache_breakpoints``: marks where the target caches only at explicit marks and the
  client (and the LiteLLM config: ``cache_control_injection_points``, a top-level
  ``cache_control``) marked nothing. A request that already carries any mark (the client's, or
  ours on a retry) is left exactly as it is: a client's marks are never moved or added to, and
  the total never exceeds the provider's 4.

  *Anthropic family* (Anthropic, Bedrock, Vertex Claude: ``cache_control``), chat and
  ``/v1/messages``. Up to four marks, each on the block Anthropic counts:
  the end of the head in cache order (tools -> system -> messages: the last system block,
  else the last tool); the end of the previous request, which for an append-only client is
  the message right before the newest assistant message (its entry was written by the
  previous turn, so it reads exactly there however many blocks the answer appended: a
  breakpoint looks back only 20 blocks); and the newest message, where this turn writes.
  Where the agent's profile says its own context comes first (aider's example conversation, the
  same in every session, and its repo map: ``Context.context_ends``), the marks left end it, so
  a new session reads what earlier ones wrote there. A breakpoint is not part of the cached bytes, so the
  marks that move cost nothing; only
  the tokens between the read and the last mark are written (1.25x, 2x for ``ttl: 1h``),
  and extra marks on the way add no write. On a chat ``tool`` message the mark goes on the
  message (LiteLLM puts a message mark on the ``tool_result`` block; a mark on a content
  part lands *inside* the result, where nothing shows Anthropic counts it), so an empty
  result is marked too. No mark closes a prefix shorter than the model's minimum
  (cost map ``prompt_cache_min_tokens``, else 1,024): Anthropic neither caches nor bills
  it, and the mark is one of four. ``cacheTtl`` (``5m``/``1h``) sets the marks' TTL.

  *OpenAI GPT-5.6 and later* (``prompt_cache_breakpoint``, where LiteLLM itself treats the
  deployment as that dialect: ``Target.reads_prompt_cache_breakpoint``), chat and
  Responses. OpenAI places its own breakpoint at the latest user or tool message and, from
  5.6 on, matches only exactly at a breakpoint written before (no fallback to a shorter
  prefix): one explicit mark at the end of the head (the last leading system or developer
  message) lets a request whose tail changed still read the head. Where the request asks
  for ``prompt_cache_options.mode: explicit`` (OpenAI's own breakpoint is off) the newest
  user or tool message is marked too. ``prompt_cache_options`` is never set or changed.
  Nothing is sent to a model that does not read these marks, and no Anthropic
  ``cache_control`` ever goes to an OpenAI target.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ...caches import compact_json
from ..context import Context
from ..events import Event
from ..target import Target
from ..view import is_system_message
from .mid_system import openai_own_api

MARK: Mapping[str, str] = {"type": "ephemeral"}
MARK_1H: Mapping[str, str] = {"type": "ephemeral", "ttl": "1h"}
OPENAI_MARK: Mapping[str, str] = {"mode": "explicit"}
# Anthropic's documented minimum for Sonnet and Opus, where the cost map names none.
ANTHROPIC_MIN_TOKENS = 1024
OPENAI_MIN_TOKENS = 1024
BYTES_PER_TOKEN = 4  # the estimate the minimum is checked with (compact JSON)
# Providers whose own API documents ``prompt_cache_key`` for its prompt cache (OpenAI's prompt
# caching guide, Azure OpenAI's and Mistral's); ``openai`` only on OpenAI's own host.
PROMPT_CACHE_KEY_PROVIDERS = frozenset({"openai", "azure", "mistral"})
MARK_KEYS = ("cache_control", "prompt_cache_breakpoint")
# Anthropic content blocks that may carry cache_control (thinking blocks may not).
MARKABLE_BLOCKS = frozenset({"text", "image", "image_url", "document", "file", "tool_use", "tool_result",
                             "search_result", "input_audio", "input_text", "input_image", "input_file"})


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
    if target.wants_prompt_cache_key or target.reads_prompt_cache_breakpoint:
        return True  # (LiteLLM itself treats a deployment that reads OpenAI's breakpoints as OpenAI's API)
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


# -- cache marks -------------------------------------------------------------------


def _marked(value: Any) -> bool:
    return isinstance(value, Mapping) and any(value.get(k) is not None for k in MARK_KEYS)


def _parts_marked(content: Any) -> int:
    return sum(_marked(part) for part in content) if isinstance(content, list) else 0


def count_marks(data: Mapping[str, Any]) -> int:
    """Marks the request already carries: tools, system blocks, messages (chat and Anthropic) or
    Responses input items, their parts and tool calls."""
    n = 0
    for tool in data.get("tools") or ():
        n += _marked(tool) or (isinstance(tool, Mapping) and _marked(tool.get("function")))
    n += _parts_marked(data.get("system"))
    for key in ("messages", "input"):
        items = data.get(key)
        if not isinstance(items, list):
            continue
        for message in items:
            if not isinstance(message, Mapping):
                continue
            n += _marked(message) + _parts_marked(message.get("content")) + _parts_marked(message.get("output"))
            for call in message.get("tool_calls") or ():
                n += _marked(call)
    return n


def _mark_for(ctx: Context) -> dict[str, str]:
    return dict(MARK_1H if ctx.settings.cache_ttl == "1h" else MARK)


def _with(block: Mapping[str, Any], key: str, mark: Mapping[str, str]) -> dict[str, Any]:
    return {**block, key: dict(mark)}


def _markable(block: Any) -> bool:
    if not isinstance(block, Mapping) or block.get("type") not in MARKABLE_BLOCKS:
        return False
    return block.get("type") not in ("text", "input_text") or bool(block.get("text"))


def _marked_content(content: Any, key: str, mark: Mapping[str, str], text_type: str = "text") -> Any | None:
    """``content`` with a mark on its last block that may carry one (a string becomes one text
    block); None where none may."""
    if isinstance(content, str):
        return [_with({"type": text_type, "text": content}, key, mark)] if content else None
    if isinstance(content, list):
        for i in range(len(content) - 1, -1, -1):
            if _markable(content[i]):
                return [*content[:i], _with(content[i], key, mark), *content[i + 1:]]
    return None


def _marked_message(message: Any, key: str, mark: Mapping[str, str], text_type: str = "text") -> Any | None:
    if not isinstance(message, Mapping):
        return None
    content = _marked_content(message.get("content"), key, mark, text_type)
    return None if content is None else {**message, "content": content}


def _anthropic_marked_message(message: Any, mark: Mapping[str, str]) -> Any | None:
    """A chat ``tool`` message carries the mark itself (LiteLLM puts it on the ``tool_result``
    block, empty results included); any other message on its last block that may carry one."""
    if isinstance(message, Mapping) and message.get("role") in ("tool", "function"):
        return _with(message, "cache_control", mark)
    return _marked_message(message, "cache_control", mark)


class _Prefix:
    """Whether the request's prefix up to an item reaches ``minimum`` tokens (estimated from
    compact JSON; serialised lazily, and only until the minimum is reached)."""

    def __init__(self, items: list[Any], minimum: int) -> None:
        self.items, self.need = items, minimum * BYTES_PER_TOKEN
        self._sizes: list[int] = []

    def reaches(self, index: int) -> bool:
        """The items up to and including ``index`` reach the minimum."""
        if not self.need:
            return True
        while len(self._sizes) <= index:
            done = self._sizes[-1] if self._sizes else 0
            if done >= self.need:
                return True
            self._sizes.append(done + len(compact_json(self.items[len(self._sizes)]).encode()))
        return self._sizes[index] >= self.need


def _previous_end(messages: list[Any], head: int) -> int | None:
    """The message an append-only client's previous request ended with: the one right before
    its newest assistant message (None: no earlier turn, or that is the head's)."""
    for i in range(len(messages) - 1, head, -1):
        if isinstance(messages[i], Mapping) and messages[i].get("role") == "assistant":
            return i - 1 if i - 1 >= head else None
    return None


def _skips_marks(data: Mapping[str, Any]) -> bool:
    return bool(data.get("cache_control_injection_points")) or data.get("cache_control") is not None \
        or count_marks(data) > 0


def _anthropic_marks(data: Mapping[str, Any], shape: str, ctx: Context) -> tuple[dict[str, Any], list[str]]:
    messages = data.get("messages")
    if not isinstance(messages, list):
        return {}, []
    mark = _mark_for(ctx)
    tools = data.get("tools") if isinstance(data.get("tools"), list) else []
    system = data.get("system") if shape == "anthropic" else None
    # The prefix in Anthropic's cache order: tools, system, messages.
    head_items: list[Any] = [*tools, *(system if isinstance(system, list) else [system] if system else [])]
    head = 0
    if shape == "chat":
        while head < len(messages) and is_system_message(messages[head]):
            head += 1
    prefix = _Prefix([*head_items, *messages], ctx.target.cache_min_tokens or ANTHROPIC_MIN_TOKENS)
    updates: dict[str, Any] = {}
    placed: list[str] = []
    new_messages = list(messages)
    if system and prefix.reaches(len(head_items) - 1):
        marked_system = _marked_content(system, "cache_control", mark)
        if marked_system is not None and not (isinstance(system, list) and marked_system[-1] is system[-1]):
            updates["system"] = marked_system  # only the last system block ends the head
            placed.append("system")
    elif head and prefix.reaches(len(head_items) + head - 1):
        marked = _marked_message(messages[head - 1], "cache_control", mark)
        if marked is not None:
            new_messages[head - 1] = marked
            placed.append("system")
    if not placed and tools and prefix.reaches(len(tools) - 1) and isinstance(tools[-1], Mapping):
        updates["tools"] = [*tools[:-1], _with(tools[-1], "cache_control", mark)]
        placed.append("tools")
    contexts = [i for i in ctx.context_ends if head <= i < len(messages) - 1]
    previous = _previous_end(messages, head)
    if contexts and previous is not None and previous <= contexts[-1]:
        previous = None  # the agent's own context, not an earlier turn of the conversation
    spots = [("previous_end", previous), ("last_message", len(messages) - 1 if len(messages) > head else None)]
    room = 4 - len(placed) - sum(index is not None for _, index in spots)
    spots[:0] = [("agent_context", i) for i in contexts[:max(0, room)]]
    for name, index in spots:
        if index is not None and new_messages[index] is not messages[index]:
            continue  # marked already
        if index is None or not prefix.reaches(len(head_items) + index):
            continue
        marked = _anthropic_marked_message(messages[index], mark)
        if marked is not None:
            new_messages[index] = marked
            placed.append(name)
    if any(a is not b for a, b in zip(new_messages, messages)):
        updates["messages"] = new_messages
    return updates, placed


def _openai_marks(data: Mapping[str, Any], shape: str, ctx: Context) -> tuple[dict[str, Any], list[str]]:
    key = "messages" if shape == "chat" else "input"
    items = data.get(key)
    if not isinstance(items, list):
        return {}, []
    text_type = "text" if shape == "chat" else "input_text"
    head = 0
    while head < len(items) and is_system_message(items[head]):
        head += 1
    tools = data.get("tools") if isinstance(data.get("tools"), list) else []
    instructions = [data["instructions"]] if isinstance(data.get("instructions"), str) else []
    prefix = _Prefix([*tools, *instructions, *items], ctx.target.cache_min_tokens or OPENAI_MIN_TOKENS)
    before = len(tools) + len(instructions)
    new_items = list(items)
    placed: list[str] = []
    if head and prefix.reaches(before + head - 1):
        marked = _marked_message(items[head - 1], "prompt_cache_breakpoint", OPENAI_MARK, text_type)
        if marked is not None:
            new_items[head - 1] = marked
            placed.append("system")
    options = data.get("prompt_cache_options")
    if isinstance(options, Mapping) and options.get("mode") == "explicit":
        newest = next((i for i in range(len(items) - 1, head - 1, -1) if isinstance(items[i], Mapping)
                       and (items[i].get("role") in ("user", "tool") or items[i].get("type") == "function_call_output")),
                      None)
        if newest is not None and prefix.reaches(before + newest):
            marked = _marked_message(items[newest], "prompt_cache_breakpoint", OPENAI_MARK, text_type)
            if marked is None and items[newest].get("role") == "tool":
                marked = _marked_message({**items[newest], "content": [{"type": "text", "text": ""}]},
                                         "prompt_cache_breakpoint", OPENAI_MARK)
            if marked is not None:
                new_items[newest] = marked
                placed.append("last_message")
    if not placed:
        return {}, []
    return {key: new_items}, placed


def place_cache_breakpoints(data: Mapping[str, Any], shape: str, ctx: Context) -> tuple[dict[str, Any], list[Event]]:
    """Cache marks for a target that caches only at explicit marks (see the module text)."""
    if not ctx.settings.cache_breakpoints or _skips_marks(data):
        return {}, []
    if ctx.target.reads_cache_control and shape in ("chat", "anthropic"):
        updates, placed = _anthropic_marks(data, shape, ctx)
        kind = "cache_control"
    elif ctx.target.reads_prompt_cache_breakpoint and shape in ("chat", "responses"):
        updates, placed = _openai_marks(data, shape, ctx)
        kind = "prompt_cache_breakpoint"
    else:
        return {}, []
    if not placed:
        return {}, []
    return updates, [Event("cache_breakpoints", {"placed": placed, "kind": kind})]
