"""The LiteLLM callback: hook discovery, fail open, off means off, idempotent re-runs."""
from __future__ import annotations

import copy
import logging
import sys

import pytest
from litellm.integrations.custom_logger import CustomLogger

import litellm_prefix
from harness.realistic import TOOL_NAMES, chat_request, conversation, install_root, openai_tools, pi_system_prompt, shuffled
from litellm_prefix.hook import PrefixStabilizer
from litellm_prefix.settings import Settings

pytestmark = pytest.mark.anyio


def _noisy_request() -> dict:
    order = shuffled(TOOL_NAMES, 9)
    return chat_request(pi_system_prompt(root=install_root("b"), tool_order=order), conversation(4),
                        openai_tools(order), stream=True)


def test_pre_call_hook_is_defined_on_the_class_itself():
    # LiteLLM's proxy only calls async_pre_call_hook when it is in the class's own __dict__.
    assert "async_pre_call_hook" in vars(PrefixStabilizer)
    assert PrefixStabilizer.async_pre_call_hook is not CustomLogger.async_pre_call_hook
    assert "async_pre_call_deployment_hook" in vars(PrefixStabilizer)


def test_subclasses_keep_the_pre_call_hook_visible_to_the_proxy():
    class Custom(PrefixStabilizer):
        async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
            pass

    assert "async_pre_call_hook" in vars(Custom)
    assert "async_post_call_response_headers_hook" in vars(Custom)  # (the proxy looks it up the same way)


async def test_response_headers_follow_the_call_the_request_handed_its_metadata_to_and_observe_a_pass_through():
    """Gemini's native routes: the chat call LiteLLM makes of the request has a call id of its own,
    and the request's metadata (the same object) names it. A pass-through body (no call id, no
    proxy request): what its head and headers show, nothing rewritten."""
    stabilizer = PrefixStabilizer(Settings(path_check="absolute"))
    metadata: dict = {}
    inner = {**_noisy_request(), "litellm_call_id": "inner-1", "metadata": metadata}
    await stabilizer.async_pre_call_deployment_hook(inner, "acompletion")
    assert metadata["litellm_prefix_call_id"] == "inner-1"
    outer = {"contents": [], "litellm_call_id": "outer-1", "metadata": metadata, "proxy_server_request": {}}
    headers = await stabilizer.async_post_call_response_headers_hook(outer, None, None)
    assert headers == stabilizer.core.response_headers("inner-1") and headers["x-litellm-prefix-head"]
    raw = _noisy_request()
    sent = copy.deepcopy(raw)
    observed = await stabilizer.async_post_call_response_headers_hook(raw, None, None, {"User-Agent": "pi/1.6.0"})
    assert observed["x-litellm-prefix-agent"] == "pi" and observed["x-litellm-prefix-head"] and raw == sent
    gemini = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "systemInstruction": {"parts": [
        {"text": "You are Gemini CLI, an autonomous CLI agent specializing in software engineering tasks."}]}}
    assert (await stabilizer.async_post_call_response_headers_hook(gemini, None, None))["x-litellm-prefix-agent"] == \
        "gemini-cli"
    off = PrefixStabilizer(Settings(enabled=False))
    assert await off.async_post_call_response_headers_hook(copy.deepcopy(raw), None, None) is None


def test_proxy_handler_is_an_instance_built_from_settings(monkeypatch):
    monkeypatch.setenv("LITELLM_PREFIX_PATH_CHECK", "absolute")
    monkeypatch.delitem(vars(litellm_prefix), "proxy_handler", raising=False)
    handler = litellm_prefix.proxy_handler
    assert isinstance(handler, PrefixStabilizer) and handler.settings.path_check == "absolute"


async def test_disabled_is_byte_identical_pass_through():
    data = _noisy_request()
    snapshot = copy.deepcopy(data)
    handler = PrefixStabilizer(Settings(enabled=False, path_check="absolute"))
    out = await handler.async_pre_call_hook(None, None, data, "acompletion")
    out = await handler.async_pre_call_deployment_hook(out, "acompletion")
    assert out == snapshot and out["messages"] is data["messages"] and out["tools"] is data["tools"]


