"""The LiteLLM callback: both request hooks run one transform; a response header reports drift.

- ``async_pre_call_hook`` (proxy only) runs before routing, so LiteLLM's own
  prompt-caching routing already sees the stable bytes. The proxy calls it only when
  it is defined on the callback's own class; ``__init_subclass__`` re-attaches it to
  subclasses so that customising the class cannot silently switch it off (and the
  response-headers hook, which the proxy looks up the same way).
- ``async_pre_call_deployment_hook`` (SDK ``acompletion``/``aresponses``/
  ``anthropic.messages.acreate``, Router, proxy) sees the chosen deployment's
  ``model_info``; it re-runs on retries and fallbacks, which the idempotent rules
  make harmless.
- ``async_log_success_event`` (proxy and SDK, streaming included) reads the cached
  tokens the upstream reported and classifies the call (``sinks``, ``classify``).
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from litellm.integrations.custom_logger import CustomLogger

from .fleet.affinity import SessionAffinity, give_session_id, session_key
from .request import target as targets
from .request.core import Stabilizer, call_id_of
from .request.target import Target
from .settings import Settings, load_settings

logger = logging.getLogger("litellm_prefix")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# The metadata key naming the call whose report answers the request: a route that turns the client's
# request into a call of its own (Gemini's native routes) hands that call the request's metadata.
CALL_MARK = "litellm_prefix_call_id"


def _metadata_of(data: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = data.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def _name_call(kwargs: Mapping[str, Any]) -> None:
    """Name the call in its request's metadata (``CALL_MARK``), for the response-headers hook."""
    metadata, call_id = kwargs.get("metadata"), kwargs.get("litellm_call_id")
    if isinstance(metadata, dict) and isinstance(call_id, str):
        metadata[CALL_MARK] = call_id


