"""The LiteLLM callback: both request hooks run one transform; a response header reports drift.

- ``async_pre_call_hook`` (proxy only) runs before routing, so LiteLLM's own
  prompt-caching routing already sees the stable bytes. The proxy calls it only when
  it is defined on the callback's own class; ``__init_subclass__`` re-attaches it to
  subclasses so that customising the class cannot silently switch it off.
- ``async_pre_call_deployment_hook`` (SDK ``acompletion``/``aresponses``/
  ``anthropic.messages.acreate``, Router, proxy) sees the chosen deployment's
  ``model_info``; it re-runs on retries and fallbacks, which the idempotent rules
  make harmless.
- ``async_log_success_event`` (proxy and SDK, streaming included) reads the cached
  tokens the upstream reported and classifies the call (``sinks``, ``classify``).
"""
from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from litellm.integrations.custom_logger import CustomLogger

from .affinity import SessionAffinity, give_session_id, session_key
from .context import Recent, Target, cost_map_value
from .core import Stabilizer, call_id_of
from .settings import Settings, load_settings

logger = logging.getLogger("litellm_prefix")


@lru_cache(maxsize=1024)
def _provider_of(model: str) -> str:
    try:
        import litellm

        return litellm.get_llm_provider(model=model)[1] or ""
    except Exception:
        return model.split("/", 1)[0] if "/" in model else ""


def _cost_map_mid_system(model: str, provider: str) -> bool | None:
    return cost_map_value(model, provider, "supports_mid_conversation_system", bool)


def _declared_mid_system(model_info: Mapping[str, Any] | None) -> bool | None:
    if not isinstance(model_info, Mapping):
        return None
    value = model_info.get("supports_mid_conversation_system")
    if isinstance(value, bool):
        return value
    ours = model_info.get("litellm_prefix")
    if isinstance(ours, Mapping):
        for key in ("supportsMidConversationSystem", "supports_mid_conversation_system"):
            if isinstance(ours.get(key), bool):
                return ours[key]
    return None


def litellm_strips_billing(call_type: Any, model: str, provider: str, model_info: Mapping[str, Any] | None) -> bool:
    """Whether LiteLLM itself drops Claude Code's billing block for this route and deployment.

    Asks the same provider config LiteLLM will use: on ``/v1/messages`` the native messages
    config when the deployment has one (else the request is translated to chat completions),
    on chat completions the provider's chat config; its ``should_strip_billing_metadata()``.
    Cached per (route, model, provider, pass-through opt-in): the lookup costs up to 0.5 ms.
    """
    return _litellm_strips_billing(_call_type_name(call_type), model, provider, _passes_through(model_info))


def _passes_through(model_info: Mapping[str, Any] | None) -> bool:
    """The deployment opts in to LiteLLM's native ``/v1/messages`` pass-through."""
    endpoints = model_info.get("supported_endpoints") if isinstance(model_info, Mapping) else None
    return isinstance(endpoints, (list, tuple)) and "/v1/messages" in endpoints


@lru_cache(maxsize=1024)
def _litellm_strips_billing(route: str, model: str, provider: str, passes_through: bool) -> bool:
    model_info = {"supported_endpoints": ["/v1/messages"]} if passes_through else None
    try:
        import litellm
        from litellm.utils import ProviderConfigManager

        bare = model.split("/", 1)[1] if provider and model.startswith(provider + "/") else model
        if route == "anthropic_messages":
            try:
                from litellm.llms.anthropic.pass_through.messages.handler import _native_messages_config

                config = _native_messages_config(bare, provider, model_info)
            except ImportError:  # older LiteLLM: the public lookup, without the pass-through opt-in
                config = ProviderConfigManager.get_provider_anthropic_messages_config(
                    model=bare, provider=litellm.LlmProviders(provider))
            if config is not None:
                return bool(config.should_strip_billing_metadata())
        config = ProviderConfigManager.get_provider_chat_config(model=bare, provider=litellm.LlmProviders(provider))
        strip = getattr(config, "should_strip_billing_metadata", None)
        return bool(strip()) if callable(strip) else False
    except Exception:
        return False


