"""OpenAI chat completions (``POST /v1/chat/completions``) and Responses (``POST /v1/responses``)
with OpenAI's prompt-cache rules and usage fields.

LiteLLM calls ``{api_base}/chat/completions`` and ``{api_base}/responses`` for an ``openai/…``
deployment (``api_base`` ending in ``/v1``); ``openai/responses/gpt-5.6`` sends chat requests
through its Responses bridge.

Two rule sets, chosen by model (``rules_for``: the cost map's ``supports_prompt_cache_breakpoint``,
else the name: ``gpt-5.6`` and later):

- automatic (OpenAI's prompt-caching guide, https://platform.openai.com/docs/guides/prompt-caching;
  ``cache.AutomaticPrefixRules``): from 1,024 tokens, hits in 128-token steps (cached = the longest
  common prefix with an entry on the machine, at block granularity, rounded down to 1,024 + 128k);
  no write charge; every request stores its prefix; in-memory retention 5 min idle
  (``prompt_cache_retention: "24h"``: 24 h); a machine chosen by a hash of the first 1,024 bytes of
  the serialized prompt with ``prompt_cache_key`` (``cache.MachinePool``), each machine its own
  store; a ``prompt_cache_breakpoint`` is ignored there (our choice);
- GPT-5.6 (the same guide, its explicit-breakpoint section; LiteLLM's cost map: input $4/M, write
  $5/M = 1.25x, read $0.40/M; ``cache.ExplicitBreakpointRules``): ``prompt_cache_breakpoint:
  {"mode": "explicit"}`` (optional ``ttl: "30m"``; other TTLs -> 400, our choice) on content blocks
  of system/developer, user and tool-result content; a mark on assistant output -> HTTP 400; a mark
  on a tool definition -> 400 as an unknown parameter (our choice); the implicit, OpenAI-managed
  breakpoint at the end of the latest user or tool message unless ``prompt_cache_options.mode`` is
  ``explicit``; at most 4 writes a request, the implicit one included, more -> HTTP 400; reads only
  exactly at breakpoints written earlier (the newest 80 entries per machine and
  ``prompt_cache_key``: our reading of "per machine/key"), no 128-token fallback, no lookback;
  minimum 1,024; TTL 30 min; writes reported as ``cache_write_tokens``.

Both: an Anthropic ``cache_control`` key anywhere -> HTTP 400 like OpenAI's unknown-parameter error,
naming its path (``messages[3].content[0].cache_control``). Usage: ``prompt_tokens``,
``prompt_tokens_details: {cached_tokens, cache_write_tokens}`` (chat); ``input_tokens``,
``input_tokens_details: {cached_tokens, cache_write_tokens}`` (Responses).

Cache order: as OpenAI's harmony format renders a conversation (its published format for its open
models, https://cookbook.openai.com/articles/openai-harmony; the hosted models' own rendering is not
published: our assumption that it is the same): the instructions (``instructions`` and the leading
system/developer messages), then the tool definitions, then the rest of the conversation; each
content part, each tool call and each tool output is one block. The routing head (the first 1,024
bytes) is therefore the start of the instructions.

Wire: chat replies reuse the scripted model's ``chat_response``/``chat_stream`` shapes. Responses:
``instructions`` and ``input`` items (``message`` with ``input_text``/``output_text`` parts,
``function_call``, ``function_call_output``, ``reasoning`` left out of the view) and flat function
tools become the chat view; the reply is a ``response`` object or its event stream
(``response.created`` … ``response.completed``, each event with ``type`` and ``sequence_number``,
as OpenAI's streaming reference lists them,
https://platform.openai.com/docs/api-reference/responses-streaming).
"""
from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from typing import Any

from harness.providers.cache import (
    IMAGE_TOKENS,
    AutomaticPrefixRules,
    Charge,
    ExplicitBreakpointRules,
    Part,
    prompt_of,
    tokens_with_images,
)
from harness.providers.wire import Exchange, Rejected, caller_key, cost_entry, sse

