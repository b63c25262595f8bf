"""What the three wire modules share: a rejected request, one accounted exchange, the cost map,
the caller's key as a cache scope, and server-sent events."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.providers.cache import Prompt, Rules

AUTH_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key"})


class Rejected(Exception):
    """A request the provider answers with an error: ``status`` and the provider's error body."""

    def __init__(self, status: int, body: dict, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.message = message


@dataclass
class Exchange:
    """One request, read: its provider family, rule set, model, cache scope (without the machine,
    which the server adds for OpenAI), prompt blocks, the chat view ``decide`` answers, and whether
    the reply streams. ``routing_key``: OpenAI's ``prompt_cache_key``."""

    family: str
    model: str
    rules: Rules
    scope: str
    prompt: Prompt
    view: dict
    stream: bool
    routing_key: str | None = None
    pooled: bool = False  # OpenAI: the scope is per machine of the pool
    extra: dict = field(default_factory=dict)


def caller_key(headers: dict[str, str]) -> str:
    """A short hash of the caller's API key (the cache is scoped per key; the key itself is never kept)."""
    raw = next((headers[h] for h in ("x-api-key", "x-goog-api-key", "api-key", "authorization") if headers.get(h)), "")
    return hashlib.sha256(raw.removeprefix("Bearer ").encode()).hexdigest()[:8]


def lower_headers(items) -> dict[str, str]:
    return {k.lower(): v for k, v in items}


def recorded_headers(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k not in AUTH_HEADERS}


@lru_cache(maxsize=1)
def _cost_map_file() -> dict:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.origin:
        return {}
    path = Path(spec.origin).parent / "model_prices_and_context_window_backup.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def cost_map() -> dict:
    """LiteLLM's cost map: ``litellm.model_cost`` where litellm is imported already, else the map's
    JSON file beside the package (read without importing litellm: 5 s), else empty."""
    loaded = sys.modules.get("litellm")
    model_cost = getattr(loaded, "model_cost", None) if loaded else None
    return model_cost if isinstance(model_cost, dict) and model_cost else _cost_map_file()


def cost_entry(model: str, provider: str) -> dict:
    """The cost-map entry of ``model`` as a ``provider`` deployment names it (dated names fall back to
    the undated one: ``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5``)."""
    table = cost_map()
    names = [model, f"{provider}/{model}"]
    base = model.rsplit("-", 1)[0] if model.rsplit("-", 1)[-1].isdigit() and len(model.rsplit("-", 1)[-1]) == 8 else None
    if base:
        names += [base, f"{provider}/{base}"]
    return next((table[n] for n in names if isinstance(table.get(n), dict)), {})


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def parse_sse(raw: bytes | str) -> list[tuple[str | None, Any]]:
    """(event, data) of each event of a server-sent stream (``[DONE]`` kept as the string)."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    out = []
    for chunk in text.replace("\r\n", "\n").split("\n\n"):
        event, data = None, []
        for line in chunk.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            joined = "\n".join(data)
            out.append((event, joined if joined == "[DONE]" else json.loads(joined)))
    return out


def arguments_object(arguments: str) -> Any:
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return {}
