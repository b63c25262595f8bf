"""Drift detection through the real hook: once per change, never for repeats, pings or later system messages."""
from __future__ import annotations

import copy
import itertools
import json
import logging

import pytest

from harness.realistic import (
    TOOL_NAMES,
    conversation,
    install_root,
    openai_tools,
    pi_sections,
    pi_system_prompt,
    render_pi,
    shuffled,
)
from litellm_prefix.hook import PrefixStabilizer
from litellm_prefix.measure.sinks import flush_logs
from litellm_prefix.request.drift import first_difference, head_record
from litellm_prefix.request.sections import parse_head
from litellm_prefix.request.wire import chat
from litellm_prefix.settings import Settings

pytestmark = pytest.mark.anyio


def _handler(tmp_path=None, **kwargs) -> PrefixStabilizer:
    kwargs.setdefault("path_check", "trusted")
    kwargs.setdefault("stable_path", "/srv/pi-home")
    if tmp_path is not None:
        kwargs.setdefault("log", str(tmp_path / "prefix.jsonl"))
    return PrefixStabilizer(Settings(**kwargs))


def _log_text(tmp_path) -> str:
    flush_logs()  # the log is written off the request path
    return (tmp_path / "prefix.jsonl").read_text()


_CALL_IDS = itertools.count()


def _request(system: str, *, tools=None, turns=2, session="sess-0001", **extra) -> dict:
    data = {"model": "openai/local", "messages": [{"role": "system", "content": system}, *conversation(turns)],
            "metadata": {"session_id": session, "user_api_key_hash": "hash-a"},
            "litellm_call_id": extra.pop("call_id", None) or f"call-{next(_CALL_IDS)}"}
    if tools is not None:
        data["tools"] = copy.deepcopy(tools)
    data.update(extra)
    return data


async def _send(handler, data):
    return await handler.async_pre_call_deployment_hook(data, "acompletion")


def _drifts(handler):
    return handler.core.stats["drift"]


async def test_prompts_a_b_b_warn_exactly_once(tmp_path, caplog):
    h = _handler(tmp_path)
    a = pi_system_prompt()
    sections_b = pi_sections()
    sections_b["rules"] += "\n- Never push to main."
    b = render_pi(sections_b)
    with caplog.at_level(logging.WARNING, logger="litellm_prefix"):
        for system in (a, b, b):
            await _send(h, _request(system))
    assert _drifts(h) == 1
    records = [json.loads(line) for line in _log_text(tmp_path).splitlines()]
    drift = [r for r in records if r["event"] == "drift"]
    assert len(drift) == 1
    event = drift[0]
    assert event["changed"] == ["section:rules"]
    assert event["first_diff_in"] == "section:rules"
    offset = first_difference(a, b)
    assert event["first_diff_char"] == offset and event["first_diff_token_est"] == offset // 4
    assert event["reprefill_tokens_est"] > 0
    assert event["before"] != event["after"]
    # never prompt text in logs or the JSONL
    assert "Never push to main" not in caplog.text and "Never push" not in _log_text(tmp_path)
    assert "section:rules" in caplog.text


async def test_shuffled_tools_and_moved_install_path_do_not_warn_and_give_identical_payloads(tmp_path):
    h = _handler(tmp_path)
    outputs = []
    for i, root in enumerate(("a", "b", "c")):
        order = shuffled(TOOL_NAMES, i)
        data = _request(pi_system_prompt(root=install_root(root), tool_order=order), tools=openai_tools(order))
        out = await _send(h, data)
        outputs.append(json.dumps({"m": out["messages"], "t": out["tools"]}, sort_keys=True))
    assert outputs[0] == outputs[1] == outputs[2]
    assert _drifts(h) == 0


async def test_a_later_system_message_does_not_warn():
    h = _handler()
    system = pi_system_prompt()
    await _send(h, _request(system))
    data = _request(system, turns=3)
    data["messages"].append({"role": "system", "content": "Reminder: run the tests."})
    await _send(h, data)
    assert _drifts(h) == 0


async def test_a_changed_leading_system_message_warns_and_reaches_the_model():
    h = _handler()
    await _send(h, _request(pi_system_prompt()))
    changed = pi_system_prompt().replace("You are pi", "You are Pi")
    out = await _send(h, _request(changed))
    assert _drifts(h) == 1
    assert out["messages"][0]["content"].startswith("You are Pi")  # genuine change reaches the model