async def test_switched_off_for_one_model_passes_that_model_through(tmp_path):
    # ``enabled: false`` per model (``models`` glob, or the deployment's model_info): that
    # model's requests pass through byte-identical, journal-free; other models are rewritten.
    log = tmp_path / "events.jsonl"
    handler = PrefixStabilizer(Settings(path_check="absolute", log=str(log),
                                        models={"plain-*": {"enabled": False}}))
    for model, model_info in (("plain-chat", None), ("chat", {"litellm_prefix": {"enabled": False}})):
        data = _noisy_request()
        data["model"] = model
        data["litellm_call_id"] = f"call-{model}"
        snapshot = copy.deepcopy(data)
        if model_info:
            data["model_info"] = model_info
            snapshot["model_info"] = model_info
        # (the pre-call hook reads model_info from the proxy's router, absent here: the deployment hook's)
        out = data if model_info else await handler.async_pre_call_hook(None, None, data, "acompletion")
        out = await handler.async_pre_call_deployment_hook(out, "acompletion")
        assert out == snapshot and out["messages"] is data["messages"] and out["tools"] is data["tools"]
    assert handler.core.stats["disabled_for_model"] == 3  # plain-chat: both hooks; chat: the deployment hook
    assert handler.core.stats["requests"] == 0 and not len(handler.core.local_store)
    assert not log.exists() or not log.read_text().strip()  # nothing reported for them either
    data = _noisy_request()
    data["model"] = "chat"
    out = await handler.async_pre_call_deployment_hook(data, "acompletion")
    assert [t["function"]["name"] for t in out["tools"]] == shuffled(TOOL_NAMES, 9)  # the agent's own order (toolOrder auto)
    assert handler.core.stats["rewritten"] == 1


async def test_internal_error_passes_the_request_through_and_is_counted(monkeypatch, caplog):
    handler = PrefixStabilizer(Settings(path_check="absolute"))
    data = _noisy_request()
    snapshot = copy.deepcopy(data)

    def boom(view, journal, ctx):
        raise RuntimeError(f"rule bug near {view.head[0][:40]}")

    monkeypatch.setattr("litellm_prefix.request.pipeline.RULES", [boom])
    with caplog.at_level(logging.ERROR, logger="litellm_prefix"):
        out = await handler.async_pre_call_deployment_hook(data, "acompletion")
    assert out == snapshot
    assert handler.core.stats["errors"] == 1
    assert "passed through unchanged" in caplog.text and "RuntimeError" in caplog.text and "boom" in caplog.text
    assert "You are pi" not in caplog.text  # no prompt text, even in the traceback record


async def test_pre_hook_then_deployment_hook_then_retry_is_idempotent():
    handler = PrefixStabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home"))
    data = _noisy_request()
    first = await handler.async_pre_call_hook(None, None, data, "acompletion")
    frozen = copy.deepcopy({k: first[k] for k in ("messages", "tools")})
    again = await handler.async_pre_call_deployment_hook(dict(first), "acompletion")
    retry = await handler.async_pre_call_deployment_hook(dict(again), "acompletion")
    assert {k: retry[k] for k in ("messages", "tools")} == frozen
    assert handler.core.stats["drift"] == 0
    assert [t["function"]["name"] for t in first["tools"]] == shuffled(TOOL_NAMES, 9)  # the agent's own order (toolOrder auto)
    assert "/srv/pi-home/docs" in first["messages"][0]["content"]


async def test_deployment_model_info_overrides_apply():
    handler = PrefixStabilizer(Settings(path_check="absolute"))
    data = _noisy_request()
    data["model"] = "hosted_vllm/qwen"
    data["messages"].append({"role": "system", "content": "late"})
    data["model_info"] = {"litellm_prefix": {"toolOrder": "keep"}, "supports_mid_conversation_system": False}
    out = await handler.async_pre_call_deployment_hook(data, "acompletion")
    assert [t["function"]["name"] for t in out["tools"]] == shuffled(TOOL_NAMES, 9)  # keep
    assert out["messages"][-1]["role"] == "user"  # converted: model_info says no support


async def test_gemini_target_converts_late_system_messages_via_provider():
    handler = PrefixStabilizer(Settings(path_check="absolute"))
    data = chat_request("sys", conversation(2))
    data["model"] = "gemini/gemini-2.5-pro"
    data["messages"].append({"role": "system", "content": "late"})
    out = await handler.async_pre_call_deployment_hook(data, "acompletion")
    assert out["messages"][-1]["role"] == "user"
    data2 = chat_request("sys", conversation(2))
    data2["model"] = "anthropic/claude-sonnet-4-5"
    data2["messages"].append({"role": "system", "content": "late"})
    out2 = await handler.async_pre_call_deployment_hook(data2, "acompletion")
    assert out2["messages"][-1]["role"] == "system"


