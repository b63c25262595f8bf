"""Gemini ``generateContent`` / ``streamGenerateContent`` with Gemini's implicit prompt cache and
usage fields.

LiteLLM calls ``{api_base}/models/{model}:generateContent`` and
``{api_base}/models/{model}:streamGenerateContent?alt=sse`` for a ``gemini/gemini-2.5-flash``
deployment with a custom ``api_base``, both for a chat-completions request it translates and for
the proxy's native ``/v1beta/models/{group}:generateContent`` / ``:streamGenerateContent`` routes
(``llms/vertex_ai/vertex_llm_base.py`` ``_check_custom_proxy``, reached from
``llms/gemini/google_genai/transformation.py`` for the native routes): give it ``api_base`` =
``<emulator>/v1beta`` and it calls ``/v1beta/models/…``, the path Google's own API has. Any path
ending in ``/models/{model}:{method}`` is served.

Rules (Gemini's context-caching docs, https://ai.google.dev/gemini-api/docs/caching, implicit
caching section; ``cache.AutomaticPrefixRules`` named ``gemini-implicit``):

- implicit caching, no marks, no write charge, from a per-model minimum: 2.5 Flash 1,024, 2.5 Pro
  4,096 (``MINIMUM_TABLE``; LiteLLM's cost map says 2,048 for 2.5 Pro: the docs win here);
- a hit is the longest stored prefix at a block boundary (block granularity: our choice, the docs
  promise prefix hits without a granularity); every request stores its prefix;
- entries live 5 min idle, refreshed on a hit (our choice: the docs give no lifetime for implicit
  caching); scoped per model and API key;
- usage ``usageMetadata: {promptTokenCount, cachedContentTokenCount, candidatesTokenCount,
  totalTokenCount}`` (``promptTokenCount`` includes the cached tokens, as Gemini reports it).

Blocks: each function declaration (or other tool), each ``systemInstruction`` part, each content
part, in that order. Keys in snake_case (``function_call``, ``inline_data``: the API takes both)
are hashed in camelCase, so the two spellings cache alike.

Explicit context caching (the same docs, explicit section): LiteLLM turns a chat request whose
messages carry ``cache_control`` into a ``cachedContents`` resource (list them, create one named by a
hash of the marked messages, then ``generateContent`` with ``cachedContent``; with a custom
``api_base`` it calls ``{api_base}/models/{model}:cachedContents``, and Google's own path is
``/v1beta/cachedContents``: both served). A creation under the model's minimum -> 400; ``ttl``
``"<seconds>s"``, default 1 h; the creation is billed as input and writes the cache's prefix with
that lifetime into the same store, so a request on it reads at least the cached tokens (the storage
charge per hour is not modelled); a request naming an unknown or expired cache -> 403, one that
also sets ``systemInstruction``, ``tools`` or ``toolConfig`` -> 400, as Google answers.

Wire: ``contents`` (``user``/``model``; ``text``, ``functionCall {name, args}``,
``functionResponse {name, response}``, ``inlineData``) become the chat view; function calls get
ids ``call_<name>_<n>`` (n-th call of that name), each response the id of the oldest unanswered call
of its name. The reply is ``candidates[0].content.parts`` (``text`` or ``functionCall``),
``finishReason: STOP``; streamed as ``data: {…}`` events (``alt=sse``) or one JSON array.
"""
from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any

from harness.providers.cache import IMAGE_TOKENS, AutomaticPrefixRules, Charge, Part, prompt_of, tokens_with_images
from harness.providers.wire import Exchange, Rejected, caller_key, sse