async def test_tool_addition_warns_and_names_the_tool(tmp_path):
    h = _handler(tmp_path)
    await _send(h, _request("sys", tools=openai_tools(TOOL_NAMES[:10]), call_id="t1"))
    await _send(h, _request("sys", tools=openai_tools(TOOL_NAMES[:11]), call_id="t2"))
    event = [json.loads(x) for x in _log_text(tmp_path).splitlines() if '"drift"' in x][0]
    assert event["changed"] == ["tools"] and event["tools"] == {"added": [TOOL_NAMES[10]], "removed": []}


_DRIFT_FIELDS = {"event", "changed", "first_diff_char", "first_diff_token_est", "first_diff_in", "exact",
                 "reprefill_tokens_est", "reprefill_cost_usd_est", "before", "after", "session", "model", "agent"}


async def test_the_drift_record_has_the_logs_fields_and_names_tools_only_when_they_changed(tmp_path):
    # The typed payload (events.Drift) writes the record `report` reads: the same field names,
    # "tools" only on a tools change (never a null).
    h = _handler(tmp_path)
    tools = openai_tools(TOOL_NAMES[:10])
    sections_b = pi_sections()
    sections_b["rules"] += "\n- Never push to main."
    await _send(h, _request(pi_system_prompt(), tools=tools))
    await _send(h, _request(render_pi(sections_b), tools=tools))
    await _send(h, _request(render_pi(sections_b), tools=openai_tools(TOOL_NAMES[:11])))
    drifts = [json.loads(x) for x in _log_text(tmp_path).splitlines() if '"drift"' in x]
    assert [set(d) for d in drifts] == [_DRIFT_FIELDS, _DRIFT_FIELDS | {"tools"}]
    assert drifts[0]["changed"] == ["section:rules"] and drifts[1]["changed"] == ["tools"]
    assert drifts[1]["before"] == drifts[0]["after"] and drifts[0]["exact"] is True


async def test_warmup_pings_never_warn_and_do_not_move_the_record():
    h = _handler()
    a, b = "system A " * 100, "system B " * 100
    await _send(h, _request(a))
    await _send(h, _request(b, max_tokens=1))  # ping for a new head: silent
    await _send(h, _request(a, max_tokens=1))  # exact repeat ping: silent
    assert _drifts(h) == 0
    await _send(h, _request(b))  # the real request with the new head warns once
    assert _drifts(h) == 1


async def test_sessions_and_tenants_are_separate():
    h = _handler()
    await _send(h, _request("A", session="sess-one"))
    await _send(h, _request("B", session="sess-two"))  # another session: first request, no drift
    other_tenant = _request("C", session="sess-one")
    other_tenant["metadata"]["user_api_key_hash"] = "hash-b"
    await _send(h, other_tenant)  # same session id, other tenant: first request there
    assert _drifts(h) == 0
    await _send(h, _request("B", session="sess-one"))
    assert _drifts(h) == 1


async def test_response_header_reports_head_and_drift():
    h = _handler()
    await h.async_pre_call_hook(None, None, _request("A" * 400, call_id="c1"), "acompletion")
    data = _request("B" * 400, call_id="c2")
    await h.async_pre_call_hook(None, None, data, "acompletion")
    headers = await h.async_post_call_response_headers_hook(data, None, None)
    assert headers["x-litellm-prefix-head"] == head_record(chat.read(data))[0].fingerprint
    assert "changed=system" in headers["x-litellm-prefix-drift"]
    assert "first_diff_char=0" in headers["x-litellm-prefix-drift"]
    quiet = await h.async_post_call_response_headers_hook({"litellm_call_id": "c1"}, None, None)
    assert "x-litellm-prefix-drift" not in quiet


def test_sections_parse_pi_prompt():
    names = [name for name, _ in parse_head(pi_system_prompt())]
    assert names == ["preamble", "tools", "rules", "docs", "addendum", "project_context", "skills", "cwd"]


@pytest.mark.parametrize("a, b, expected", [("abc", "abd", 2), ("abc", "abc", 3), ("ab", "abc", 2), ("", "x", 0),
                                            ("x" * 10000 + "a", "x" * 10000 + "b", 10000)])
def test_first_difference(a, b, expected):
    assert first_difference(a, b) == expected


async def test_appending_to_the_head_before_any_user_turn_does_not_warn():
    h = _handler()
    data = {"model": "m", "messages": [{"role": "system", "content": "A"}], "metadata": {"session_id": "s-append"}}
    await _send(h, data)
    data = {**data, "messages": [*data["messages"], {"role": "system", "content": "B"}]}
    await _send(h, data)
    assert _drifts(h) == 0
    data = {**data, "messages": [{"role": "system", "content": "A2"}, {"role": "system", "content": "B"}]}
    await _send(h, data)
    assert _drifts(h) == 1
