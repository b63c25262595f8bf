"""Where a request goes, resolved once: the deployment's capabilities as the rules need them.

The rules never ask LiteLLM anything; they read a frozen ``Target`` (below). This
module builds it from what the hooks see (the deployment's model, provider, ``api_base`` and
``model_info``, the route) by asking the installed LiteLLM, and holds the answers that more
than one place needs:

- the provider (``litellm.get_llm_provider``);
- whether LiteLLM moves every system message to the front for this target
  (``hoists_system_messages``: the one predicate the rules, the measurement and the offline
  renderer use);
- the mid-conversation system capability declared in ``model_info`` or LiteLLM's cost map;
- whether LiteLLM drops Claude Code's billing block itself on this route
  (``should_strip_billing_metadata()`` of the provider config it will use);
- whether LiteLLM forwards ``prompt_cache_key`` there, and whether the target reads Anthropic
  ``cache_control`` breakpoints;
- what this LiteLLM release does on its own where a rule or hint of ours overlaps it
  (``litellm_does``): probed once per process from the functions the release ships, never
  from its version string.

Caches, each bounded: ``resolve`` remembers 1,024 targets, keyed by every value it reads (a
changed declaration, switch or endpoint list is another key, so nothing needs invalidating:
LiteLLM's answers are fixed for the installed release and its local cost map);
``proxy_deployment`` remembers a proxy model group's first deployment for at most
``DEPLOYMENT_SECONDS`` and while the router's model list is the same (1,024 groups).
"""
from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..caches import Recent


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


TARGETS = 1024  # resolved targets remembered (model x provider x route x declared values)

HOISTING_PROVIDERS = frozenset({"gemini", "vertex_ai", "vertex_ai_beta"})
# LiteLLM's OPENAI_SYSTEM_MESSAGES_FIRST_PROVIDERS (litellm/constants.py; a test checks they agree):
# the providers whose late system messages litellm.openai_system_messages_first moves to the front.
SYSTEM_FIRST_PROVIDERS = frozenset({"openai", "azure"})


def hoists_system_messages(provider: str, system_messages_first: bool) -> bool:
    """Whether LiteLLM moves every system message of a request for this target to the front:
    Gemini/Vertex always (``system_instruction``), OpenAI and Azure with
    ``litellm.openai_system_messages_first``. The one answer for the rules, the measurement and
    the offline renderer."""
    return provider in HOISTING_PROVIDERS or (system_messages_first and provider in SYSTEM_FIRST_PROVIDERS)


# -- what this LiteLLM release does itself -----------------------------------------------


@dataclass(frozen=True)
class LiteLLMDoes:
    """What the installed LiteLLM does on its own where a rule or hint of ours overlaps it.

    - ``places_mid_system``: it places mid-conversation system messages per model
      (``prompt_templates.mid_conversation_system``): kept in place where the model supports
      them, a user turn in place elsewhere. Our rule then converts only where LiteLLM would
      hoist (``hoists_system_messages``) or a deployment declares ``false``.
    - ``strips_billing``: provider configs answer ``should_strip_billing_metadata()``; the
      billing rule leaves the block to LiteLLM where it drops it (``Target.strips_billing``).
    - ``cache_key_from_session``: its ``/v1/messages`` bridges fill ``prompt_cache_key`` from
      Claude Code's ``metadata.user_id`` session id; our hint sets the key only on chat and
      Responses requests, which those bridges never see.
    - ``session_affinity``: its router keeps a session on one deployment by a session id
      (``session_affinity`` pre-call check); the plugin gives the id instead of routing twice.
    - ``pod_discovery`` (1.110+): a deployment with ``kubernetes_pod_discovery: true`` picks one
      of a headless service's pods by a hash of the same session id; the plugin gives that id
      for such a deployment too (``reads_session_id``), so a session stays on one pod.
    """

    places_mid_system: bool = False
    strips_billing: bool = False
    cache_key_from_session: bool = False
    session_affinity: bool = False
    pod_discovery: bool = False

    def missing(self) -> tuple[str, ...]:
        """What a supported release does and this one does not (README, "LiteLLM versions")."""
        return tuple(name for name in ("places_mid_system", "strips_billing", "cache_key_from_session",
                                       "session_affinity") if not getattr(self, name))


