"""What a rule may know besides the request: settings for this model, the target, a file-system probe."""
from __future__ import annotations

import json
import os
import time

try:  # much faster than json for the tool schemas every request carries
    import orjson
except ImportError:  # pragma: no cover - orjson comes with litellm[proxy]
    orjson = None
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any, TypeVar

from .caches import Identity
from .settings import Settings

_P = TypeVar("_P")


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
    # The deployment's api_base ("" when LiteLLM's default for the provider).
    api_base: str = ""
    # LiteLLM strips Claude Code's billing block itself on this route and deployment.
    strips_billing: bool = False
    # Provider cache hints (rules/hints.py): LiteLLM forwards ``prompt_cache_key`` to this
    # target; the target reads Anthropic ``cache_control`` breakpoints (Anthropic, Bedrock,
    # Vertex Claude).
    accepts_prompt_cache_key: bool = False
    reads_cache_control: bool = False
    # The deployment's model_info asks for ``prompt_cache_key`` (``litellm_prefix.promptCacheKey:
    # true``) on a target that would not get one by default (a self-hosted server).
    wants_prompt_cache_key: bool = False
    # The target reads OpenAI's ``prompt_cache_breakpoint`` marks (GPT-5.6 and later on OpenAI's
    # API, or a deployment LiteLLM treats as that dialect); writes there cost 1.25x.
    reads_prompt_cache_breakpoint: bool = False
    # The shortest prefix the target caches at all (cost map ``prompt_cache_min_tokens``; 0: unknown).
    cache_min_tokens: int = 0
    # LiteLLM forwards Gemini's native routes (generateContent) here in Gemini's own shape (Gemini,
    # Vertex's Gemini API); elsewhere it makes a chat completion of them (``wire.wire_for``).
    receives_gemini_shape: bool = False


@lru_cache(maxsize=1024)
def _cost_map_entry(model: str, provider: str) -> Mapping[str, Any]:
    try:
        import litellm

        info = litellm.get_model_info(model=model, custom_llm_provider=provider or None)
    except Exception:
        return {}
    return info if isinstance(info, Mapping) else {}


def cost_map_value(model: str, provider: str, key: str, kind: type) -> Any:
    """One field of LiteLLM's cost map for a model (``None`` when unknown or not of ``kind``);
    the lookup is cached per (model, provider)."""
    value = _cost_map_entry(model, provider).get(key)
    return value if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)) else None


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def compact_json(value: Any) -> str:
    """Compact JSON (no spaces, UTF-8 kept): orjson when it can encode the value, else the stdlib.

    Only ever compared with itself (fingerprints, substring checks), so the two encoders
    need not agree byte for byte; each value always takes the same path.
    """
    if orjson is not None:
        try:
            return orjson.dumps(value).decode()
        except TypeError:
            pass
    return _ENCODER.encode(value)


class Recent:
    """Answers remembered per key for at most ``seconds``, and only while their ``stamp`` stands
    (each element the same object, or an equal int: a list's identity and length, say). For
    what every request asks and what changes rarely (the disk, LiteLLM's router and callbacks).
    At most ``limit`` keys: all are dropped when it is full."""

    def __init__(self, seconds: float, limit: int) -> None:
        self.seconds, self.limit = seconds, limit
        self._entries: dict[Any, tuple[float, tuple[Any, ...], Any]] = {}

    def get(self, key: Any, compute: Callable[[], Any], stamp: tuple[Any, ...] = ()) -> Any:
        """``compute()``, or its remembered answer (an exception is passed on, not remembered)."""
        now = time.monotonic()
        hit = self._entries.get(key)
        if hit is not None and now < hit[0] and len(hit[1]) == len(stamp) and all(
                a is b or (type(a) is int and a == b) for a, b in zip(hit[1], stamp)):
            return hit[2]
        value = compute()
        if len(self._entries) >= self.limit:
            self._entries.clear()
        self._entries[key] = (now + self.seconds, stamp, value)
        return value

    def forget(self, key: Any) -> None:
        """Drop the remembered answer for ``key`` (the shell changed what it was about)."""
        self._entries.pop(key, None)


