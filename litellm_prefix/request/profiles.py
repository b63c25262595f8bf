"""Agent profiles: detection, and applying one to settings (the profiles themselves are data in
``profile_data``, below the settings, which take their agent defaults from it).

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
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any

from ..caches import PerObject
from ..profile_data import (  # noqa: F401  (the profiles' data, read as profiles.NAME)
    BILLING_PREFIX,
    CLAUDE_CODE,
    CODEX,
    GEMINI_CLI,
    OPENCODE,
    PI,
    PROFILES,
    QWEN_CODE,
    QWEN_CODE_CONTEXT,
    Profile,
)
from ..settings import ContextBlock, Listing, Settings
from .sections import segment_memo

# Every profile's never-learned lines, compiled once.
NEVER_LEARNED: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for prof in PROFILES for p in prof.never_learned)
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
def _re(pattern: str) -> re.Pattern[str]:
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


_APPLIED = PerObject(64)  # caches.py


def apply(settings: Settings, profile: Profile | None) -> Settings:
    """``settings`` with the profile's presets, notification patterns and install suffixes added (never removed).

    The same object for the same settings object and profile (remembered for the last 64), so
    a request does not copy the settings and recompile their derived values."""
    if profile is None:
        return settings
    return _APPLIED.get(settings, profile.name, lambda: _apply(settings, profile))


def _apply(settings: Settings, profile: Profile) -> Settings:
    updates: dict[str, Any] = {}
    presets = [p for p in profile.volatile_presets if p not in settings.volatile_presets]
    if presets:
        updates["volatile_presets"] = [*settings.volatile_presets, *presets]
    patterns = [p for p in profile.notification_patterns if p not in settings.notification_patterns]
    if patterns:
        updates["notification_patterns"] = [*settings.notification_patterns, *patterns]
    suffixes = [s for s in profile.install_suffixes if s not in settings.package_path_suffixes]
    if suffixes:
        updates["package_path_suffix"] = [*settings.package_path_suffixes, *suffixes]
    blocks = [ContextBlock(start=a, end=b, presets=c) for a, b, c in profile.first_user_context]
    blocks = [block for block in blocks if block not in settings.first_user_context]
    if blocks:
        updates["first_user_context"] = [*settings.first_user_context, *blocks]
    transient = [p for p in profile.transient_parts if p not in settings.transient_parts]
    if transient:
        updates["transient_parts"] = [*settings.transient_parts, *transient]
    listings = [Listing(name=n, order=o, places=p, enums=e) for n, o, p, e in profile.listings]
    listings = [listing for listing in listings if listing.name not in {x.name for x in settings.listings}]
    if listings:
        updates["listings"] = [*settings.listings, *listings]
    if profile.tool_order and settings.tool_order == "auto":
        updates["tool_order"] = profile.tool_order
    return settings.model_copy(update=updates) if updates else settings