def _found(modules: tuple[str, ...], name: str) -> Any:
    """``name`` from the first of ``modules`` that has it (releases move their modules), else None."""
    for module in modules:
        try:
            found = getattr(__import__(module, fromlist=[name]), name, None)
        except Exception:
            continue
        if found is not None:
            return found
    return None


# Where each release keeps what the probes look for (newest first: 1.110 moved the
# /v1/messages bridges from ``anthropic.pass_through`` to ``anthropic.messages``).
MID_SYSTEM_MODULES = ("litellm.litellm_core_utils.prompt_templates.mid_conversation_system",)
MESSAGES_UTILS_MODULES = ("litellm.llms.anthropic.messages.utils", "litellm.llms.anthropic.pass_through.utils")
AFFINITY_MODULES = ("litellm.router_utils.pre_call_checks.deployment_affinity_check",)
POD_DISCOVERY_MODULES = ("litellm.router_utils.kubernetes_pod_discovery",)


@lru_cache(maxsize=1)
def litellm_does() -> LiteLLMDoes:
    """Probed once per process (the installed release does not change under it)."""
    strips = False
    try:
        from litellm.llms.anthropic.chat.transformation import AnthropicConfig

        strips = callable(getattr(AnthropicConfig, "should_strip_billing_metadata", None))
    except Exception:
        pass
    return LiteLLMDoes(
        places_mid_system=_found(MID_SYSTEM_MODULES, "place_mid_conversation_system") is not None,
        strips_billing=strips,
        cache_key_from_session=_found(MESSAGES_UTILS_MODULES, "prompt_cache_key_from_user_id") is not None,
        session_affinity=_found(AFFINITY_MODULES, "DeploymentAffinityCheck") is not None,
        pod_discovery=_found(POD_DISCOVERY_MODULES, "KubernetesPodDiscovery") is not None,
    )


def reads_session_id(deployment: Mapping[str, Any] | None) -> bool:
    """LiteLLM picks this deployment's pod by the request's session id (``kubernetes_pod_discovery``)."""
    params = deployment.get("litellm_params") if isinstance(deployment, Mapping) else None
    return isinstance(params, Mapping) and params.get("kubernetes_pod_discovery") is True \
        and litellm_does().pod_discovery


# -- one deployment -----------------------------------------------------------------------


def provider_of(model: str) -> str:
    try:
        import litellm

        return litellm.get_llm_provider(model=model)[1] or ""
    except Exception:
        return model.split("/", 1)[0] if "/" in model else ""


def declared_mid_system(model_info: Mapping[str, Any] | None) -> bool | None:
    """``model_info.supports_mid_conversation_system``, else ours
    (``litellm_prefix.supportsMidConversationSystem``); None when neither is declared."""
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


def passes_through(model_info: Mapping[str, Any] | None) -> bool:
    """The deployment opts in to LiteLLM's native ``/v1/messages`` pass-through."""
    endpoints = model_info.get("supported_endpoints") if isinstance(model_info, Mapping) else None
    return isinstance(endpoints, (list, tuple)) and "/v1/messages" in endpoints


def wants_prompt_cache_key(model_info: Mapping[str, Any] | None) -> bool:
    """The deployment asks for ``prompt_cache_key`` (``model_info.litellm_prefix.promptCacheKey: true``)."""
    ours = model_info.get("litellm_prefix") if isinstance(model_info, Mapping) else None
    return isinstance(ours, Mapping) and any(ours.get(k) is True for k in ("promptCacheKey", "prompt_cache_key"))


def route_name(call_type: Any) -> str:
    return str(getattr(call_type, "value", call_type) or "")