BREAKPOINT = "prompt_cache_breakpoint"
EXPLICIT_TTLS = {"30m": 1800}
RETENTION = {None: 300, "in_memory": 300, "in-memory": 300, "24h": 86400}
MARKABLE_ROLES = frozenset({"system", "developer", "user", "tool"})
GPT_VERSION = re.compile(r"gpt-(\d+)(?:\.(\d+))?")


def error_body(message: str, param: str | None, code: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def reject(message: str, param: str | None, code: str = "invalid_value") -> Rejected:
    return Rejected(400, error_body(message, param, code), message)


def reads_breakpoints(model: str) -> bool:
    """Whether ``model`` takes the GPT-5.6 rules: the cost map's flag, else ``gpt-5.6`` and later."""
    entry = cost_entry(model, "openai")
    if isinstance(entry.get("supports_prompt_cache_breakpoint"), bool):
        return entry["supports_prompt_cache_breakpoint"]
    found = GPT_VERSION.search(model.lower())
    return bool(found) and (int(found.group(1)), int(found.group(2) or 0)) >= (5, 6)


def rules_for(model: str, body: dict) -> AutomaticPrefixRules | ExplicitBreakpointRules:
    if reads_breakpoints(model):
        return ExplicitBreakpointRules()
    retention = body.get("prompt_cache_retention")
    if retention not in RETENTION:
        raise reject(f"Invalid value for 'prompt_cache_retention': {retention!r}.", "prompt_cache_retention")
    return AutomaticPrefixRules(retention=RETENTION[retention])


def first_cache_control(value: Any, path: str = "") -> str | None:
    """The path of the first ``cache_control`` key in ``value`` (``messages[3].content[0].cache_control``)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            here = f"{path}.{key}" if path else key
            if key == "cache_control":
                return here
            found = first_cache_control(inner, here)
            if found:
                return found
    elif isinstance(value, list):
        for n, inner in enumerate(value):
            found = first_cache_control(inner, f"{path}[{n}]")
            if found:
                return found
    return None


def refuse_cache_control(body: dict) -> None:
    path = first_cache_control(body)
    if path:
        raise reject(f"Unknown parameter: '{path}'.", path, "unknown_parameter")


def is_image(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in ("image_url", "input_image")


def _tokens(content: Any) -> int:
    return tokens_with_images(content, is_image, IMAGE_TOKENS["openai"])


def mark_ttl(mark: Any, where: str, role: str | None, explicit_rules: bool) -> int | None:
    """A part's breakpoint as a TTL (None: no mark, or rules that ignore marks)."""
    if mark is None or not explicit_rules:
        return None
    if role not in MARKABLE_ROLES:
        raise reject(f"'{where}.{BREAKPOINT}' is not supported on {role} content: cache breakpoints may be set on "
                     "system, developer, user and tool-result content only.", f"{where}.{BREAKPOINT}")
    if not isinstance(mark, dict) or mark.get("mode") != "explicit":
        raise reject(f"Invalid value for '{where}.{BREAKPOINT}.mode': expected 'explicit'.", f"{where}.{BREAKPOINT}.mode")
    ttl = mark.get("ttl", "30m")
    if ttl not in EXPLICIT_TTLS:
        raise reject(f"Invalid value for '{where}.{BREAKPOINT}.ttl': {ttl!r}. Supported values are: '30m'.",
                     f"{where}.{BREAKPOINT}.ttl")
    return EXPLICIT_TTLS[ttl]


def options_of(body: dict) -> tuple[str, int]:
    """(``prompt_cache_options.mode``, its TTL) with OpenAI's defaults, implicit and 30 min."""
    options = body.get("prompt_cache_options") or {}
    if not isinstance(options, dict):
        raise reject("Invalid type for 'prompt_cache_options': expected an object.", "prompt_cache_options")
    mode = options.get("mode", "implicit")
    if mode not in ("implicit", "explicit"):
        raise reject(f"Invalid value for 'prompt_cache_options.mode': {mode!r}.", "prompt_cache_options.mode")
    ttl = options.get("ttl", "30m")
    if ttl not in EXPLICIT_TTLS:
        raise reject(f"Invalid value for 'prompt_cache_options.ttl': {ttl!r}.", "prompt_cache_options.ttl")
    return mode, EXPLICIT_TTLS[ttl]


def with_implicit_breakpoint(parts: list[Part], last_input: int | None, body: dict) -> list[Part]:
    """The parts with the implicit breakpoint on ``last_input`` (the last block of the latest user or
    tool message), unless ``prompt_cache_options.mode`` is explicit; then at most 4 breakpoints."""
    mode, ttl = options_of(body)
    if mode == "implicit" and last_input is not None and parts[last_input].ttl is None:
        old = parts[last_input]
        parts = [*parts[:last_input], Part(old.label, old.content, ttl, old.tokens), *parts[last_input + 1:]]
    writes = sum(1 for p in parts if p.ttl)
    if writes > ExplicitBreakpointRules.max_writes:
        raise reject(f"Too many prompt cache breakpoints: at most {ExplicitBreakpointRules.max_writes} cache writes "
                     f"may be requested per request, including the implicit breakpoint; found {writes}.",
                     BREAKPOINT, "too_many_cache_breakpoints")
    return parts


def refuse_tool_marks(tools: list, explicit_rules: bool) -> None:
    for n, tool in enumerate(tools):
        if explicit_rules and isinstance(tool, dict) and first_breakpoint(tool):
            raise reject(f"Unknown parameter: 'tools[{n}].{first_breakpoint(tool)}'.", f"tools[{n}].{BREAKPOINT}",
                         "unknown_parameter")


def first_breakpoint(value: Any, path: str = "") -> str | None:
    if isinstance(value, dict):
        for key, inner in value.items():
            here = f"{path}.{key}" if path else key
            if key == BREAKPOINT:
                return here
            found = first_breakpoint(inner, here)
            if found:
                return found
    elif isinstance(value, list):
        for n, inner in enumerate(value):
            found = first_breakpoint(inner, f"{path}[{n}]")
            if found:
                return found
    return None


# -- chat completions ------------------------------------------------------------------------


def parts_of_content(content: Any) -> list:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def instructions_count(roles: list) -> int:
    """How many leading messages are instructions (system or developer): harmony renders them ahead
    of the tools."""
    return next((n for n, role in enumerate(roles) if role not in ("system", "developer")), len(roles))


def tool_parts(body: dict, explicit_rules: bool) -> list[Part]:
    tools = body.get("tools") or []
    refuse_tool_marks(tools, explicit_rules)
    return [Part(f"tools[{n}]", {"tool": tool}) for n, tool in enumerate(tools)]


def chat_parts(body: dict, explicit_rules: bool) -> list[Part]:
    messages = body.get("messages") or []
    tools = tool_parts(body, explicit_rules)
    lead = instructions_count([m.get("role") for m in messages])
    parts: list[Part] = []
    last_input: int | None = None
    for i, message in enumerate(messages):
        if i == lead:
            parts += tools
        role = message.get("role")
        content = parts_of_content(message.get("content"))
        extra = {"tool_call_id": message["tool_call_id"]} if message.get("tool_call_id") else {}
        for j, part in enumerate(content):
            where = f"messages[{i}].content[{j}]"
            ttl = mark_ttl(part.get(BREAKPOINT) if isinstance(part, dict) else None, where, role, explicit_rules)
            block = {"role": role, **extra, "part": part}
            parts.append(Part(where, block, ttl, _tokens(block)))
        for k, call in enumerate(message.get("tool_calls") or []):
            parts.append(Part(f"messages[{i}].tool_calls[{k}]", {"role": role, "tool_call": call}))
        if not content and not message.get("tool_calls"):
            parts.append(Part(f"messages[{i}]", {"role": role, **extra, "part": None}))
        if role in ("user", "tool"):
            last_input = len(parts) - 1
    if lead == len(messages):
        parts += tools
    return with_implicit_breakpoint(parts, last_input, body) if explicit_rules else parts


def prepare_chat(body: dict, headers: dict[str, str]) -> Exchange:
    refuse_cache_control(body)
    if not isinstance(body.get("messages"), list):
        raise reject("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
    model = str(body.get("model") or "")
    rules = rules_for(model, body)
    explicit = isinstance(rules, ExplicitBreakpointRules)
    parts = chat_parts(body, explicit)
    view = {k: body[k] for k in ("model", "messages", "tools") if k in body}
    return exchange(model, rules, headers, body, parts, view, "chat")


def exchange(model: str, rules, headers: dict[str, str], body: dict, parts: list[Part], view: dict,
             api: str) -> Exchange:
    key = body.get("prompt_cache_key")
    key = key if isinstance(key, str) else None
    explicit = isinstance(rules, ExplicitBreakpointRules)
    scope = f"openai|{model}|{caller_key(headers)}" + (f"|key={key or ''}" if explicit else "")
    return Exchange("openai", model, rules, scope, prompt_of(parts), view, bool(body.get("stream")),
                    routing_key=key, pooled=True, extra={"api": api})


def chat_usage(charge: Charge, output_tokens: int) -> dict:
    prompt = charge.total
    return {"prompt_tokens": prompt, "completion_tokens": output_tokens, "total_tokens": prompt + output_tokens,
            "prompt_tokens_details": {"cached_tokens": charge.read, "cache_write_tokens": charge.write_total},
            "completion_tokens_details": {"reasoning_tokens": 0}}


# -- Responses ---------------------------------------------------------------------------------


def _item_type(item: dict) -> str:
    return item.get("type") or ("message" if "role" in item else "")


def _text_part(role: str | None, text: str) -> dict:
    return {"type": "output_text" if role == "assistant" else "input_text", "text": text}


def responses_parts(body: dict, explicit_rules: bool) -> list[Part]:
    tools = tool_parts(body, explicit_rules)
    parts: list[Part] = []
    if body.get("instructions"):
        block = {"role": "system", "part": _text_part("system", body["instructions"])}
        parts.append(Part("instructions", block))
    items = body.get("input")
    items = [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) else items or []
    lead = instructions_count([item.get("role") if isinstance(item, dict) and _item_type(item) == "message" else None
                               for item in items])
    last_input: int | None = None
    for i, item in enumerate(items):
        if i == lead:
            parts += tools
        if not isinstance(item, dict):
            continue
        kind = _item_type(item)
        if kind == "message":
            role = item.get("role")
            content = item.get("content")
            content = [_text_part(role, content)] if isinstance(content, str) else content or []
            for j, part in enumerate(content):
                where = f"input[{i}].content[{j}]"
                ttl = mark_ttl(part.get(BREAKPOINT) if isinstance(part, dict) else None, where, role, explicit_rules)
                block = {"role": role, "part": part}
                parts.append(Part(where, block, ttl, _tokens(block)))
            if role == "user" and content:
                last_input = len(parts) - 1
        elif kind == "function_call_output":
            output = item.get("output")
            header = {k: v for k, v in item.items() if k not in ("output", "id", "status")}
            if isinstance(output, list):
                for j, part in enumerate(output):
                    where = f"input[{i}].output[{j}]"
                    ttl = mark_ttl(part.get(BREAKPOINT) if isinstance(part, dict) else None, where, "tool", explicit_rules)
                    block = {**header, "part": part}
                    parts.append(Part(where, block, ttl, _tokens(block)))
            else:
                parts.append(Part(f"input[{i}]", {**header, "output": output}))
            last_input = len(parts) - 1
        else:
            marked = first_breakpoint(item)
            if marked and explicit_rules:
                raise reject(f"'input[{i}].{marked}' is not supported on {kind} items: cache breakpoints may be set on "
                             "system, developer, user and tool-result content only.", f"input[{i}].{marked}")
            parts.append(Part(f"input[{i}]", {k: v for k, v in item.items() if k not in ("id", "status")}))
    if lead == len(items):
        parts += tools
    return with_implicit_breakpoint(parts, last_input, body) if explicit_rules else parts


def _view_text(content: Any) -> Any:
    if isinstance(content, str):
        return content
    out = []
    for part in content or []:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("input_text", "output_text", "text"):
            out.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") == "input_image":
            out.append({"type": "image_url", "image_url": {"url": part.get("image_url") or ""}})
    return out


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return "\n".join(p.get("text", "") for p in output or [] if isinstance(p, dict) and isinstance(p.get("text"), str))


def responses_view(body: dict) -> dict:
    messages: list[dict] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    items = [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) else items or []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = _item_type(item)
        if kind == "message":
            messages.append({"role": item.get("role"), "content": _view_text(item.get("content"))})
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments") if kind == "function_call" else json.dumps({"input": item.get("input", "")})
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": arguments or ""}}
            last = messages[-1] if messages else None
            if last and last.get("role") == "assistant" and last.get("tool_calls") and not last.get("content"):
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": _output_text(item.get("output"))})
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                               "parameters": t.get("parameters") or {}}}
             for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function" and t.get("name")]
    view: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    if tools:
        view["tools"] = tools
    return view