PATH = re.compile(r"/models/(?P<model>[^/:?]+):(?P<method>generateContent|streamGenerateContent|countTokens)")
CACHES_PATH = re.compile(r"(?:/models/(?P<model>[^/:?]+):)?cachedContents(?:$|\?)")
TTL = re.compile(r"^(?P<s>\d+(?:\.\d+)?)s$")
EXPLICIT_TTL = 3600
MINIMUM_TABLE = ((re.compile(r"pro"), 4096), (re.compile(r"."), 1024))
RETENTION = 300
SNAKE_KEYS = {"system_instruction": "systemInstruction", "function_declarations": "functionDeclarations",
              "function_call": "functionCall", "function_response": "functionResponse", "inline_data": "inlineData",
              "mime_type": "mimeType", "file_data": "fileData", "file_uri": "fileUri",
              "thought_signature": "thoughtSignature", "parameters_json_schema": "parametersJsonSchema",
              "executable_code": "executableCode", "code_execution_result": "codeExecutionResult",
              "google_search": "googleSearch", "code_execution": "codeExecution",
              "generation_config": "generationConfig", "tool_config": "toolConfig",
              "safety_settings": "safetySettings", "cached_content": "cachedContent"}


def minimum_tokens(model: str) -> int:
    return next(n for pattern, n in MINIMUM_TABLE if pattern.search(model))


def rules_for(model: str) -> AutomaticPrefixRules:
    return AutomaticPrefixRules(minimum=minimum_tokens(model), step=1, retention=RETENTION, name="gemini-implicit")


