"""Settings: defaults, then the global file, then a trusted project file, then the environment.

Precedence is the explicit tuple returned by ``Settings.settings_customise_sources``
(pydantic-settings: the first source wins), not a chain of ``if``s. Every source
validates its own keys before the merge, so a bad value fails at start-up with the
file (or environment variable) and the key named.

Files are JSON with camelCase keys. The global file is ``$LITELLM_PREFIX_CONFIG`` or
``~/.config/litellm-prefix/litellm-prefix.json``. The project file is
``<project>/.litellm-prefix/litellm-prefix.json`` where the project is the LiteLLM
proxy config's directory (or ``LITELLM_PREFIX_PROJECT_DIR``); it is read only when
the project is listed in the global file's ``trustedProjects`` or in
``LITELLM_PREFIX_TRUSTED_PROJECTS`` (``os.pathsep``-separated).
"""
from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
from collections.abc import Mapping
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from .caches import PerObject
from .profile_data import (
    DEFAULT_NOTIFICATION_PATTERNS,
    PI_PACKAGE_PATH_SUFFIX,
    PI_STABLE_PATH,
    TOOL_VOLATILE_PRESETS,
    VOLATILE_PRESETS,
)

logger = logging.getLogger("litellm_prefix")

PROJECT_FILE = Path(".litellm-prefix") / "litellm-prefix.json"
# The names of VOLATILE_PRESETS (profile_data.py), as settings accept them (tests/unit/settings/test_settings.py
# checks the two agree).
PresetName = Literal["current-date", "todays-date", "git-status", "git-snapshot", "reminder-date", "context-date",
                     "workspace-tree"]


class SettingsError(ValueError):
    """A settings file or variable holds a key or value that cannot be used."""


class ModelOverrides(BaseModel):
    """Keys that may differ per model (``models`` glob map, or ``model_info.litellm_prefix``)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)

    enabled: bool | None = None  # false: this model's requests pass through byte-identical
    tool_order: Literal["auto", "sort", "keep"] | None = None
    path_check: Literal["exists", "absolute", "trusted"] | None = None
    supports_mid_conversation_system: bool | None = None
    keep_billing_header: bool | None = None
    prompt_cache_key: bool | None = None
    cache_breakpoints: bool | None = None
    cache_ttl: Literal["5m", "1h"] | None = None




class ProfilesSetting(BaseModel):
    """``profiles``: detect the agent of each request (default), and/or force a profile per model glob."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    detect: bool = True
    force: dict[str, Literal["claude-code", "codex", "opencode", "pi", "qwen-code", "gemini-cli", "aider", "none"]] = Field(default_factory=dict)


def _regex(value: str) -> str:
    """``value``, checked to compile as a regular expression (a validator's answer)."""
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return value