@lru_cache(maxsize=1024)
def _accepts_prompt_cache_key(model: str, provider: str, call_type: str) -> bool:
    """LiteLLM forwards ``prompt_cache_key`` for this provider and route (never where it would drop or reject it)."""
    try:
        import litellm

        if call_type in ("aresponses", "responses"):
            from litellm.utils import ProviderConfigManager

            config = ProviderConfigManager.get_provider_responses_api_config(
                provider=litellm.LlmProviders(provider), model=model)
            if config is not None:
                return "prompt_cache_key" in (config.get_supported_openai_params(model) or ())
        elif call_type not in ("acompletion", "completion"):
            return False
        return "prompt_cache_key" in (litellm.get_supported_openai_params(model=model, custom_llm_provider=provider) or ())
    except Exception:
        return False


@lru_cache(maxsize=1024)
def _reads_cache_control(model: str, provider: str) -> bool:
    """Anthropic-family target (Anthropic, Bedrock, Vertex, Azure AI Claude with prompt caching)."""
    try:
        from litellm.llms.anthropic.common_utils import supports_anthropic_cache_control

        return bool(supports_anthropic_cache_control(model, provider or None))
    except Exception:
        return False


def _call_type_name(call_type: Any) -> str:
    return str(getattr(call_type, "value", call_type) or "")


def target_for(model: str, provider: str | None, model_info: Mapping[str, Any] | None, *,
               api_base: Any = None, call_type: Any = None) -> Target:
    import litellm

    return _target(model, provider or "", _declared_mid_system(model_info), _passes_through(model_info),
                   api_base if isinstance(api_base, str) else "", _call_type_name(call_type),
                   bool(getattr(litellm, "openai_system_messages_first", False)), _wants_prompt_cache_key(model_info))


def _wants_prompt_cache_key(model_info: Mapping[str, Any] | None) -> bool:
    """The deployment asks for ``prompt_cache_key`` (``model_info.litellm_prefix.promptCacheKey: true``)."""
    ours = model_info.get("litellm_prefix") if isinstance(model_info, Mapping) else None
    return isinstance(ours, Mapping) and any(ours.get(k) is True for k in ("promptCacheKey", "prompt_cache_key"))


@lru_cache(maxsize=1024)
def _target(model: str, provider: str, declared_mid_system: bool | None, passes_through: bool, api_base: str,
            route: str, system_messages_first: bool, wants_prompt_cache_key: bool = False) -> Target:
    """The target for the values ``target_for`` reads from the request (each request asks twice:
    the lookups in LiteLLM's maps cost more than the rules of a short request; a Target is frozen)."""
    provider = provider or _provider_of(model)
    return Target(
        model=model,
        provider=provider,
        model_info_mid_system=declared_mid_system,
        cost_map_mid_system=_cost_map_mid_system(model, provider),
        system_messages_first=system_messages_first,
        api_base=api_base,
        strips_billing=_litellm_strips_billing(route, model, provider, passes_through) if provider else False,
        accepts_prompt_cache_key=_accepts_prompt_cache_key(model, provider, route),
        reads_cache_control=_reads_cache_control(model, provider),
        wants_prompt_cache_key=wants_prompt_cache_key,
    )


DEPLOYMENT_SECONDS = 1.0
_DEPLOYMENTS = Recent(DEPLOYMENT_SECONDS, 1024)


def _proxy_deployment(group: str) -> Mapping[str, Any] | None:
    """The first deployment of a proxy model group, when the proxy's router is loaded.

    Remembered per group while the router and its model list (same list, same length) are
    the same, for at most ``DEPLOYMENT_SECONDS`` (a deployment edited in place is seen that late)."""
    proxy_server = sys.modules.get("litellm.proxy.proxy_server")
    router = getattr(proxy_server, "llm_router", None)
    if router is None or not group:
        return None
    model_list = getattr(router, "model_list", None)
    stamp = (router, model_list, len(model_list) if isinstance(model_list, list) else -1)
    try:
        return _DEPLOYMENTS.get(group, lambda: next(iter(router.get_model_list(model_name=group) or []), None), stamp)
    except Exception:
        return None


def _model_group(data: Mapping[str, Any]) -> str:
    for key in ("metadata", "litellm_metadata"):
        meta = data.get(key)
        if isinstance(meta, Mapping) and isinstance(meta.get("model_group"), str):
            return meta["model_group"]
    return ""


