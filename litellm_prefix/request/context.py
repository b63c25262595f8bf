"""What a rule may know besides the request: settings for this model, the target, the file-system
probes (``disk.py``), the texts fetched for it and a request-scoped memo."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..caches import Identity, compact_json
from ..settings import Settings
from .disk import package_identity, path_exists, resolved_path
from .target import Target


@dataclass(frozen=True)
class Context:
    settings: Settings
    target: Target = field(default_factory=Target)
    # Used by pathCheck=exists; injected so rules stay pure and tests need no disk.
    path_exists: Callable[[str], bool] = path_exists
    # Used by pathCheck=exists: where a path resolves on this disk (None: nothing there).
    resolve_path: Callable[[str], str | None] = resolved_path
    # Used by pathCheck=exists: an install root's npm (name, version) (None: none readable there).
    package_identity: Callable[[str], tuple[str, str] | None] = package_identity
    # The body as the client sent it: note anchors (index + content hash) refer to it.
    client_body: tuple[Any, ...] = ()
    # Section and tools texts by content hash, fetched from the store for the rules that need them.
    texts: Mapping[str, str] = field(default_factory=dict)
    # True on the second pass, after the shell fetched what ``need_texts`` asked for.
    texts_fetched: bool = False
    # A warm-up ping (max_tokens 1): neither warns nor moves the recorded head.
    ping: bool = False
    # Wall-clock seconds, set by the shell (core.py); rules never read the clock themselves.
    # A decision that depends on it is recorded in the journal, so replicas and restarts agree.
    now: float | None = None
    # Request-scoped memo of derived values (a tool's JSON, by the tool's ``Identity``); never changes a result.
    memo: dict = field(default_factory=dict, compare=False)
    # The tenant-scoped session key (session.scoped_key): provider hints derive from it.
    session_key: str = ""
    # Indexes in the request's message list where the agent's own leading context ends (aider's
    # example conversation, its repo map: session.context_ends), before the first message the user
    # typed: sessions of the agent share those bytes, so cache marks there serve them all
    # (rules/hints.py).
    context_ends: tuple[int, ...] = ()

    def but(self, **changes: Any) -> Context:
        """``dataclasses.replace(self, **changes)`` without its per-call field introspection (the
        shell derives a request's contexts several times per request; the memo is shared)."""
        new = object.__new__(Context)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    def tool_json(self, tool: Any) -> str:
        """One tool's compact JSON, computed once per request however many rules ask."""
        key = ("tool_json", Identity(tool))
        cached = self.memo.get(key)
        if cached is None:
            cached = self.memo[key] = compact_json(tool)
        return cached
