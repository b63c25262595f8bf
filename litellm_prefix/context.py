"""What a rule may know besides the request: settings for this model, the target, a file-system probe."""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .settings import Settings


@dataclass(frozen=True)
class Target:
    """The deployment a request goes to, as far as the hook can tell."""

    model: str = ""
    provider: str = ""
    # Explicit capability from the deployment's model_info (None: not declared there).
    model_info_mid_system: bool | None = None
    # What LiteLLM's cost map says for this model (None: unknown).
    cost_map_mid_system: bool | None = None
    # LiteLLM's openai_system_messages_first switch, read at request time.
    system_messages_first: bool = False


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class Context:
    settings: Settings
    target: Target = field(default_factory=Target)
    # Used by pathCheck=exists; injected so rules stay pure and tests need no disk.
    path_exists: Callable[[str], bool] = os.path.exists
    # The body as the client sent it: note anchors (index + content hash) refer to it.
    client_body: tuple[Any, ...] = ()
    # Section and tools texts by content hash, fetched from the store for the rules that need them.
    texts: Mapping[str, str] = field(default_factory=dict)
    # True on the second pass, after the shell fetched what ``need_texts`` asked for.
    texts_fetched: bool = False
    # A warm-up ping (max_tokens 1): neither warns nor moves the recorded head.
    ping: bool = False
    # Request-scoped memo of derived values (a tool's JSON by object id); never changes a result.
    memo: dict = field(default_factory=dict, compare=False)

    def tool_json(self, tool: Any) -> str:
        """One tool's compact JSON, computed once per request however many rules ask."""
        key = id(tool)
        cached = self.memo.get(key)
        if cached is None or cached[0] is not tool:
            cached = (tool, _ENCODER.encode(tool))
            self.memo[key] = cached
        return cached[1]


@dataclass(frozen=True)
class Event:
    """Something a rule did or saw: ``kind`` names it, ``data`` holds hashes, offsets, counts and names only."""

    kind: str
    data: dict = field(default_factory=dict)