async def test_system_messages_first_switch_is_read_at_request_time(monkeypatch):
    import litellm

    handler = PrefixStabilizer(Settings(path_check="absolute"))
    data = chat_request("sys", conversation(1))
    data["model"] = "openai/gpt-4o"
    data["messages"].append({"role": "system", "content": "late"})
    monkeypatch.setattr(litellm, "openai_system_messages_first", True, raising=False)
    out = await handler.async_pre_call_deployment_hook(data, "acompletion")
    assert out["messages"][-1]["role"] == "user"


async def test_non_chat_call_types_are_untouched():
    handler = PrefixStabilizer(Settings(path_check="absolute"))
    data = {"model": "text-embedding-3-small", "input": ["/a/b/node_modules/@earendil-works/pi-coding-agent"]}
    snapshot = copy.deepcopy(data)
    assert await handler.async_pre_call_deployment_hook(data, "aembedding") == snapshot


async def test_a_failing_deployment_lookup_still_stabilizes(monkeypatch, caplog):
    import litellm_prefix.request.target as target

    def broken(group):
        raise RuntimeError("router exploded")

    monkeypatch.setattr(target, "proxy_deployment", broken)
    handler = PrefixStabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home"))
    out = await handler.async_pre_call_hook(None, None, _noisy_request(), "acompletion")
    assert "/srv/pi-home/docs" in out["messages"][0]["content"]
    assert "could not resolve the deployment" in caplog.text


async def _pre_then_deployment(handler, data, between=None, model_info=None):
    data = {**data, "model": "openai/gpt-4o", "litellm_call_id": "call-1"}
    first = await handler.async_pre_call_hook(None, None, data, "acompletion")
    kwargs = dict(first, tools=list(first["tools"]))  # LiteLLM hands the deployment hook a copy of the tools list
    if between is not None:
        between(kwargs)
    if model_info is not None:
        kwargs["model_info"] = model_info
    return first, await handler.async_pre_call_deployment_hook(kwargs, "acompletion")


async def test_deployment_hook_on_the_objects_the_pre_call_hook_wrote_redoes_nothing(monkeypatch):
    settings = Settings(path_check="trusted", stable_path="/srv/pi-home")
    fast = PrefixStabilizer(settings)
    first, out = await _pre_then_deployment(fast, _noisy_request())
    assert fast.core.stats["unchanged_since_applied"] == 1
    assert out["messages"] is first["messages"] and out["tools"] == first["tools"]
    assert "call-1" not in fast.core.written  # the request's objects are not kept once read
    # The same bytes and the same provider hint as running the stateless rules again.
    monkeypatch.setattr("litellm_prefix.request.core.Applied.holds", lambda *a: False)
    slow = PrefixStabilizer(settings)
    _, again = await _pre_then_deployment(slow, _noisy_request())
    assert slow.core.stats["unchanged_since_applied"] == 0
    assert out["messages"] == again["messages"] and out["tools"] == again["tools"]
    assert out["prompt_cache_key"] == again["prompt_cache_key"]


async def test_a_request_changed_after_the_pre_call_hook_is_stabilized_again():
    handler = PrefixStabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home"))
    order = shuffled(TOOL_NAMES, 3)
    other = pi_system_prompt(root=install_root("c"), tool_order=order)

    def another_callback(kwargs):  # e.g. a prompt-management callback swapping the system message
        kwargs["messages"] = [{"role": "system", "content": other}, *kwargs["messages"][1:]]

    _, out = await _pre_then_deployment(handler, _noisy_request(), between=another_callback)
    assert handler.core.stats["unchanged_since_applied"] == 0
    assert install_root("c") not in out["messages"][0]["content"]
    assert "/srv/pi-home/docs" in out["messages"][0]["content"]


async def test_a_deployment_with_other_settings_runs_the_rules_again():
    handler = PrefixStabilizer(Settings(path_check="absolute"))
    _, out = await _pre_then_deployment(handler, _noisy_request(),
                                        model_info={"litellm_prefix": {"pathCheck": "exists"}})
    assert handler.core.stats["unchanged_since_applied"] == 0


