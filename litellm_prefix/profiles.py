"""Agent profiles: what each coding agent sends, as data; detection; applying one to settings.

A profile says how to recognise an agent (request headers, else a signature of its head),
which volatile presets and notification patterns it needs, where its own session id is,
and how a subagent shows. (Claude Code's billing block is handled for every request that
carries it, detected or not: ``rules/billing.py``.) Rules never see
a profile: ``apply`` merges it into the request's ``Settings`` (like ``Settings.for_model``),
and ``session.session_id`` reads its session-id sources. No ``if agent == ...`` anywhere.

Detection, first found wins: a profile forced for the model (``profiles.force`` globs),
nothing when detection is off, the request headers (the proxy's
``proxy_server_request.headers``, lower-case), else the head signature (SDK and Router
calls carry no headers). Each profile's facts were read from the agent's own source;
``source`` names the file and version.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any

from .sections import segment_memo
from .settings import Settings, remembered_for

BILLING_PREFIX = "x-anthropic-billing-header:"


@dataclass(frozen=True)
class Profile:
    name: str
    # (header name, regex searched in its value); any one match recognises the agent.
    headers: tuple[tuple[str, str], ...] = ()
    # Regexes matched at the start of one of the head's first three segments.
    head_signature: tuple[str, ...] = ()
    # Plain substrings found in the first 20,000 characters of one of those segments.
    head_markers: tuple[str, ...] = ()
    # Names from settings.VOLATILE_PRESETS turned on for this agent.
    volatile_presets: tuple[str, ...] = ()
    notification_patterns: tuple[str, ...] = ()
    # The agent's own session id, first found wins: ``header:NAME``, ``body:FIELD``,
    # ``user_id`` (Claude Code's ``metadata.user_id``: JSON with ``session_id``, or
    # ``user_<hash>_account_<id>_session_<uuid>``).
    session_sources: tuple[str, ...] = ()
    # Headers naming a subagent inside the session: its own stream.
    subagent_headers: tuple[str, ...] = ()
    # Head segments that are the same for the main agent and its subagents (skipped when
    # the stream is told apart by the head): regexes matched at the segment's start.
    shared_head: tuple[str, ...] = ()
    # Tell subagents apart by the first head segment that is not shared (when no header says so).
    stream_by_head: bool = False
    source: str = ""


CLAUDE_CODE = Profile(
    name="claude-code",
    headers=(
        ("user-agent", r"^(?:claude-cli|claude-code)/"),
        ("x-app", r"^cli$"),
        ("anthropic-beta", r"(?:^|,)\s*claude-code-"),
        ("x-claude-code-session-id", r"."),
    ),
    head_signature=(
        r"x-anthropic-billing-header: cc_version=",
        r"You are Claude Code, Anthropic's official CLI for Claude",
        r"You are an agent for Claude Code, Anthropic's official CLI for Claude",
        r"You are a Claude agent, built on Anthropic's Claude Agent SDK",
    ),
    volatile_presets=("todays-date", "git-status"),
    notification_patterns=(r"^\s*<task-notification>",),
    session_sources=("header:x-claude-code-session-id", "user_id"),
    subagent_headers=("x-claude-code-agent-id",),
    shared_head=(
        re.escape(BILLING_PREFIX),
        r"You are Claude Code, Anthropic's official CLI for Claude(?:, running within the Claude Agent SDK)?\.\s*$",
        r"You are a Claude agent, built on Anthropic's Claude Agent SDK\.\s*$",
    ),
    stream_by_head=True,
    source="@anthropic-ai/claude-code 2.1.90 cli.js (request headers, z08 attribution header, user_id metadata, "
    "system blocks [billing, identity, prompt]); 2.1.197 is a native binary",
)

CODEX = Profile(
    name="codex",
    headers=(
        ("originator", r"^codex"),
        ("user-agent", r"^(?:codex_cli_rs|codex_exec|codex-tui|codex_vscode|codex_sdk_ts|Codex Desktop)/"),
    ),
    head_signature=(
        r"You are Codex, ",
        r"You are a coding agent running in the Codex CLI",
    ),
    session_sources=("header:session-id", "header:thread-id", "header:session_id", "header:x-client-request-id",
                     "body:prompt_cache_key"),
    # Review, compaction and memory runs share the conversation's id under another prompt.
    subagent_headers=("x-openai-subagent",),
    source="openai/codex codex-rs/codex-api/src/requests/headers.rs (session_id header, x-openai-subagent), "
    "codex-rs/core (originator codex_cli_rs, user agent <originator>/<version> (...))",
)

OPENCODE = Profile(
    name="opencode",
    headers=(
        ("user-agent", r"^opencode/"),
        ("x-opencode-session", r"."),
    ),
    head_signature=(
        r"You are opencode, ",
        r"You are OpenCode, ",
    ),
    volatile_presets=("todays-date",),
    session_sources=("header:x-session-affinity", "header:x-opencode-session"),
    source="anomalyco/opencode packages/opencode/src/session (x-session-affinity / X-Session-Id / "
    "x-parent-session-id headers; x-opencode-session and User-Agent opencode/<version> to its own providers)",
)

PI = Profile(
    name="pi",
    headers=(
        ("user-agent", r"^pi/\d|^pi-coding-agent"),
    ),
    head_signature=(
        r"You are an expert coding assistant operating inside pi, a coding agent harness",
    ),
    head_markers=("\n</tools>\n\n<rules>\n",),  # its sectioned head
    volatile_presets=("current-date",),
    session_sources=("header:session_id", "header:x-session-affinity", "body:prompt_cache_key"),
    source="@earendil-works/pi-coding-agent 0.74.2 dist/core/system-prompt.js (Current date line), "
    "dist/utils/pi-user-agent.js (pi/<version> (...)), dist/core/sdk.js",
)

PROFILES: tuple[Profile, ...] = (CLAUDE_CODE, CODEX, OPENCODE, PI)
BY_NAME: dict[str, Profile] = {p.name: p for p in PROFILES}


def names() -> tuple[str, ...]:
    return tuple(BY_NAME)


def headers_of(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The client's request headers (proxy only), lower-case keys; empty for SDK/Router calls."""
    request = data.get("proxy_server_request")
    if isinstance(request, Mapping) and isinstance(request.get("headers"), Mapping):
        return request["headers"]
    for key in ("metadata", "litellm_metadata"):
        meta = data.get(key)
        if isinstance(meta, Mapping) and isinstance(meta.get("headers"), Mapping):
            return meta["headers"]
    return {}