class ContextBlock(BaseModel):
    """``firstUserContext``: a block the agent writes at the start of its first user message (never
    the user's own text); the presets named pin their first match inside it (rules/volatile.py).
    ``start`` is matched where the block begins (a text part's start, or right after an earlier
    block); the block ends at the first match of ``end`` after that (``""``: the part's end). A
    block without presets is still the agent's: no part of the session's identity (session.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: str = Field(min_length=1)
    end: str = ""
    presets: tuple[PresetName, ...] = ()

    @field_validator("start", "end")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return _regex(value)


class Listing(BaseModel):
    """``listings``: a list an agent writes in an order it does not keep (rules/listing_order.py).
    ``places``: (region regex with a group ``list``, entry regex with a group ``key``), searched in
    every head text and tool description; ``enums``: a tool's ``enum`` of exactly its keys too;
    ``order``: ``first`` (the session's first order, kept in the journal) or ``sort`` (by key: the
    same bytes for every session)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    places: tuple[tuple[str, str], ...] = Field(min_length=1)
    enums: bool = False
    order: Literal["first", "sort"] = "first"

    @field_validator("places")
    @classmethod
    def _compile(cls, value: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        for region, entry in value:
            _regex(region)
            _regex(entry)
            if "list" not in re.compile(region).groupindex or "key" not in re.compile(entry).groupindex:
                raise ValueError("a listing's region needs a group named 'list' and its entry one named 'key'")
        return value


class VolatileRule(BaseModel):
    """A named regex whose match in the head is pinned to its first value in the session."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return _regex(value)


class _Keys(BaseModel):
    """The keys one source may set, validated on their own (all optional)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    enabled: bool = True
    log: str | None = None
    stable_path: str = PI_STABLE_PATH  # pi's (profile_data.py): the default for every request, from any agent
    # One suffix, or a list (files only); an agent's profile adds its own (profiles.apply).
    package_path_suffix: str | list[str] = PI_PACKAGE_PATH_SUFFIX
    create_symlink: bool = False
    # exists: rewrite a root only where stablePath resolves to it on this disk; absolute: the
    # gateway cannot see the agents' disk, roots pass through; trusted: the operator declares
    # stablePath resolves to the install root on every agent's machine (rules/paths.py).
    path_check: Literal["exists", "absolute", "trusted"] = "exists"
    memory_snapshot: Literal["stable", "refresh"] = "stable"
    store: str = "memory"
    # auto: the agent's own order, pinned per session where it moves (rules/tools.py); a profile may say sort or keep
    tool_order: Literal["auto", "sort", "keep"] = "auto"
    supports_mid_conversation_system: bool | None = None
    session_ttl_seconds: int = Field(default=6 * 3600, gt=0)
    max_sessions: int = Field(default=10_000, gt=0)
    drift_header: bool = True
    models: dict[str, ModelOverrides] = Field(default_factory=dict)
    trusted_projects: list[str] = Field(default_factory=list)
    head_policy: Literal["follow", "pin"] = "follow"
    notification_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_NOTIFICATION_PATTERNS))
    memory_markers: list[tuple[str, str]] = Field(default_factory=list)
    volatile: list[VolatileRule] = Field(default_factory=list)
    volatile_presets: list[PresetName] = Field(
        default_factory=list)
    max_session_bytes: int = Field(default=256 * 1024, gt=1024)
    store_timeout_ms: int = Field(default=50, gt=0, le=10_000)
    learned_volatile: bool = True
    learned_volatile_max_lines: int = Field(default=16, gt=0, le=256)
    learned_volatile_note_seconds: int = Field(default=3600, ge=0)
    learned_volatile_exclude: list[str] = Field(default_factory=list)
    first_user_context: list[ContextBlock] = Field(default_factory=list)
    listings: list[Listing] = Field(default_factory=list)
    transient_parts: list[str] = Field(default_factory=list)
    profiles: ProfilesSetting | Literal["auto", "off"] = Field(default_factory=ProfilesSetting)
    keep_billing_header: bool = False
    # The incremental request path (core, appended.py): a stream's unchanged request (a retry)
    # reuses the last output, and one that only appends messages no rule acts on reuses the
    # last decisions and runs nothing for them; any other request takes the full path. The
    # output is the full path's, byte for byte (tests/unit/request/test_incremental.py). Off: every
    # request takes the full path.
    incremental: bool = True
    # Streams whose last request the incremental path remembers (caches.Streams: a record holds
    # the body's length and digests, the head written and the items the rules made; 64 MB of
    # those at most), least recently used out first; at most maxSessions. A stream past it takes
    # the full path at its next request.
    incremental_streams: int = Field(default=1024, ge=1, le=1_000_000)
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # Provider cache hints (rules/hints.py) and session affinity (affinity.py).
    prompt_cache_key: bool = True
    cache_breakpoints: bool = True
    # The TTL of the Anthropic marks the plugin places: 5 minutes (writes 1.25x) or an hour
    # (writes 2x; pays where a session often idles past 5 minutes: docs, "Hosted providers").
    cache_ttl: Literal["5m", "1h"] = "5m"
    session_affinity: Literal["router", "always", "off"] = "router"
    # Where a new session goes and when a live one moves (placement.py; defaults from bench/fleet.py).
    placement_absolute_slack: float = Field(default=2.0, ge=0)
    placement_relative_slack: float = Field(default=1.3, ge=1.0)
    placement_move_slack: float = Field(default=2.0, ge=1.0)
    placement_load_seconds: float = Field(default=1800.0, gt=0)
    placement_idle_seconds: float = Field(default=300.0, gt=0)
    placement_active_seconds: float = Field(default=120.0, gt=0)
    placement_session_weight: float = Field(default=10.0, ge=0)
    placement_active_slack: float = Field(default=2.0, ge=0)
    placement_cache_tokens: int = Field(default=400_000, gt=0)

    @field_validator("profiles")
    @classmethod
    def _profiles_object(cls, value: Any) -> ProfilesSetting:
        if value == "off":
            return ProfilesSetting(detect=False)
        if value == "auto":
            return ProfilesSetting()
        return value

    @field_validator("notification_patterns", "learned_volatile_exclude", "transient_parts")
    @classmethod
    def _patterns_compile(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a valid regular expression: {exc}") from None
        return value

    @field_validator("store")
    @classmethod
    def _store_is_memory_or_redis(cls, value: str) -> str:
        if value in ("memory", "proxy") or value.startswith((
                "redis://", "rediss://", "unix://", "redis+cluster://", "rediss+cluster://",
                "redis+sentinel://", "rediss+sentinel://")):
            return value
        raise ValueError("must be 'memory', 'proxy' (the LiteLLM proxy's own Redis), a redis://, rediss:// or "
                         "unix:// URL, a redis+cluster://host:port,host:port URL or a "
                         "redis+sentinel://host:port[,host:port]/service_name[/db] URL")

    @field_validator("package_path_suffix")
    @classmethod
    def _suffix_is_relative(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list):
            if not value:
                raise ValueError("must name at least one suffix")
            return list(dict.fromkeys(_one_suffix(item) for item in value))
        return _one_suffix(value)

    @field_validator("stable_path")
    @classmethod
    def _stable_path_is_absolute(cls, value: str) -> str:
        expanded = os.path.expanduser(os.path.expandvars(value))
        if not os.path.isabs(expanded):
            raise ValueError(f"must be an absolute path after expanding ~ and $VARS (got {expanded!r})")
        return value


def _one_suffix(value: str) -> str:
    value = value.strip().strip("/")
    if not value:
        raise ValueError("a suffix must not be empty")
    return value


# Environment variables, one per key; keys without one are file-only.
ENV_VARS: dict[str, str] = {
    "enabled": "LITELLM_PREFIX",
    "log": "LITELLM_PREFIX_LOG",
    "stable_path": "LITELLM_PREFIX_STABLE_PATH",
    "package_path_suffix": "LITELLM_PREFIX_PACKAGE_PATH_SUFFIX",
    "create_symlink": "LITELLM_PREFIX_CREATE_SYMLINK",
    "path_check": "LITELLM_PREFIX_PATH_CHECK",
    "memory_snapshot": "LITELLM_PREFIX_MEMORY_SNAPSHOT",
    "store": "LITELLM_PREFIX_STORE",
    "tool_order": "LITELLM_PREFIX_TOOL_ORDER",
    "supports_mid_conversation_system": "LITELLM_PREFIX_SUPPORTS_MID_CONVERSATION_SYSTEM",
    "session_ttl_seconds": "LITELLM_PREFIX_SESSION_TTL_SECONDS",
    "max_sessions": "LITELLM_PREFIX_MAX_SESSIONS",
    "drift_header": "LITELLM_PREFIX_DRIFT_HEADER",
    "head_policy": "LITELLM_PREFIX_HEAD_POLICY",
    "volatile_presets": "LITELLM_PREFIX_VOLATILE_PRESETS",
    "max_session_bytes": "LITELLM_PREFIX_MAX_SESSION_BYTES",
    "store_timeout_ms": "LITELLM_PREFIX_STORE_TIMEOUT_MS",
    "learned_volatile": "LITELLM_PREFIX_LEARNED_VOLATILE",
    "learned_volatile_max_lines": "LITELLM_PREFIX_LEARNED_VOLATILE_MAX_LINES",
    "learned_volatile_note_seconds": "LITELLM_PREFIX_LEARNED_VOLATILE_NOTE_SECONDS",
    "profiles": "LITELLM_PREFIX_PROFILES",
    "keep_billing_header": "LITELLM_PREFIX_KEEP_BILLING_HEADER",
    "incremental": "LITELLM_PREFIX_INCREMENTAL",
    "incremental_streams": "LITELLM_PREFIX_INCREMENTAL_STREAMS",
    "metrics_port": "LITELLM_PREFIX_METRICS_PORT",
    "prompt_cache_key": "LITELLM_PREFIX_PROMPT_CACHE_KEY",
    "cache_breakpoints": "LITELLM_PREFIX_CACHE_BREAKPOINTS",
    "cache_ttl": "LITELLM_PREFIX_CACHE_TTL",
    "session_affinity": "LITELLM_PREFIX_SESSION_AFFINITY",
    "placement_absolute_slack": "LITELLM_PREFIX_PLACEMENT_ABSOLUTE_SLACK",
    "placement_relative_slack": "LITELLM_PREFIX_PLACEMENT_RELATIVE_SLACK",
    "placement_move_slack": "LITELLM_PREFIX_PLACEMENT_MOVE_SLACK",
    "placement_load_seconds": "LITELLM_PREFIX_PLACEMENT_LOAD_SECONDS",
    "placement_idle_seconds": "LITELLM_PREFIX_PLACEMENT_IDLE_SECONDS",
    "placement_active_seconds": "LITELLM_PREFIX_PLACEMENT_ACTIVE_SECONDS",
    "placement_session_weight": "LITELLM_PREFIX_PLACEMENT_SESSION_WEIGHT",
    "placement_active_slack": "LITELLM_PREFIX_PLACEMENT_ACTIVE_SLACK",
    "placement_cache_tokens": "LITELLM_PREFIX_PLACEMENT_CACHE_TOKENS",
}
# Environment values for list keys are comma-separated.
_LIST_ENV = frozenset({"volatile_presets"})

# What each key does, one line of prose per field: the docs' settings page is generated from these,
# the fields' defaults and ENV_VARS (`python -m tools.docs_pages`; tests/unit/docs checks the page
# and that every field has its line). Markdown: `code` and plain words, no links.
HELP: dict[str, str] = {
    "enabled": "`false`: every request passes through byte-identical (`LITELLM_PREFIX=0`); also per model (`models`, `model_info.litellm_prefix`): `{\"enabled\": false}` passes that model's requests through (no journal, no report, no cache hints; session affinity, a routing setting, still applies)",
    "log": "JSONL file of rewrites, drift, symlink events and each call's measured cache use (read by `litellm-prefix report`)",
    "stable_path": "replacement for a volatile install root (`~` and `$VARS` expanded; must be absolute)",
    "package_path_suffix": "suffix that marks an install root, or a list of them (files only); the detected agent's profile adds its own (pi: both package names)",
    "create_symlink": "with `pathCheck: exists`, point `stablePath` at the head's install root before rewriting, where nothing is there or the link dangles (a link to an existing directory is never moved, a real directory never touched)",
    "path_check": "`exists`: rewrite a root only where `stablePath` resolves to it on this disk, else to the session's first root where that holds the same npm package and version (each path looked up at most once a second); `absolute`: a gateway that cannot see the agents' disk, roots pass through; `trusted`: you declare `stablePath` resolves to the install root on every agent machine, every absolute root is rewritten",
    "memory_snapshot": "`stable` (freeze the memory block, send deletions as notes) or `refresh` (pass through)",
    "store": "`memory`; a single Redis: `redis://[user:pass@]host:port[/db]`, `rediss://` (TLS), `unix:///path.sock` (the plugin's own client on the event loop); Sentinel: `redis+sentinel://host:port[,host:port]/service_name[/db]` (`rediss+sentinel://` for TLS); Redis Cluster: `redis+cluster://host:port[,host:port]` (`rediss+cluster://`; needs the `cluster` extra, valkey-glide); or `proxy` (the proxy's own Redis settings, `litellm_settings.cache_params`: a cluster's `startup_nodes` go to the cluster client, anything else to LiteLLM's own client builder)",
    "tool_order": "`auto` (the agent's order, pinned per session where it moves; a profile may say `keep` or `sort`), `sort` or `keep`",
    "supports_mid_conversation_system": "`false`: turn late system messages into notes for every model; unset: decide per target",
    "session_ttl_seconds": "how long an idle session's record is kept (the default: 6 hours)",
    "max_sessions": "session records kept (least recently used dropped first)",
    "drift_header": "add the `x-litellm-prefix-*` response headers on the proxy",
    "models": "per-model overrides by glob, e.g. `{\"gemini/*\": {\"supportsMidConversationSystem\": false}}`; keys: `enabled`, `toolOrder`, `pathCheck`, `supportsMidConversationSystem`, `keepBillingHeader`, `promptCacheKey`, `cacheBreakpoints`, `cacheTtl`",
    "trusted_projects": "project directories whose project file may be read (global file only)",
    "head_policy": "`follow`: a new head is accepted (except an extension section dropped during a notification run); `pin`: the head never moves, section changes arrive as notes",
    "notification_patterns": "regexes: a run whose first user message matches was not started by a typed prompt",
    "memory_markers": "extra `[start, end]` marker pairs of a memory block (besides `<memory>` and `# Memory`)",
    "volatile": "custom volatile spans: `[{\"name\": \"build\", \"pattern\": \"(?m)^Build: .+$\"}]`",
    "volatile_presets": "`current-date` (pi), `todays-date` (Claude Code, opencode), `git-status` (Claude Code), `git-snapshot` (Qwen Code); `reminder-date`, `context-date`, `workspace-tree` (for `firstUserContext`); an agent's profile turns on its own",
    "max_session_bytes": "cap on one session's journal, in bytes; a larger one is re-seeded (logged, counted)",
    "store_timeout_ms": "Redis's own latency budget per call, counted once the command is on the wire (a call is given up after a whole budget in which Redis sent nothing back); past it that request uses local state",
    "learned_volatile": "learn head lines that change only in value tokens (digit runs, grouped numbers, AM/PM, weekday and month names of dates) and pin them",
    "learned_volatile_max_lines": "learned lines per session",
    "learned_volatile_note_seconds": "after a learned line's first note, at most one note per this many seconds (a date change is noted at once; `0`: every change)",
    "learned_volatile_exclude": "regexes: head lines matching one are never learned (beside the profiles' own, e.g. Claude Code's `x-anthropic-billing-header:` line)",
    "first_user_context": "blocks an agent writes at the start of its first user message: `[{\"start\": REGEX, \"end\": REGEX or \"\", \"presets\": [...]}]`; the presets pin inside them; none of a block is part of a derived session key (profiles add their own)",
    "listings": "lists an agent writes in an order it does not keep: `[{\"name\": NAME, \"places\": [[REGION with group list, ENTRY with group key], ...], \"enums\": false, \"order\": \"first\"}]`; `order`: `first` (the session's first order) or `sort` (by key) (profiles add their own)",
    "transient_parts": "regexes of whole text parts an agent sends in a user message and leaves out when it replays its history; put back where a replayed message is otherwise the same (profiles add their own)",
    "profiles": "agent profiles: `detect` the agent of each request (headers, else head signature) and turn on its presets and session ids; `force` a profile per model glob, e.g. `{\"force\": {\"local/*\": \"claude-code\"}}` (`claude-code`, `codex`, `opencode`, `pi`, `qwen-code`, `gemini-cli`, `aider`, `none`); `\"off\"` turns detection off, `\"auto\"` is the default (also in the environment)",
    "keep_billing_header": "keep Claude Code's `x-anthropic-billing-header` system block for every target (by default it is removed for targets other than Anthropic's own API: provider `anthropic` without an `api_base` elsewhere); also per model in `models` / `model_info.litellm_prefix`, e.g. for an `anthropic/` deployment whose `api_base` is a gateway in front of Anthropic",
    "incremental": "remember each stream's last request (its body's length and two keyed hashes of its JSON, and what the rules wrote; at most `incrementalStreams` streams and 64 MB): an unchanged repeat (a retry) reuses its output, and a request that only appends messages no rule acts on (no system message; the earlier messages byte for byte as before, same head, same journal) reuses its decisions and runs no rule; the bytes are the full path's (`false`: every request takes the full path)",
    "incremental_streams": "streams whose last request the incremental path remembers (at most `maxSessions`; about 2 KB each beside the head written, shared with the process's memory of head texts): a stream past it, least recently used first, takes the full path at its next request",
    "metrics_port": "serve the Prometheus metrics on `127.0.0.1:PORT/metrics` (SDK, Router; the proxy's own `/metrics` needs no port); `0`: off",
    "prompt_cache_key": "send `prompt_cache_key` (a hash of the tenant-scoped session key) where the client sent none and the provider reads it (OpenAI, Azure OpenAI, Mistral; an `openai/` deployment with its own `api_base` counts as self-hosted); `model_info.litellm_prefix.promptCacheKey: true` opts a deployment in; `false` anywhere turns it off",
    "cache_breakpoints": "cache marks where the client and the config set none: Anthropic-family `cache_control` (end of head, end of the previous turn, newest message), OpenAI GPT-5.6+ `prompt_cache_breakpoint` (end of head); per model too",
    "cache_ttl": "TTL of the Anthropic marks the plugin places: `5m` (writes 1.25x) or `1h` (writes 2x; pays where sessions often idle past 5 minutes); per model too",
    "session_affinity": "`router`: keep sessions on one deployment in the model groups where the router's `session_affinity` check is on; `always`: in every group (SDK Router, LiteLLM without the check); `off`: neither set session ids nor place sessions",
    "placement_absolute_slack": "placement gate: a deployment within this many requests (decayed count) of the least loaded one may take a new session by its cached head",
    "placement_relative_slack": "placement gate: so may a deployment within this many times the mean load; past both, a new session goes elsewhere",
    "placement_move_slack": "a session back from an idle gap moves off a deployment loaded past this many times the mean (`affinity_move`, reason `overloaded`)",
    "placement_load_seconds": "time constant of each deployment's decayed request count (the load the gate compares); a deployment neither offered nor answering this long is dropped from the index",
    "placement_idle_seconds": "a session silent this long is at an idle boundary, the only point where the load or an expired cache moves it",
    "placement_active_seconds": "a session that sent a request this recently counts as active on its deployment",
    "placement_session_weight": "load of one active session, in requests of the decayed count (balances the in-flight peak)",
    "placement_active_slack": "placement gate: a deployment with more than this many active sessions above the least active one takes no new session, cached head or not (holds the in-flight peak)",
    "placement_cache_tokens": "one deployment's prefix cache, in tokens: an index entry older than this many prefilled tokens there counts as evicted (reason `expired` for a move); set it to what one replica's KV cache holds (the default: an 8B model on one 80 GB GPU)",
}
CONFIG_ENV = "LITELLM_PREFIX_CONFIG"
PROJECT_DIR_ENV = "LITELLM_PREFIX_PROJECT_DIR"
TRUSTED_ENV = "LITELLM_PREFIX_TRUSTED_PROJECTS"


def _validate(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Validate one source's keys; return {field_name: value} for the keys it set."""
    try:
        parsed = _Keys.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "(file)"
        if first["type"] == "extra_forbidden":
            known = ", ".join(sorted(to_camel(f) for f in _Keys.model_fields))
            raise SettingsError(f"{where}: unknown key {key!r} (known keys: {known})") from None
        raise SettingsError(f"{where}: key {key!r}: {first['msg']} (got {first.get('input')!r})") from None
    return {name: getattr(parsed, name) for name in parsed.model_fields_set}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: must hold a JSON object of settings")
    return data


def global_file() -> Path:
    configured = os.environ.get(CONFIG_ENV)
    if configured:
        return Path(os.path.expanduser(configured))
    return Path.home() / ".config" / "litellm-prefix" / "litellm-prefix.json"


def project_dir() -> Path | None:
    """The project directory: ``LITELLM_PREFIX_PROJECT_DIR`` or the running proxy's config directory."""
    configured = os.environ.get(PROJECT_DIR_ENV)
    if configured:
        return Path(os.path.expanduser(configured)).resolve()
    proxy_server = sys.modules.get("litellm.proxy.proxy_server")
    config_path = getattr(proxy_server, "user_config_file_path", None) or os.environ.get("CONFIG_FILE_PATH")
    if config_path:
        return Path(config_path).resolve().parent
    return None


class _Source(PydanticBaseSettingsSource):
    """A settings source that validates its own keys and remembers what it set."""

    label = "source"

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        self.values: dict[str, Any] = {}
        self.where = self.label

    def get_field_value(self, field, field_name):  # pragma: no cover - unused, __call__ does the work
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.values)


class GlobalFileSource(_Source):
    label = "global file"

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        path = global_file()
        self.where = str(path)
        self.present = path.is_file()
        if self.present:
            self.values = _validate(_read_json(path), str(path))


class ProjectFileSource(_Source):
    label = "project file"

    def __init__(self, settings_cls: type[BaseSettings], trusted: list[str]) -> None:
        super().__init__(settings_cls)
        self.note = ""
        directory = project_dir()
        if directory is None:
            return
        path = directory / PROJECT_FILE
        self.where = str(path)
        if not path.is_file():
            return
        trusted_dirs = {Path(os.path.expanduser(t)).resolve() for t in trusted if t}
        if directory not in trusted_dirs:
            self.note = (
                f"litellm-prefix: ignoring untrusted project settings {path}; add {directory} to "
                f"trustedProjects in {global_file()} or to {TRUSTED_ENV} to use it"
            )
            logger.warning(self.note)
            return
        values = _validate(_read_json(path), str(path))
        if "trusted_projects" in values:
            raise SettingsError(f"{path}: key 'trustedProjects' may only be set in the global file or {TRUSTED_ENV}")
        self.values = values


class EnvironmentSource(_Source):
    label = "environment"

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        self.where = "environment"
        self.variables: dict[str, str] = {}
        for name, var in ENV_VARS.items():
            raw = os.environ.get(var)
            if raw is None or raw == "":
                continue
            value: Any = [item.strip() for item in raw.split(",") if item.strip()] if name in _LIST_ENV else raw
            self.values.update(_validate({name: value}, f"environment variable {var}"))
            self.variables[name] = var


def _trusted_projects(global_values: Mapping[str, Any]) -> list[str]:
    from_env = [p for p in os.environ.get(TRUSTED_ENV, "").split(os.pathsep) if p]
    return list(global_values.get("trusted_projects", [])) + from_env


# The sources of the Settings object this thread built last (pydantic-settings builds them inside
# the constructor): per thread, so two threads building settings never read each other's.
_BUILDING = threading.local()


class Settings(BaseSettings, _Keys):
    """The resolved settings (fields and validators from ``_Keys``). ``load_settings()`` builds it."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, alias_generator=None, populate_by_name=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        global_source = GlobalFileSource(settings_cls)
        project_source = ProjectFileSource(settings_cls, _trusted_projects(global_source.values))
        environment = EnvironmentSource(settings_cls)
        _BUILDING.sources = (environment, project_source, global_source)  # read back by load_with_provenance
        # First wins: explicit arguments, then the environment, then the trusted project, then the global file.
        return (init_settings, environment, project_source, global_source)

    @property
    def volatile_rules(self) -> tuple[tuple[str, re.Pattern[str]], ...]:
        """Presets first (in the order given), then custom rules, compiled."""
        rules = [(name, VOLATILE_PRESETS[name]) for name in self.volatile_presets]
        rules += [(rule.name, rule.pattern) for rule in self.volatile]
        return _compiled_rules(tuple(rules))

    @property
    def tool_volatile_rules(self) -> tuple[tuple[str, re.Pattern[str]], ...]:
        """The presets turned on that also pin a span inside tool descriptions, compiled."""
        rules = [(f"{name}:tools", TOOL_VOLATILE_PRESETS[name]) for name in self.volatile_presets
                 if name in TOOL_VOLATILE_PRESETS]
        return _compiled_rules(tuple(rules))

    @property
    def transient_parts_res(self) -> tuple[re.Pattern[str], ...]:
        return tuple(pattern for _, pattern in _compiled_rules(tuple(("", p) for p in self.transient_parts)))

    @property
    def learned_volatile_exclude_res(self) -> tuple[re.Pattern[str], ...]:
        return tuple(pattern for _, pattern in _compiled_rules(tuple(("", p) for p in self.learned_volatile_exclude)))

    @property
    def notification_res(self) -> tuple[re.Pattern[str], ...]:
        return tuple(pattern for _, pattern in _compiled_rules(tuple(("", p) for p in self.notification_patterns)))

    @property
    def package_path_suffixes(self) -> tuple[str, ...]:
        """``packagePathSuffix`` as a tuple (one suffix or the list, with those a profile added)."""
        value = self.package_path_suffix
        return (value,) if isinstance(value, str) else tuple(value)

    @property
    def resolved_stable_path(self) -> str:
        path = self.stable_path
        return _resolved_path(path, tuple(os.environ.get(name) for name in _path_variables(path)))

    def for_model(self, names: tuple[str, ...] = (), model_info: Mapping[str, Any] | None = None) -> Settings:
        """Settings for one model: ``models`` globs matching any of its names (group, deployment
        model), in file order, then the deployment's ``model_info.litellm_prefix``.

        The same object for the same settings object, names and override (remembered for the
        last 256; settings are frozen): a deployment with overrides is not validated and copied
        on every request, and what is remembered per settings object downstream keeps hitting."""
        deployment = (model_info or {}).get("litellm_prefix")
        try:
            key = (tuple(names), _override_key(deployment))
        except TypeError:  # an override value that cannot be a key (a list): computed every time
            return self._for_model(names, deployment)
        return _FOR_MODEL.get(self, key, lambda: self._for_model(names, deployment))

    def _for_model(self, names: tuple[str, ...], deployment: Any) -> Settings:
        updates: dict[str, Any] = {}
        for pattern, override in self.models.items():
            if any(fnmatchcase(name, pattern) for name in names if name):
                updates.update(override.model_dump(exclude_none=True))
        if isinstance(deployment, Mapping):
            updates.update(ModelOverrides.model_validate(deployment).model_dump(exclude_none=True))
        return self.model_copy(update=updates) if updates else self


_FOR_MODEL = PerObject(256)  # caches.py


def _override_key(deployment: Any) -> Any:
    """A hashable stand-in for a deployment's ``model_info.litellm_prefix`` (raises TypeError if none)."""
    if isinstance(deployment, Mapping):
        items = tuple(sorted(deployment.items(), key=lambda kv: str(kv[0])))
        hash(items)
        return ("mapping", items)
    hash(deployment)
    return ("value", type(deployment).__name__, deployment)


@lru_cache(maxsize=64)
def _path_variables(path: str) -> tuple[str, ...]:
    """The environment variables a path reads when expanded (``$VAR``, ``${VAR}``, ``~``: HOME)."""
    names = [a or b for a, b in re.findall(r"\$(?:\{([^}]*)\}|(\w+))", path)]
    return tuple(names + (["HOME"] if path.startswith("~") else []))


@lru_cache(maxsize=64)
def _resolved_path(path: str, values: tuple[str | None, ...]) -> str:
    # Read on every request by the install-path rule: expanded once per path and variable values.
    return os.path.normpath(os.path.expanduser(os.path.expandvars(path)))


@lru_cache(maxsize=64)
def _compiled_rules(rules: tuple[tuple[str, str], ...]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((name, re.compile(pattern)) for name, pattern in rules)


class Provenance(BaseModel):
    settings: Settings
    origin: dict[str, str]
    notes: list[str]


def load_settings(**overrides: Any) -> Settings:
    """Resolve settings from every source; raises ``SettingsError`` naming the file and key."""
    return load_with_provenance(**overrides).settings


def load_with_provenance(**overrides: Any) -> Provenance:
    if overrides:
        _validate(overrides, "arguments")
    settings = Settings(**overrides)
    environment, project_source, global_source = _BUILDING.sources  # (this thread's: the Settings just built)
    origin: dict[str, str] = {}
    for name in Settings.model_fields:
        if name in overrides:
            origin[name] = "argument"
        elif name in environment.values:
            origin[name] = f"environment {environment.variables[name]}"
        elif name in project_source.values:
            origin[name] = f"project file {project_source.where}"
        elif name in global_source.values:
            origin[name] = f"global file {global_source.where}"
        else:
            origin[name] = "default"
    notes = [project_source.note] if project_source.note else []
    return Provenance(settings=settings, origin=origin, notes=notes)


def display_value(settings: Settings, name: str) -> Any:
    value = getattr(settings, name)
    if isinstance(value, dict):
        return {k: v.model_dump(exclude_none=True, by_alias=True) for k, v in value.items()}
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, BaseModel):
        return value.model_dump()
    return value