def prepare_responses(body: dict, headers: dict[str, str]) -> Exchange:
    refuse_cache_control(body)
    if "input" not in body:
        raise reject("Missing required parameter: 'input'.", "input", "missing_required_parameter")
    model = str(body.get("model") or "")
    rules = rules_for(model, body)
    parts = responses_parts(body, isinstance(rules, ExplicitBreakpointRules))
    return exchange(model, rules, headers, body, parts, responses_view(body), "responses")


def responses_usage(charge: Charge, output_tokens: int) -> dict:
    prompt = charge.total
    return {"input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": charge.read, "cache_write_tokens": charge.write_total},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + output_tokens}


def output_items(reply: dict) -> list[dict]:
    if "tool_calls" in reply:
        return [{"type": "function_call", "id": "fc_" + hashlib.sha256(c["id"].encode()).hexdigest()[:24],
                 "call_id": c["id"], "name": c["name"],
                 "arguments": c["arguments"], "status": "completed"} for c in reply["tool_calls"]]
    return [{"type": "message", "id": f"msg_{uuid.uuid4().hex[:24]}", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": reply.get("text") or "", "annotations": []}]}]


def response_of(body: dict, items: list[dict], usage: dict | None, status: str = "completed") -> dict:
    return {"id": f"resp_{uuid.uuid4().hex[:24]}", "object": "response", "created_at": int(time.time()),
            "status": status, "error": None, "incomplete_details": None, "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"), "model": body.get("model"), "output": items,
            "parallel_tool_calls": body.get("parallel_tool_calls", True), "previous_response_id": None,
            "reasoning": body.get("reasoning") or {"effort": None, "summary": None}, "store": body.get("store", False),
            "temperature": body.get("temperature", 1.0), "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
            "top_p": body.get("top_p", 1.0), "truncation": "disabled", "usage": usage, "user": None,
            "metadata": body.get("metadata") or {}, "prompt_cache_key": body.get("prompt_cache_key")}


def response_events(response: dict) -> list[bytes]:
    """``response`` as the Responses API streams it."""
    events: list[dict] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    opening = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=opening)
    emit("response.in_progress", response=opening)
    for index, item in enumerate(response["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "content": []})
            empty = {"type": "output_text", "text": "", "annotations": []}
            emit("response.content_part.added", item_id=item["id"], output_index=index, content_index=0, part=empty)
            emit("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0, delta=text,
                 logprobs=[])
            emit("response.output_text.done", item_id=item["id"], output_index=index, content_index=0, text=text,
                 logprobs=[])
            emit("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                 part=item["content"][0])
        else:
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "arguments": ""})
            emit("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                 delta=item["arguments"])
            emit("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                 arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response)
    return [sse(event, event["type"]) for event in events]


def output_tokens_of(reply: dict) -> int:
    return max(1, len(json.dumps(reply)) // 4)
