"""Session identity, always tenant-scoped.

Session id, first found wins: LiteLLM's ``litellm_session_id`` / ``metadata.session_id``
(the proxy fills them from ``x-session-id``), ``prompt_cache_key``, the
``x-session-affinity`` header, else a key derived from the first user message. The
tenant is the team id, else the API-key hash; the stored key is a hash of both, so
one tenant can never read or steer another's state, and no raw id is ever logged.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .view import View, field_of

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
                return json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)
            except (TypeError, ValueError):
                return str(content)
    return ""


def session_id(data: Mapping[str, Any], view: View) -> tuple[str, str]:
    """(raw session id, how it was found)."""
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


def scoped_key(tenant: str, session: str) -> str:
    return hashlib.sha256(f"{tenant}\x00{session}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