def _agent_calls() -> list[tuple[str, dict]]:
    import random

    from harness.agent_requests import (
        claude_code_body,
        claude_code_env,
        claude_code_git_status,
        claude_code_headers,
        claude_code_prompt,
        claude_code_tools,
        codex_headers,
        opencode_headers,
    )

    pi = chat_request(pi_system_prompt(root=install_root("a"), tool_order=TOOL_NAMES), conversation(3),
                      openai_tools(TOOL_NAMES), metadata={"headers": {"x-session-id": "pi-7"}})
    no_id = chat_request("You are a helpful agent. 2026-12-03 10:00", conversation(2), metadata={})
    only_system = chat_request("You are a helpful agent.", [], metadata={})
    codex = {"model": "chat-model", "instructions": "You are Codex.", "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}],
        "metadata": {"headers": codex_headers()}}
    claude = claude_code_body(1, [{"role": "user", "content": "hello"}], prompt=claude_code_prompt(random.Random(1)),
                              env=claude_code_env(), git=claude_code_git_status(), tools=claude_code_tools())
    claude["litellm_metadata"] = {"headers": claude_code_headers()}
    opencode = chat_request("You are opencode.", conversation(1), metadata={"headers": opencode_headers()})
    return [("acompletion", pi), ("acompletion", no_id), ("acompletion", only_system), ("aresponses", codex),
            ("anthropic_messages", claude), ("acompletion", opencode)]


@pytest.mark.parametrize("index", range(6))
async def test_the_session_id_given_for_affinity_is_the_session_key_of_the_clients_request(index):
    from litellm_prefix.fleet.affinity import client_session_id, session_key

    call_type, data = _agent_calls()[index]
    handler = PrefixStabilizer(Settings(path_check="absolute", session_affinity="always"))
    expected = session_key(copy.deepcopy(data), call_type, None, None, settings=handler.settings,
                           model_names=(data["model"],))
    out = await handler.async_pre_call_hook(None, None, {**data, "litellm_call_id": f"c-{index}"}, call_type)
    given = client_session_id(out) if expected is not None else None
    assert given == expected
    if expected is None:  # nothing to tell the session by: no id given
        assert not (out.get("metadata") or {}).get("session_id")


async def test_no_session_id_is_given_where_no_router_check_reads_it():
    """``sessionAffinity: router`` (the default) without LiteLLM's ``session_affinity`` for the
    group: the request's metadata stays as the client sent it."""
    call_type, data = _agent_calls()[1]  # no id of its own
    handler = PrefixStabilizer(Settings(path_check="absolute"))
    out = await handler.async_pre_call_hook(None, None, {**data, "metadata": {}, "litellm_call_id": "c-x"}, call_type)
    assert out["metadata"] == {} and handler.core.stats["affinity_session_ids"] == 0


async def test_a_session_id_is_given_where_litellm_picks_a_pod_by_it(monkeypatch):
    """LiteLLM 1.110's Kubernetes pod discovery reads the session id on a deployment that turns it
    on: the pre-call hook gives the session key there too (and only there), as for its router."""
    from litellm_prefix.fleet.affinity import client_session_id, session_key
    from litellm_prefix.request import target

    monkeypatch.setattr(target, "litellm_does", lambda: target.LiteLLMDoes(pod_discovery=True))
    call_type, data = _agent_calls()[1]
    for discovery, given in ((True, True), (False, False)):
        deployment = {"litellm_params": {"model": "hosted_vllm/qwen3", "kubernetes_pod_discovery": discovery}}
        monkeypatch.setattr(target, "proxy_deployment", lambda group, deployment=deployment: deployment)
        handler = PrefixStabilizer(Settings(path_check="absolute"))
        expected = session_key(copy.deepcopy(data), call_type, None, None, settings=handler.settings,
                               model_names=(data["model"],))
        out = await handler.async_pre_call_hook(
            None, None, {**data, "metadata": {}, "litellm_call_id": f"c-pod-{discovery}"}, call_type)
        assert expected is not None
        assert client_session_id(out) == (expected if given else None)
        assert handler.core.stats["affinity_session_ids"] == int(given)