class Expiring:
    """A bounded map whose entries are kept at least ``seconds`` after they were set and at most
    twice that: two generations of plain dicts, the older dropped when the newer is ``seconds``
    old or holds half of ``maxsize``. For the records one hook of a call writes and a later hook
    of the same call reads (milliseconds later): every request writes and reads several, and a
    ``TTLCache`` keeps each entry's expiry in order, at several times the cost."""

    __slots__ = ("seconds", "half", "clock", "_new", "_old", "_turned")

    def __init__(self, maxsize: int, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.half, self.clock = seconds, max(1, maxsize // 2), clock
        self._new: dict[Any, Any] = {}
        self._old: dict[Any, Any] = {}
        self._turned = clock()

    def _turn(self) -> None:
        # Generations turn on a fixed grid of ``seconds`` (an entry set in one period is dropped at
        # the end of the next: at least ``seconds``, less than twice that); a full newer one turns
        # early, off the grid.
        periods = int((self.clock() - self._turned) // self.seconds)
        if periods:
            self._old = self._new if periods == 1 else {}
            self._new = {}
            self._turned += periods * self.seconds
        elif len(self._new) >= self.half:
            self._old, self._new = self._new, {}

    def __setitem__(self, key: Any, value: Any) -> None:
        self._turn()
        self._old.pop(key, None)
        self._new[key] = value

    def get(self, key: Any, default: Any = None) -> Any:
        self._turn()
        value = self._new.get(key, _MISSING)
        if value is _MISSING:
            value = self._old.get(key, default)
        return value

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key: Any) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def pop(self, key: Any, default: Any = None) -> Any:
        self._turn()
        value = self._new.pop(key, _MISSING)
        if value is _MISSING:
            value = self._old.pop(key, default)
        return value

    def __len__(self) -> int:
        self._turn()
        return len(self._new) + len(self._old)


_MISSING = object()

EXISTS_SECONDS = 1.0
_EXISTS = Recent(EXISTS_SECONDS, 4096)


def path_exists(path: str) -> bool:
    """``os.path.exists``, remembered for a second per path (the shell's answer for ``pathCheck:
    exists``): a session names the same install roots on every request, and a ``stat`` on a
    busy gateway costs more than the rules of a short request. An install root that appears
    or goes is seen within a second."""
    return _EXISTS.get(path, lambda: os.path.exists(path))


_RESOLVED = Recent(EXISTS_SECONDS, 4096)


def resolved_path(path: str) -> str | None:
    """The canonical path (every symlink resolved) of what is at ``path``, ``None`` when nothing
    is (a dangling link included); remembered for a second per path, like ``path_exists``. The
    install-path rule rewrites a root only where ``stablePath`` resolves to the same place."""
    return _RESOLVED.get(path, lambda: _realpath(path))


def _realpath(path: str) -> str | None:
    try:
        return os.path.realpath(path, strict=True)
    except (OSError, ValueError):
        return None


def forget_path(path: str) -> None:
    """Forget what was remembered about ``path`` (the shell just made or moved a link there)."""
    _EXISTS.forget(path)
    _RESOLVED.forget(path)
    _PACKAGES.forget(path)


_PACKAGES = Recent(EXISTS_SECONDS, 1024)
PACKAGE_JSON_BYTES = 1 << 20  # a larger package.json is not read (no identity: nothing pinned)


def package_identity(root: str) -> tuple[str, str] | None:
    """``(name, version)`` from ``<root>/package.json``, ``None`` where it is missing, unreadable
    or names no version; remembered for a second per root, like ``path_exists``. npm never
    publishes one name and version twice, so two roots with the same identity hold the same
    files: the install-path rule keeps a session's first root only on that ground."""
    return _PACKAGES.get(root, lambda: _read_package(root))


def _read_package(root: str) -> tuple[str, str] | None:
    try:
        with open(os.path.join(root, "package.json"), "rb") as file:
            raw = json.loads(file.read(PACKAGE_JSON_BYTES + 1))
    except (OSError, ValueError):  # (a UnicodeDecodeError is a ValueError)
        return None
    if not isinstance(raw, dict):
        return None
    name, version = raw.get("name"), raw.get("version")
    return (name, version) if isinstance(name, str) and name and isinstance(version, str) and version else None


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

    def but(self, **changes: Any) -> "Context":
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


@dataclass(frozen=True)
class Event:
    """Something a rule did or saw: ``kind`` names it, ``data`` holds hashes, offsets, counts and names only.

    ``data`` is a plain dict where only the JSONL log reads it (a rule's report of what it did),
    and a typed payload (below) where other code reads it: the pipeline's result, the sinks,
    the shell. ``record()`` is the same mapping either way, as the log writes it."""

    kind: str
    data: Any = field(default_factory=dict)

    def record(self) -> Mapping[str, Any]:
        data = self.data
        return data if isinstance(data, Mapping) else data.record()


def payload(events: "Iterable[Event]", cls: type[_P]) -> _P | None:
    """The first event payload of type ``cls``, if any."""
    return next((e.data for e in events if type(e.data) is cls), None)


class _Payload:
    """An event payload that code besides its rule reads; its ``record()`` is what the log writes."""

    __slots__ = ()

    def record(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class HeadSeen(_Payload):
    """``head``: the fingerprint of the head sent (the proxy's response header)."""

    fingerprint: str


@dataclass(frozen=True, slots=True)
class TextsToKeep(_Payload):
    """``texts``: section and tools texts by content hash that the store must keep."""

    texts: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class TextsNeeded(_Payload):
    """``need_texts``: hashes of texts a rule could not read (the shell fetches them, runs again)."""

    hashes: Sequence[str]


@dataclass(frozen=True, slots=True)
class AgentSeen(_Payload):
    """``agent``: the agent profile the request was recognised as."""

    name: str


@dataclass(frozen=True, slots=True)
class BillingBlock(_Payload):
    """``billing_block``: a per-request billing header block set aside (``action``: ``removed`` or
    ``left to litellm``), with the sizes around it."""

    action: str
    block_chars: int
    cacheable_chars: int
    cacheable_tokens_est: int


@dataclass(frozen=True, slots=True)
class Drift(_Payload):
    """``drift``: a genuine head change (section 5 of the design). ``record()`` is the JSONL log's
    ``drift`` record before the sinks add the session, model and agent."""

    changed: Sequence[str]
    first_diff_char: int
    first_diff_token_est: int
    first_diff_in: str
    exact: bool
    reprefill_tokens_est: int
    before: str
    after: str
    tools: Mapping[str, Sequence[str]] | None = None  # {"added": [...], "removed": [...]} when the tools changed

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": "drift"}
        out.update(_Payload.record(self))
        if self.tools is None:
            del out["tools"]
        return out