class PrefixStabilizer(CustomLogger):
    """Keeps every session's request head byte-stable. Register an instance as a LiteLLM callback."""

    def __init__(self, settings: Settings | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings if settings is not None else load_settings()
        self.core = Stabilizer(self.settings)
        self.affinity = SessionAffinity(self.core.store, self.core.stats, lambda: self.settings,
                                        self.settings.session_ttl_seconds, report=self.core.sinks.jsonl)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # LiteLLM's proxy looks the pre-call hook up in the class's own __dict__.
        if "async_pre_call_hook" not in vars(cls):
            cls.async_pre_call_hook = PrefixStabilizer.async_pre_call_hook

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any) -> dict:
        group = ""
        try:
            group = data.get("model") if isinstance(data.get("model"), str) else ""
            deployment = _proxy_deployment(group) or {}
            params = deployment.get("litellm_params") or {}
            model_info = deployment.get("model_info") or None
            model = params.get("model") or group
            target = target_for(model, params.get("custom_llm_provider"), model_info,
                                api_base=params.get("api_base"), call_type=call_type)
            api_key_hash = getattr(user_api_key_dict, "api_key", None)
            team_id = getattr(user_api_key_dict, "team_id", None)
        except Exception as exc:
            logger.warning("litellm-prefix: could not resolve the deployment (%s)", type(exc).__name__)
            target, model_info, model, api_key_hash, team_id = Target(model=str(data.get("model", ""))), None, "", None, None
        call_id = call_id_of(data)
        # A session id is given only where a router check reads it for this model group (LiteLLM's
        # ``session_affinity``, or our own check in ``always`` mode); elsewhere the metadata stays as
        # sent. The key comes with the transform (one read of the client's request); computed here
        # only for a call the transform cannot name (no call id) or did not take.
        affinity = self.affinity.active(group)
        key = self._session_key_for_affinity(data, call_type, api_key_hash, team_id) \
            if affinity and call_id is None else None
        result = await self.core.stabilize(
            data,
            call_type,
            target=target,
            model_names=(group, model),
            model_info=model_info,
            api_key_hash=api_key_hash if isinstance(api_key_hash, str) else None,
            team_id=team_id if isinstance(team_id, str) else None,
        )
        if affinity and call_id is not None:
            applied = self.core.applied.get(call_id)
            # Passed through (an internal error, another shape): the request is as the client sent it.
            key = applied.affinity_key if applied is not None else self._session_key_for_affinity(
                data, call_type, api_key_hash, team_id)
        self._give_session_id(data, key, call_type)
        return result

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any]:
        try:
            model = kwargs.get("model") if isinstance(kwargs.get("model"), str) else ""
            model_info = kwargs.get("model_info") if isinstance(kwargs.get("model_info"), Mapping) else None
            params = kwargs.get("litellm_params") if isinstance(kwargs.get("litellm_params"), Mapping) else {}
            target = target_for(model, kwargs.get("custom_llm_provider"), model_info,
                                api_base=kwargs.get("api_base") or params.get("api_base"), call_type=call_type)
        except Exception as exc:
            logger.warning("litellm-prefix: could not resolve the deployment (%s)", type(exc).__name__)
            model, model_info, target = "", None, Target()
        return await self.core.stabilize(
            kwargs, call_type, target=target, model_names=(_model_group(kwargs), model), model_info=model_info,
            hints=True,
        )

    # -- session affinity (affinity.py) ------------------------------------------------

    def _session_key_for_affinity(self, data: Mapping[str, Any], call_type: Any, api_key_hash: Any,
                                  team_id: Any) -> str | None:
        """The session key, computed on the client's request (None: no conversation, or it failed)."""
        try:
            return session_key(data, call_type, api_key_hash if isinstance(api_key_hash, str) else None,
                               team_id if isinstance(team_id, str) else None, settings=self.settings,
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
        try:
            return self.core.response_headers(data.get("litellm_call_id")) or None
        except Exception:
            return None

    async def async_log_success_event(self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any) -> None:
        """Measured cache use of the call (proxy and SDK, streaming included), classified and logged."""
        try:
            self.core.completed(kwargs, response_obj)
        except Exception:  # the success path never raises into LiteLLM
            pass
        try:  # the answering deployment and its cached tokens feed placement (affinity.py)
            await self.affinity.answered(kwargs, response_obj)
        except Exception as exc:
            logger.warning("litellm-prefix: placement index not updated (%s)", type(exc).__name__)
