"""Learned volatile lines end to end: an agent no preset knows, through the session's real proxy in
front of the recording upstream (the rule itself: tests/unit/request/rules/test_learned_volatile.py).
"""
from __future__ import annotations

import copy
import json
from datetime import timedelta

from litellm_prefix.request.rules.volatile import (
    learned_note,
)
from tests.unit.request.rules.test_learned_volatile import T0, clock_line, orbit_head


def test_unknown_agent_through_the_proxy_sends_one_head_upstream(proxy, upstream):
    """A real proxy in front of the recording upstream, zero configuration for this agent: the
    counter and clock lines are learned on turn 1; the upstream receives one head, and the two
    notes (each line's first change) in turn 1's user message, on that turn and every later one."""
    upstream.take()
    moments = [T0 + timedelta(seconds=3 * turn) for turn in range(5)]  # the proxy's own clock stays within the hour
    body: list[dict] = []
    for turn, at in enumerate(moments):
        body.append({"role": "user", "content": f"step {turn}: continue with the cart page"})
        request = {"model": "chat-model", "messages": [{"role": "system", "content": orbit_head(at, 2 * turn + 1)},
                                                        *copy.deepcopy(body)]}
        proxy.post("/v1/chat/completions", request, **{"x-session-id": "e2e-unknown-agent"})
        body.append({"role": "assistant", "content": "ok"})
    sent = [json.loads(r["body"])["messages"] for r in upstream.take()]
    assert len(sent) == 5
    assert {messages[0]["content"] for messages in sent} == {orbit_head(moments[0], 1)}
    notes = [learned_note(clock_line(moments[1])), learned_note("Messages in conversation: 3")]
    for turn, messages in enumerate(sent):
        texts = [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]) for m in messages]
        carried = [i for i, text in enumerate(texts) if "a line of the system prompt still shows" in text]
        if turn == 0:
            assert carried == []
        else:  # folded into the user message of turn 1 (system, user, assistant, user), in head order: the
            # deployment (openai/ with its own api_base) is a self-hosted server that declares no role rules
            assert carried == [3]
            assert texts[3].index(notes[0]) < texts[3].index(notes[1])
    for earlier, later in zip(sent, sent[1:]):
        assert later[: len(earlier)] == earlier