class PrefixStabilizer(CustomLogger):
    """Keeps every session's request head byte-stable. Register an instance as a LiteLLM callback."""

    def __init__(self, settings: Settings | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings if settings is not None else load_settings()
        self.core = Stabilizer(self.settings)
        self.affinity = SessionAffinity(self.core.store, self.core.stats, lambda: self.settings,
                                        self.settings.session_ttl_seconds, report=self.core.sinks.jsonl)
        missing = targets.litellm_does().missing()
        if missing:  # an older LiteLLM than the README's table: the rules that rely on it are off-target
            logger.warning("litellm-prefix: this LiteLLM release lacks %s (README, \"LiteLLM versions\")",
                           ", ".join(missing))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # LiteLLM's proxy looks the pre-call hook, and the response-headers hook (1.108:
        # ``ProxyLogging.callback_capabilities``), up in the class's own __dict__.
        for name in ("async_pre_call_hook", "async_post_call_response_headers_hook"):
            if name not in vars(cls):
                setattr(cls, name, getattr(PrefixStabilizer, name))

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any) -> dict:
        group, deployment = "", None
        try:
            group = data.get("model") if isinstance(data.get("model"), str) else ""
            deployment = targets.proxy_deployment(group) or {}
            params = deployment.get("litellm_params") or {}
            model_info = deployment.get("model_info") or None
            model = params.get("model") or group
            target = targets.resolve(model, params.get("custom_llm_provider"), model_info,
                                     api_base=params.get("api_base"), call_type=call_type,
                                     prompt_cache_options=params.get("prompt_cache_options",
                                                                     data.get("prompt_cache_options")))
            api_key_hash = _text(getattr(user_api_key_dict, "api_key", None))
            team_id = _text(getattr(user_api_key_dict, "team_id", None))
        except Exception as exc:
            logger.warning("litellm-prefix: could not resolve the deployment (%s)", type(exc).__name__)
            target, model_info, model, api_key_hash, team_id = Target(model=str(data.get("model", ""))), None, "", None, None
        call_id = call_id_of(data)
        # A session id is given only where LiteLLM reads it for this model group (its router's
        # ``session_affinity``, its Kubernetes pod discovery on the group's deployment, or our own
        # check in ``always`` mode); elsewhere the metadata stays as sent. The key comes with the
        # transform (one read of the client's request); computed here only for a call the
        # transform cannot name (no call id) or did not take.
        affinity = self.affinity.active(group) or (self.settings.enabled and self.settings.session_affinity != "off"
                                                   and targets.reads_session_id(deployment))
        key = self._session_key_for_affinity(data, call_type, api_key_hash, team_id) \
            if affinity and call_id is None else None
        result = await self.core.stabilize(
            data,
            call_type,
            target=target,
            model_names=(group, model),
            model_info=model_info,
            api_key_hash=api_key_hash,
            team_id=team_id,
        )
        if affinity and call_id is not None:
            taken, key = self.core.affinity_key(call_id)
            if not taken:  # passed through (an internal error, another shape): as the client sent it
                key = self._session_key_for_affinity(data, call_type, api_key_hash, team_id)
        self._give_session_id(data, key, call_type)
        return result

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any]:
        try:
            model = kwargs.get("model") if isinstance(kwargs.get("model"), str) else ""
            model_info = kwargs.get("model_info") if isinstance(kwargs.get("model_info"), Mapping) else None
            params = kwargs.get("litellm_params") if isinstance(kwargs.get("litellm_params"), Mapping) else {}
            target = targets.resolve(model, kwargs.get("custom_llm_provider"), model_info,
                                     api_base=kwargs.get("api_base") or params.get("api_base"), call_type=call_type,
                                     prompt_cache_options=kwargs.get("prompt_cache_options",
                                                                     params.get("prompt_cache_options")))
        except Exception as exc:
            logger.warning("litellm-prefix: could not resolve the deployment (%s)", type(exc).__name__)
            model, model_info, target = "", None, Target()
        result = await self.core.stabilize(
            kwargs, call_type, target=target, model_names=(targets.model_group(kwargs), model), model_info=model_info,
            hints=True,
        )
        _name_call(kwargs)
        return result

    # -- session affinity (affinity.py) ------------------------------------------------

    def _session_key_for_affinity(self, data: Mapping[str, Any], call_type: Any, api_key_hash: str | None,
                                  team_id: str | None) -> str | None:
        """The session key, computed on the client's request (None: no conversation, or it failed)."""
        try:
            return session_key(data, call_type, api_key_hash, team_id, settings=self.settings,
                               model_names=(str(data.get("model") or ""),))
        except Exception as exc:
            self.core.stats["errors"] += 1
            logger.warning("litellm-prefix: no session key for affinity (%s)", type(exc).__name__)
            return None

    def _give_session_id(self, data: dict, key: str | None, call_type: Any) -> None:
        if key is None:
            return
        try:
            if give_session_id(data, key, call_type):
                self.core.stats["affinity_session_ids"] += 1
        except Exception as exc:
            self.core.stats["errors"] += 1
            logger.warning("litellm-prefix: could not set the session id for affinity (%s)", type(exc).__name__)

    async def async_filter_deployments(
        self,
        model: str,
        healthy_deployments: list,
        messages: Any,
        request_kwargs: dict | None = None,
        parent_otel_span: Any = None,
    ) -> list:
        """Router pre-call check: keep each session on its deployment (affinity.py); fails open."""
        try:
            return await self.affinity.filter(model, healthy_deployments, request_kwargs, messages)
        except Exception as exc:
            self.core.stats["errors"] += 1
            logger.warning("litellm-prefix: session affinity skipped for this call (%s)", type(exc).__name__)
            return healthy_deployments

    async def async_post_call_failure_deployment_hook(
        self, request_data: Mapping[str, Any], exception: Exception, call_type: Any, fallback_depth: int | None = None
    ) -> None:
        """A deployment attempt failed: the session moves on the router's retry (affinity.py)."""
        try:
            self.affinity.record_failure(request_data, exception)
        except Exception as exc:
            logger.warning("litellm-prefix: could not record a deployment failure (%s)", type(exc).__name__)
        return None

    async def async_post_call_response_headers_hook(
        self,
        data: dict,
        user_api_key_dict: Any,
        response: Any,
        request_headers: dict[str, str] | None = None,
        litellm_call_info: dict[str, Any] | None = None,
    ) -> dict[str, str] | None:
        """The call's report (``x-litellm-prefix-head``, ``-agent``, ``-drift``). Gemini's native routes
        (``generateContent``, ``streamGenerateContent``) answer a request LiteLLM turned into a chat
        call of its own, with another call id (``google_genai/adapters/handler.py``,
        ``GenerateContentToCompletionHandler``): the metadata they share names it (``CALL_MARK``). A
        pass-through route's raw body, which no hook rewrites: what it shows (``observed_headers``)."""
        try:
            headers = self.core.response_headers(data.get("litellm_call_id"))
            if not headers:
                marked = _metadata_of(data).get(CALL_MARK)
                headers = self.core.response_headers(marked) if isinstance(marked, str) else {}
            if not headers and not data.get("litellm_call_id") and "proxy_server_request" not in data:
                headers = self.core.observed_headers(data, request_headers)
            return headers or None
        except Exception:
            return None

    async def async_log_success_event(self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any) -> None:
        """Measured cache use of the call (proxy and SDK, streaming included), classified and logged."""
        try:
            self.core.completed(kwargs, response_obj)
        except Exception:  # the success path never raises into LiteLLM
            pass
        try:  # a compaction's answer: where its session goes on (core._compaction_links)
            await self.core.answered(kwargs, response_obj)
        except Exception:
            pass
        try:  # the answering deployment and its cached tokens feed placement (affinity.py)
            await self.affinity.answered(kwargs, response_obj)
        except Exception as exc:
            logger.warning("litellm-prefix: placement index not updated (%s)", type(exc).__name__)
