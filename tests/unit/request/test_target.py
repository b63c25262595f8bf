"""target.py against the installed LiteLLM release: `make test` runs this module on every release
it installs (marker ``litellm``), so a release that moves what the probes look for fails here
instead of silently switching a rule's decision."""
from __future__ import annotations

import pytest

from litellm_prefix.request import target

pytestmark = pytest.mark.litellm


def test_every_supported_release_does_what_the_rules_leave_to_it():
    does = target.litellm_does()
    assert does.missing() == ()
    assert does.places_mid_system and does.strips_billing and does.cache_key_from_session and does.session_affinity


def test_the_native_messages_config_is_found_where_this_release_keeps_it():
    """Without it the billing decision on /v1/messages falls back to the public lookup, which
    ignores a deployment's pass-through opt-in (1.108 added it; 1.110 moved it and added api_base).
    (A test may read the version string; the plugin does not.)"""
    from importlib.metadata import version

    from packaging.version import Version

    found = target._found(target.NATIVE_MESSAGES_MODULES, "_native_messages_config")
    assert (found is not None) == (Version(version("litellm")) >= Version("1.108"))


def test_billing_strip_follows_the_release_s_own_provider_configs():
    strips = target.litellm_strips_billing
    assert strips("anthropic_messages", "deepseek/deepseek-chat", "deepseek", None) is True
    assert strips("anthropic_messages", "vertex_ai/claude-sonnet-4", "vertex_ai", None) is True
    assert strips("anthropic_messages", "anthropic/claude-sonnet-4-5", "anthropic", None) is False
    assert strips("anthropic_messages", "hosted_vllm/qwen", "hosted_vllm", None) is False
    # forwarded untranslated (the openai_like messages config keeps the block): ours to remove
    assert strips("anthropic_messages", "hosted_vllm/qwen", "hosted_vllm", {"supported_endpoints": ["/v1/messages"]}) is False


def test_the_hoisting_providers_are_litellm_s():
    from litellm.constants import OPENAI_SYSTEM_MESSAGES_FIRST_PROVIDERS

    assert target.SYSTEM_FIRST_PROVIDERS == OPENAI_SYSTEM_MESSAGES_FIRST_PROVIDERS


def test_a_resolved_target_is_remembered_and_bounded():
    first = target.resolve("hosted_vllm/qwen3", None, None, api_base="http://127.0.0.1:1/v1", call_type="acompletion")
    assert first.provider == "hosted_vllm" and not first.reads_cache_control and not first.strips_billing
    assert target.resolve("hosted_vllm/qwen3", None, None, api_base="http://127.0.0.1:1/v1",
                          call_type="acompletion") is first
    assert target._resolved.cache_info().maxsize == target.TARGETS


def test_pod_discovery_reads_the_session_id_only_where_the_deployment_turns_it_on(monkeypatch):
    monkeypatch.setattr(target, "litellm_does", lambda: target.LiteLLMDoes(pod_discovery=True))
    on = {"litellm_params": {"model": "hosted_vllm/q", "kubernetes_pod_discovery": True}}
    assert target.reads_session_id(on)
    assert not target.reads_session_id({"litellm_params": {"model": "hosted_vllm/q"}})
    assert not target.reads_session_id(None)
    monkeypatch.setattr(target, "litellm_does", lambda: target.LiteLLMDoes(pod_discovery=False))
    assert not target.reads_session_id(on)