def header(headers: Mapping[str, Any], name: str) -> str | None:
    value = headers.get(name)
    if value is None and name != name.lower():
        value = headers.get(name.lower())
    return value if isinstance(value, str) and value else None


@lru_cache(maxsize=256)
def _re(pattern: str) -> "re.Pattern[str]":
    return re.compile(pattern)


def _by_headers(headers: Mapping[str, Any]) -> Profile | None:
    if not headers:
        return None
    # The verdict depends only on the values of the headers the profiles name: remembered by them
    # (a client sends the same few headers on every request).
    return _by_header_values(tuple(header(headers, name) for name in _HEADER_NAMES))


_HEADER_NAMES = tuple(dict.fromkeys(name for profile in PROFILES for name, _ in profile.headers))


@lru_cache(maxsize=1024)
def _by_header_values(values: tuple[str | None, ...]) -> Profile | None:
    found = dict(zip(_HEADER_NAMES, values))
    for profile in PROFILES:
        for name, pattern in profile.headers:
            value = found[name]
            if value is not None and _re(pattern).search(value):
                return profile
    return None


def _by_head(head: Sequence[str]) -> Profile | None:
    # Anchored matches and substring searches only; what each segment matches is remembered with
    # the segment's text (a session's head repeats every turn, and both hooks ask).
    matched = [segment_memo(segment, "profiles", _profiles_matching) for segment in head[:3]]
    for profile in PROFILES:
        if any(profile.name in names for names in matched):
            return profile
    return None


def _profiles_matching(segment: str) -> frozenset[str]:
    """The names of the profiles whose head signature or marker this one segment shows."""
    return frozenset(
        profile.name for profile in PROFILES
        if any(_re(pattern).match(segment) for pattern in profile.head_signature)
        or any(segment.find(marker, 0, 20000) != -1 for marker in profile.head_markers))


def detect(data: Mapping[str, Any], head: Sequence[str], settings: Settings,
           model_names: Sequence[str] = ()) -> Profile | None:
    """The agent that sent this request, or ``None`` (unknown agent, or detection off)."""
    config = settings.profiles
    for pattern, forced in config.force.items():
        if any(fnmatchcase(name, pattern) for name in model_names if name):
            return BY_NAME.get(forced)
    if not config.detect:
        return None
    return _by_headers(headers_of(data)) or _by_head(head)


_APPLIED: "OrderedDict[tuple[int, str], tuple[Settings, Settings]]" = OrderedDict()


def apply(settings: Settings, profile: Profile | None) -> Settings:
    """``settings`` with the profile's presets and notification patterns added (never removed).

    The same object for the same settings object and profile (remembered for the last 64), so
    a request does not copy the settings and recompile their derived values."""
    if profile is None:
        return settings
    return remembered_for(_APPLIED, 64, (id(settings), profile.name), settings, lambda: _apply(settings, profile))


def _apply(settings: Settings, profile: Profile) -> Settings:
    updates: dict[str, Any] = {}
    presets = [p for p in profile.volatile_presets if p not in settings.volatile_presets]
    if presets:
        updates["volatile_presets"] = [*settings.volatile_presets, *presets]
    patterns = [p for p in profile.notification_patterns if p not in settings.notification_patterns]
    if patterns:
        updates["notification_patterns"] = [*settings.notification_patterns, *patterns]
    return settings.model_copy(update=updates) if updates else settings
