"""Session identity, always tenant-scoped.

Session id, first found wins: the agent's own id (its profile's ``session_sources``:
Claude Code's ``x-claude-code-session-id`` or ``metadata.user_id``, Codex's
``session-id``/``thread-id``/``session_id``/``x-client-request-id`` headers and
``prompt_cache_key``, opencode's ``x-session-affinity``/``x-opencode-session``), then
LiteLLM's ``litellm_session_id`` / ``metadata.session_id`` (the proxy fills them from
``x-session-id``), ``prompt_cache_key``, the ``x-session-affinity`` header, else a key
derived from the first user message (its marks ignored). A subagent is its own stream
inside the session (``session_stream``). The
tenant is the team id, else the API-key hash; the stored key is a hash of both, so
one tenant can never read or steer another's state, and no raw id is ever logged.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .journal import content_hash, unmarked
from .view import View, field_of

if TYPE_CHECKING:
    from .profiles import Profile

SESSION_HEADERS = ("x-session-id", "x-litellm-session-id", "x-claude-code-session-id", "session_id", "x-session-affinity")


def _metadata(data: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in ("metadata", "litellm_metadata"):
        value = data.get(key)
        if isinstance(value, Mapping) and value:
            return value
    return {}


def _headers(data: Mapping[str, Any]) -> Mapping[str, Any]:
    request = data.get("proxy_server_request")
    if isinstance(request, Mapping) and isinstance(request.get("headers"), Mapping):
        return request["headers"]
    headers = _metadata(data).get("headers")
    return headers if isinstance(headers, Mapping) else {}


def _first_user_text(view: View) -> str:
    for item in view.body:
        if field_of(item, "role") == "user":
            content = field_of(item, "content")
            try:
                return json.dumps(unmarked({"content": content})["content"], sort_keys=True, ensure_ascii=False,
                                  default=str)
            except (TypeError, ValueError):
                return str(content)
    return ""


_DIGITS = re.compile(r"[0-9]+")
_LEGACY_USER_ID = re.compile(r"_session_([A-Za-z0-9-]{8,})$")


def claude_code_user_id_session(value: Any) -> str | None:
    """The session id inside Claude Code's ``metadata.user_id``: a JSON string with
    ``session_id`` (2.1.78+), or ``user_<hash>_account_<id>_session_<uuid>`` before that."""
    if not isinstance(value, str) or not value:
        return None
    if value.startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        session = parsed.get("session_id") if isinstance(parsed, dict) else None
        return session if isinstance(session, str) and session else None
    match = _LEGACY_USER_ID.search(value)
    return match.group(1) if match else None


def _agent_source(data: Mapping[str, Any], headers: Mapping[str, Any], source: str) -> str | None:
    kind, _, name = source.partition(":")
    if kind == "header":
        value = headers.get(name)
    elif kind == "body":
        value = data.get(name)
    elif kind == "user_id":
        metadata = data.get("metadata")
        value = claude_code_user_id_session(metadata.get("user_id")) if isinstance(metadata, Mapping) else None
    else:
        value = None
    return value if isinstance(value, str) and value else None


def agent_session_id(data: Mapping[str, Any], profile: "Profile | None") -> tuple[str, str] | None:
    """(the agent's own session id, its source), from the profile's sources in order."""
    if profile is None:
        return None
    headers = _headers(data)
    for source in profile.session_sources:
        value = _agent_source(data, headers, source)
        if value:
            return value, source
    return None


def session_stream(data: Mapping[str, Any], view: View, profile: "Profile | None") -> str | None:
    """A subagent's stream inside its session (``None``: the main stream or no profile).

    A subagent header names it; else, for agents whose subagents share the session id, the
    first head segment that is not shared by every agent of the kind (billing block,
    identity line) tells the streams apart, so a subagent's head never reads as a change
    of the main head and keeps its own pins.
    """
    if profile is None:
        return None
    headers = _headers(data)
    for name in profile.subagent_headers:
        value = headers.get(name)
        if isinstance(value, str) and value:
            return f"agent:{value}"
    if profile.stream_by_head:
        for segment in view.head:
            if not any(re.match(pattern, segment) for pattern in profile.shared_head):
                # Digits blanked: a date or counter near the start never splits the main stream.
                return f"head:{content_hash(_DIGITS.sub('0', segment[:256]))}"
    return None


def session_id(data: Mapping[str, Any], view: View, profile: "Profile | None" = None) -> tuple[str, str]:
    """(raw session id, how it was found)."""
    own = agent_session_id(data, profile)
    if own is not None:
        return own
    metadata = _metadata(data)
    for source, value in (
        ("litellm_session_id", data.get("litellm_session_id")),
        ("metadata.session_id", metadata.get("session_id")),
        ("prompt_cache_key", data.get("prompt_cache_key")),
    ):
        if isinstance(value, str) and value:
            return value, source
    headers = _headers(data)
    for name in SESSION_HEADERS:
        value = headers.get(name)
        if isinstance(value, str) and value:
            return value, f"header {name}"
    digest = hashlib.sha256(_first_user_text(view).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"first-user:{digest}", "first user message"


def tenant_of(data: Mapping[str, Any], api_key_hash: str | None = None, team_id: str | None = None) -> str:
    metadata = _metadata(data)
    team = team_id or metadata.get("user_api_key_team_id")
    if isinstance(team, str) and team:
        return f"team:{team}"
    key = api_key_hash or metadata.get("user_api_key_hash")
    if isinstance(key, str) and key:
        return f"key:{key}"
    return "local"


@lru_cache(maxsize=4096)
def scoped_key(tenant: str, session: str) -> str:
    return hashlib.sha256(f"{tenant}\x00{session}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