def receives_gemini_shape(model: str, provider: str) -> bool:
    """Whether LiteLLM forwards Gemini's native routes (``generateContent``) to this deployment in
    Gemini's own shape (``contents``): it does where it has a generate-content config for the provider
    (``ProviderConfigManager.get_provider_google_genai_generate_content_config``: ``gemini``, and
    ``vertex_ai`` where the model takes Vertex's Gemini API); any other deployment gets a chat
    completion LiteLLM makes of the request (``google_genai/adapters/handler.py``)."""
    if provider == "gemini":
        return True
    if provider != "vertex_ai":
        return False
    bare = model.split("/", 1)[1] if model.startswith("vertex_ai/") else model
    try:
        from litellm.llms.vertex_ai.common_utils import uses_vertex_gemini_api

        return bool(uses_vertex_gemini_api(bare, None))
    except Exception:  # (another release's signature) Vertex's Gemini models
        return "gemini" in bare.lower()


def _messages_config(bare: str, provider: str, model_info: Mapping[str, Any] | None, api_base: str) -> Any:
    """The native ``/v1/messages`` config LiteLLM uses for this deployment (None: translated to chat).

    1.110+: ``anthropic.messages.native.handler`` (also asks whether the config serves the
    deployment's ``api_base``); 1.108: ``anthropic.pass_through.messages.handler``; older:
    the public lookup, without the pass-through opt-in."""
    import inspect

    import litellm
    from litellm.utils import ProviderConfigManager

    lookup = _found(NATIVE_MESSAGES_MODULES, "_native_messages_config")
    if lookup is not None:
        if "api_base" in inspect.signature(lookup).parameters:
            return lookup(bare, provider, model_info, api_base or None)
        return lookup(bare, provider, model_info)
    return ProviderConfigManager.get_provider_anthropic_messages_config(model=bare, provider=litellm.LlmProviders(provider))


NATIVE_MESSAGES_MODULES = ("litellm.llms.anthropic.messages.native.handler",
                           "litellm.llms.anthropic.pass_through.messages.handler")


def litellm_strips_billing(call_type: Any, model: str, provider: str, model_info: Mapping[str, Any] | None,
                           api_base: str = "") -> bool:
    """Whether LiteLLM itself drops Claude Code's billing block for this route and deployment.

    Asks the same provider config LiteLLM will use: on ``/v1/messages`` the native messages
    config when the deployment has one (else the request is translated to chat completions),
    on chat completions the provider's chat config; its ``should_strip_billing_metadata()``.
    """
    model_info = {"supported_endpoints": ["/v1/messages"]} if passes_through(model_info) else None
    try:
        import litellm
        from litellm.utils import ProviderConfigManager

        bare = model.split("/", 1)[1] if provider and model.startswith(provider + "/") else model
        if route_name(call_type) == "anthropic_messages":
            config = _messages_config(bare, provider, model_info, api_base)
            if config is not None:
                return bool(config.should_strip_billing_metadata())
        config = ProviderConfigManager.get_provider_chat_config(model=bare, provider=litellm.LlmProviders(provider))
        strip = getattr(config, "should_strip_billing_metadata", None)
        return bool(strip()) if callable(strip) else False
    except Exception:
        return False


def accepts_prompt_cache_key(model: str, provider: str, route: str) -> bool:
    """LiteLLM forwards ``prompt_cache_key`` for this provider and route (never where it would drop or reject it)."""
    try:
        import litellm

        if route in ("aresponses", "responses"):
            from litellm.utils import ProviderConfigManager

            config = ProviderConfigManager.get_provider_responses_api_config(
                provider=litellm.LlmProviders(provider), model=model)
            if config is not None:
                return "prompt_cache_key" in (config.get_supported_openai_params(model) or ())
        elif route not in ("acompletion", "completion"):
            return False
        return "prompt_cache_key" in (litellm.get_supported_openai_params(model=model, custom_llm_provider=provider) or ())
    except Exception:
        return False


def reads_cache_control(model: str, provider: str) -> bool:
    """Anthropic-family target (Anthropic, Bedrock, Vertex, Azure AI Claude with prompt caching)."""
    try:
        from litellm.llms.anthropic.common_utils import supports_anthropic_cache_control

        return bool(supports_anthropic_cache_control(model, provider or None))
    except Exception:
        return False


BREAKPOINT_MODULES = ("litellm.integrations.anthropic_cache_control_hook",)


