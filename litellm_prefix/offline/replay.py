"""Replay a recorded session and count what an exact-prefix cache must prefill again.

A session file is JSON Lines, one request per line: the request body (OpenAI chat
shape by default) plus ``session_id``, optionally ``route`` (``chat``, ``messages`` for
Anthropic ``/v1/messages``, ``responses`` for ``/v1/responses``) and ``target``
(``{"provider": ..., "system_messages_first": ...}``: what the serving side does with
late system messages). Requests are rendered the way a chat template would see them
(ChatML, tools in the system turn, late system messages hoisted to the front where the
target hoists them: ``render``, which the live measurement uses too) and tokenized with
``cl100k_base`` (shipped with LiteLLM, offline).

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..measure.render import ROUTES, Turn, render  # noqa: F401  (ROUTES re-exported: offline/cli.py and bench/ read it here)

BLOCK = 16
_CALL_TYPES = {"chat": "acompletion", "messages": "anthropic_messages", "responses": "aresponses"}


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
    from ..request.core import Stabilizer
    from ..request.target import Target

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
    from ..request import wire
    from ..request.context import Context
    from ..request.drift import head_record, what_changed
    from ..settings import Settings

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