def test_target_follows_the_values_it_reads_although_remembered(monkeypatch):
    """``target.resolve`` is remembered per model, provider, route and the model_info values it
    reads: a changed value (the switch, the declaration, the endpoints) gives its own target."""
    import litellm

    from litellm_prefix.request.target import resolve as target_for

    monkeypatch.setattr(litellm, "openai_system_messages_first", False, raising=False)
    plain = target_for("openai/gpt-4o", None, None, api_base="http://a/v1", call_type="acompletion")
    assert plain.provider == "openai" and plain.api_base == "http://a/v1" and not plain.system_messages_first
    assert target_for("openai/gpt-4o", None, None, api_base="http://a/v1", call_type="acompletion") is plain
    monkeypatch.setattr(litellm, "openai_system_messages_first", True, raising=False)
    assert target_for("openai/gpt-4o", None, None, api_base="http://a/v1", call_type="acompletion").system_messages_first
    declared = target_for("openai/gpt-4o", None, {"supports_mid_conversation_system": False}, call_type="acompletion")
    assert declared.model_info_mid_system is False
    ours = target_for("openai/gpt-4o", None, {"litellm_prefix": {"supportsMidConversationSystem": True}},
                      call_type="acompletion")
    assert ours.model_info_mid_system is True
    assert target_for("openai/gpt-4o", None, None, api_base="http://b/v1", call_type="acompletion").api_base == "http://b/v1"


def test_context_but_is_dataclasses_replace():
    """The shell's fast ``Context.but`` gives what ``dataclasses.replace`` gives, shares the
    request's memo, and leaves the original as it was."""
    import dataclasses

    from litellm_prefix.request.context import Context
    from litellm_prefix.request.target import Target
    from litellm_prefix.settings import Settings

    ctx = Context(settings=Settings(), target=Target(model="m"), client_body=({"role": "user"},), ping=True)
    for changes in ({"now": 5.0}, {"texts": {"h": "t"}, "texts_fetched": True}, {"session_key": "k"}):
        fast, slow = ctx.but(**changes), dataclasses.replace(ctx, **changes)
        assert fast == slow and fast.memo is ctx.memo and type(fast) is Context
        assert all(getattr(fast, f.name) == getattr(slow, f.name) for f in dataclasses.fields(Context))
    assert ctx.now is None and ctx.texts == {} and ctx.session_key == ""
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.but(now=1.0).now = 2.0


def test_the_proxy_deployment_of_a_group_is_asked_again_when_the_router_changes(monkeypatch):
    """The pre-call hook asks the proxy's router for the group's first deployment; the answer is
    remembered briefly, and asked again for another router, another model list, one grown or
    shrunk in place, or once a second has passed."""
    import time
    import types

    from litellm_prefix.request import target as hook

    class Router:
        def __init__(self, model_list):
            self.model_list = model_list
            self.asked = 0

        def get_model_list(self, model_name=None):
            self.asked += 1
            return [d for d in self.model_list if d["model_name"] == model_name]

    clock = [50.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(hook, "DEPLOYMENTS", hook.Recent(hook.DEPLOYMENT_SECONDS, 1024))
    a = {"model_name": "g", "litellm_params": {"model": "openai/a"}}
    router = Router([a])
    monkeypatch.setitem(sys.modules, "litellm.proxy.proxy_server", types.SimpleNamespace(llm_router=router))
    assert hook.proxy_deployment("g") is a and hook.proxy_deployment("g") is a and router.asked == 1
    b = {"model_name": "g", "litellm_params": {"model": "openai/b"}}
    router.model_list.insert(0, b)  # grown in place
    assert hook.proxy_deployment("g") is b and router.asked == 2
    router.model_list[0] = a  # edited in place: seen once the answer is a second old
    assert hook.proxy_deployment("g") is b
    clock[0] += hook.DEPLOYMENT_SECONDS
    assert hook.proxy_deployment("g") is a
    router.model_list = [b]  # another list
    assert hook.proxy_deployment("g") is b
    other = Router([a])
    monkeypatch.setitem(sys.modules, "litellm.proxy.proxy_server", types.SimpleNamespace(llm_router=other))
    assert hook.proxy_deployment("g") is a and other.asked == 1
    assert hook.proxy_deployment("unknown") is None and hook.proxy_deployment("") is None