def reads_prompt_cache_breakpoint(model: str, provider: str, api_base: str, prompt_cache_options: bool) -> bool:
    """The target reads OpenAI's ``prompt_cache_breakpoint`` marks, as LiteLLM itself decides
    (``AnthropicCacheControlHook.targets_openai_prompt_cache_breakpoint``: GPT-5.6 and later on
    OpenAI's API, a deployment that sets ``prompt_cache_options``, or one the cost map flags).
    Asking LiteLLM keeps the two in step: its chat and Responses transforms rename or strip the
    marks by the same answer. A release without that function (1.106) reads none."""
    hook = _found(BREAKPOINT_MODULES, "AnthropicCacheControlHook")
    decide = getattr(hook, "targets_openai_prompt_cache_breakpoint", None)
    if decide is None or not model:
        return False
    try:
        return bool(decide(model, provider or None, api_base or None, {} if prompt_cache_options else None))
    except Exception:
        return False


def cache_min_tokens(model: str, provider: str) -> int:
    """The cost map's ``prompt_cache_min_tokens`` for the model (0: unknown)."""
    value = cost_map_value(model, provider, "prompt_cache_min_tokens", int)
    return value if isinstance(value, int) and value > 0 else 0


def resolve(model: str, provider: str | None, model_info: Mapping[str, Any] | None, *,
            api_base: Any = None, call_type: Any = None, prompt_cache_options: Any = None) -> Target:
    """The target of a request: the deployment's model, provider, ``api_base`` and ``model_info``
    and the route, as the hooks read them (``prompt_cache_options``: the deployment's or the
    request's, which LiteLLM reads as OpenAI's breakpoint dialect). Every value read is part of
    the cache key."""
    import litellm

    return _resolved(model, provider or "", declared_mid_system(model_info), passes_through(model_info),
                     api_base if isinstance(api_base, str) else "", route_name(call_type),
                     bool(getattr(litellm, "openai_system_messages_first", False)), wants_prompt_cache_key(model_info),
                     prompt_cache_options is not None)


@lru_cache(maxsize=TARGETS)
def _resolved(model: str, provider: str, declared: bool | None, native_messages: bool, api_base: str,
              route: str, system_messages_first: bool, wants_key: bool, cache_options: bool = False) -> Target:
    """(Each request asks twice: the lookups in LiteLLM's maps cost more than the rules of a short
    request; a Target is frozen.)"""
    provider = provider or provider_of(model)
    model_info = {"supported_endpoints": ["/v1/messages"]} if native_messages else None
    return Target(
        model=model,
        provider=provider,
        model_info_mid_system=declared,
        cost_map_mid_system=cost_map_value(model, provider, "supports_mid_conversation_system", bool),
        system_messages_first=system_messages_first,
        api_base=api_base,
        strips_billing=litellm_strips_billing(route, model, provider, model_info, api_base) if provider else False,
        accepts_prompt_cache_key=accepts_prompt_cache_key(model, provider, route),
        reads_cache_control=reads_cache_control(model, provider),
        wants_prompt_cache_key=wants_key,
        reads_prompt_cache_breakpoint=reads_prompt_cache_breakpoint(model, provider, api_base, cache_options),
        cache_min_tokens=cache_min_tokens(model, provider),
        receives_gemini_shape=receives_gemini_shape(model, provider),
    )


# -- the proxy's deployments ----------------------------------------------------------------

DEPLOYMENT_SECONDS = 1.0
DEPLOYMENTS = Recent(DEPLOYMENT_SECONDS, 1024)


def proxy_deployment(group: str) -> Mapping[str, Any] | None:
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
        return DEPLOYMENTS.get(group, lambda: next(iter(router.get_model_list(model_name=group) or []), None), stamp)
    except Exception:
        return None


def model_group(data: Mapping[str, Any]) -> str:
    """The proxy model group LiteLLM recorded in the call's metadata ("" outside the proxy)."""
    for key in ("metadata", "litellm_metadata"):
        meta = data.get(key)
        if isinstance(meta, Mapping) and isinstance(meta.get("model_group"), str):
            return meta["model_group"]
    return ""