def camel(value: Any) -> Any:
    """``value`` with the API's snake_case protocol keys in camelCase (schemas and arguments untouched)."""
    if isinstance(value, dict):
        return {SNAKE_KEYS.get(k, k): (v if k in ("args", "response", "parameters", "parametersJsonSchema",
                                                  "parameters_json_schema") else camel(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def error_body(message: str, code: int = 400, status: str = "INVALID_ARGUMENT") -> dict:
    return {"error": {"code": code, "message": message, "status": status}}


def reject(message: str) -> Rejected:
    return Rejected(400, error_body(message), message)


def is_image(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("inlineData"), dict) and \
        str(value["inlineData"].get("mimeType", "")).startswith("image/")


def _tokens(content: Any) -> int:
    return tokens_with_images(content, is_image, IMAGE_TOKENS["gemini"])


def request_parts(body: dict) -> list[Part]:
    body = camel(body)
    parts: list[Part] = []
    for i, tool in enumerate(body.get("tools") or []):
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        if isinstance(declarations, list):
            parts += [Part(f"tools[{i}].functionDeclarations[{j}]", {"function": d}) for j, d in enumerate(declarations)]
        else:
            parts.append(Part(f"tools[{i}]", {"tool": tool}))
    for j, part in enumerate((body.get("systemInstruction") or {}).get("parts") or []):
        parts.append(Part(f"systemInstruction.parts[{j}]", {"system": part}))
    for i, content in enumerate(body.get("contents") or []):
        role = content.get("role", "user")
        for j, part in enumerate(content.get("parts") or []):
            block = {"role": role, "part": part}
            parts.append(Part(f"contents[{i}].parts[{j}]", block, None, _tokens(block)))
    return parts


# -- the chat view -------------------------------------------------------------------------


def _lower_types(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: (v.lower() if k == "type" and isinstance(v, str) else _lower_types(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_lower_types(v) for v in schema]
    return schema


def _view_tools(body: dict) -> list[dict]:
    out = []
    for tool in body.get("tools") or []:
        for d in (tool.get("functionDeclarations") or []) if isinstance(tool, dict) else []:
            params = d.get("parametersJsonSchema") or d.get("parameters") or {}
            out.append({"type": "function", "function": {"name": d.get("name"), "description": d.get("description", ""),
                                                         "parameters": _lower_types(params)}})
    return out


def chat_view(body: dict) -> dict:
    body = camel(body)
    messages: list[dict] = []
    system = "\n".join(p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts") or []
                       if isinstance(p, dict) and isinstance(p.get("text"), str))
    if system:
        messages.append({"role": "system", "content": system})
    made: dict[str, int] = defaultdict(int)
    pending: dict[str, deque] = defaultdict(deque)
    for content in body.get("contents") or []:
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict) and not p.get("thought")]
        if content.get("role") == "model":
            calls = []
            for p in parts:
                if isinstance(p.get("functionCall"), dict):
                    name = p["functionCall"].get("name", "")
                    made[name] += 1
                    call_id = p["functionCall"].get("id") or f"call_{name}_{made[name]}"
                    pending[name].append(call_id)
                    calls.append({"id": call_id, "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(p["functionCall"].get("args") or {})}})
            text = "".join(p.get("text", "") for p in parts if isinstance(p.get("text"), str))
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
            continue
        user_parts = []
        for p in parts:
            if isinstance(p.get("functionResponse"), dict):
                name = p["functionResponse"].get("name", "")
                call_id = p["functionResponse"].get("id") or (pending[name].popleft() if pending[name] else f"call_{name}")
                messages.append({"role": "tool", "tool_call_id": call_id,
                                 "content": json.dumps(p["functionResponse"].get("response") or {})})
            elif isinstance(p.get("text"), str):
                user_parts.append({"type": "text", "text": p["text"]})
            elif isinstance(p.get("inlineData"), dict):
                data = p["inlineData"]
                user_parts.append({"type": "image_url",
                                   "image_url": {"url": f"data:{data.get('mimeType')};base64,{data.get('data', '')}"}})
        if user_parts:
            messages.append({"role": "user", "content": user_parts})
    view: dict[str, Any] = {"messages": messages}
    tools = _view_tools(body)
    if tools:
        view["tools"] = tools
    return view


# -- one exchange ----------------------------------------------------------------------------


def route(path: str) -> tuple[str, str] | None:
    """(model, method) of a Gemini path, or None."""
    found = PATH.search(path)
    return (found.group("model"), found.group("method")) if found else None


def prepare(path: str, body: dict, headers: dict[str, str], caches: CachedContents | None = None,
            now: float = 0.0) -> Exchange:
    found = route(path)
    if found is None:
        raise Rejected(404, error_body(f"unknown path {path}", 404, "NOT_FOUND"), "unknown path")
    model, method = found
    if not isinstance(body.get("contents"), list) or not body["contents"]:
        raise reject("* GenerateContentRequest.contents: contents is not specified")
    key = caller_key(headers)
    cached = cached_parts(body, caches, key, now)
    view = {**chat_view(body if cached is None else with_cache(cached, body)), "model": model}
    stream = method == "streamGenerateContent"
    return Exchange("gemini", model, rules_for(model), f"gemini|{model}|{key}",
                    prompt_of([*(cached.parts if cached else []), *request_parts(body)]), view, stream,
                    extra={"sse": "alt=sse" in path, "cached_content": cached.name if cached else None})


# -- explicit context caches -------------------------------------------------------------------


@dataclass
class Cache:
    name: str
    model: str
    key: str
    body: dict  # contents, systemInstruction, tools: what the cache holds
    parts: list[Part]
    tokens: int
    display_name: str | None
    created: float
    expires: float

    def resource(self) -> dict:
        return {"name": self.name, "model": f"models/{self.model}", "displayName": self.display_name,
                "usageMetadata": {"totalTokenCount": self.tokens},
                "createTime": _timestamp(self.created), "updateTime": _timestamp(self.created),
                "expireTime": _timestamp(self.expires)}


def _timestamp(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1e6):06d}Z"


class CachedContents:
    """The explicit caches, by name; each visible to the API key that made it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.caches: dict[str, Cache] = {}

    def live(self, name: str, key: str, now: float) -> Cache | None:
        with self.lock:
            cache = self.caches.get(name)
            return cache if cache and cache.key == key and cache.expires > now else None

    def listed(self, key: str, now: float) -> list[dict]:
        with self.lock:
            return [c.resource() for c in self.caches.values() if c.key == key and c.expires > now]

    def add(self, cache: Cache) -> None:
        with self.lock:
            self.caches[cache.name] = cache

    def clear(self) -> None:
        with self.lock:
            self.caches.clear()


def is_caches_path(path: str) -> bool:
    return bool(CACHES_PATH.search(path.split("?", 1)[0] + "?"))


def cached_parts(body: dict, caches: CachedContents | None, key: str, now: float) -> Cache | None:
    name = body.get("cachedContent") or body.get("cached_content")
    if not name:
        return None
    cache = caches.live(name, key, now) if caches else None
    if cache is None:
        raise Rejected(403, error_body(f"CachedContent not found (or permission denied): {name}", 403,
                                       "PERMISSION_DENIED"), "cached content not found")
    clashing = [k for k in ("systemInstruction", "system_instruction", "tools", "toolConfig", "tool_config") if body.get(k)]
    if clashing:
        raise reject("CachedContent can not be used with GenerateContent request setting system_instruction, tools or "
                     "tool_config.\n\nProposed fix: move those values to CachedContent from GenerateContent request.")
    return cache


def with_cache(cache: Cache, body: dict) -> dict:
    """The request as the model sees it: the cache's contents, then the request's."""
    return {**cache.body, **body, "contents": [*(cache.body.get("contents") or []), *body["contents"]]}


def ttl_seconds(body: dict) -> float:
    ttl = body.get("ttl")
    if ttl is None:
        return EXPLICIT_TTL
    found = TTL.match(str(ttl))
    if not found:
        raise reject(f"Invalid value at 'cached_content.ttl' ({ttl!r}): expected a duration such as \"300s\"")
    return float(found.group("s"))


def prepare_cache(path: str, body: dict, headers: dict[str, str], now: float) -> tuple[Exchange, Cache]:
    """A ``cachedContents`` creation: the exchange that bills it (its parts as input, written with the
    cache's lifetime) and the cache."""
    model = str(body.get("model") or "").removeprefix("models/") or (CACHES_PATH.search(path).group("model") or "")
    parts = request_parts(body)
    prompt = prompt_of(parts)
    minimum = minimum_tokens(model)
    if prompt.tokens < minimum:
        raise reject(f"Cached content is too small. total_token_count={prompt.tokens}, "
                     f"min_total_token_count={minimum}")
    ttl = ttl_seconds(body)
    held = {k: body[k] for k in ("contents", "systemInstruction", "system_instruction", "tools", "toolConfig")
            if k in body}
    cache = Cache(f"cachedContents/{uuid.uuid4().hex[:16]}", model, caller_key(headers), held, parts, prompt.tokens,
                  body.get("displayName"), now, now + ttl)
    rules = AutomaticPrefixRules(minimum=minimum, step=1, retention=int(ttl), name="gemini-explicit-create")
    exchange = Exchange("gemini", model, rules, f"gemini|{model}|{cache.key}", prompt, {}, False,
                        extra={"cached_content": cache.name, "creates_cache": True})
    return exchange, cache


def usage_of(charge: Charge, output_tokens: int) -> dict:
    prompt = charge.total
    usage = {"promptTokenCount": prompt, "cachedContentTokenCount": charge.read, "candidatesTokenCount": output_tokens,
             "totalTokenCount": prompt + output_tokens,
             "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}
    if charge.read:
        usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": charge.read}]
    return usage


def parts_of(reply: dict) -> list[dict]:
    if "tool_calls" in reply:
        return [{"functionCall": {"name": c["name"], "args": json.loads(c["arguments"] or "{}")}}
                for c in reply["tool_calls"]]
    return [{"text": reply.get("text") or ""}]


def response_of(model: str, parts: list[dict], usage: dict, finished: bool = True) -> dict:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finished:
        candidate["finishReason"] = "STOP"
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model,
            "responseId": uuid.uuid4().hex[:22]}


def chunks_of(model: str, parts: list[dict], usage: dict) -> list[dict]:
    """The streamed responses: a text in two chunks (the finish reason on the last), a call in one."""
    text = parts[0].get("text") if len(parts) == 1 else None
    if text and len(text) > 1:
        half = len(text) // 2
        return [response_of(model, [{"text": text[:half]}], usage, finished=False),
                response_of(model, [{"text": text[half:]}], usage)]
    return [response_of(model, parts, usage)]


def stream_bytes(chunks: list[dict], as_sse: bool) -> list[bytes]:
    if as_sse:
        return [sse(c) for c in chunks]
    return [json.dumps(chunks).encode()]


def output_tokens_of(parts: list[dict]) -> int:
    return max(1, len(json.dumps(parts)) // 4)


def count_tokens(body: dict) -> dict:
    inner = body.get("generateContentRequest") or body
    return {"totalTokens": prompt_of(request_parts(inner)).tokens}
