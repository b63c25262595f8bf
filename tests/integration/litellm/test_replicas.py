"""Two real proxy replicas sharing one real Redis serve alternating turns of the same sessions."""
from __future__ import annotations

import json

from harness.procs import log_records
from harness.sessions import PiClient, memory_flip_turn, removed
from litellm_prefix.request.rules.notes import unfolded


def _roles(messages):
    # (LiteLLM itself drops "content": None from assistant tool-call messages on the wire; notes folded
    # into a message for this self-hosted target are taken out again: what is left is the client's)
    return [{k: v for k, v in unfolded(m).items() if v is not None} for m in messages
            if m["role"] in ("user", "assistant", "tool")]


def _drift_count(replicas) -> int:
    return sum(r.get("event") == "drift" for px in replicas for r in log_records(px.prefix_log))  # writer caught up


def test_alternating_replicas_send_byte_identical_heads_and_lose_nothing(replicas, upstream):
    upstream.take()
    drift_before = _drift_count(replicas)
    client = PiClient(memory=["User prefers tabs", "Project uses uv"], extensions={"todo": "- [ ] ship"},
                      session="replicated-session-1")
    sent = []
    for turn in range(10):
        memory_flip_turn(client, turn)
        request = client.request()
        sent.append(request)
        replica = replicas[turn % 2]
        response = replica.post("/v1/chat/completions", request, **{"x-session-id": client.session})
        assert response.headers.get("x-litellm-prefix-head")
        client.assistant("ok")
    raws = [r["body"] for r in upstream.take()]
    bodies = [json.loads(r) for r in raws]
    assert len(bodies) == 10
    heads = {json.dumps(b["messages"][0]) for b in bodies}
    assert len(heads) == 1  # one head across both replicas, memory writes and the flip
    assert "Deploys frozen" not in bodies[-1]["messages"][0]["content"]
    for request, body in zip(sent, bodies):
        assert _roles(body["messages"]) == _roles(request["messages"])  # nothing lost, in order
    for earlier, later in zip(bodies, bodies[1:]):
        assert later["messages"][: len(earlier["messages"])] == earlier["messages"]  # prefix-monotone
    notes = [m for m in bodies[-1]["messages"] if "Memory correction" in str(m.get("content"))]
    assert len(notes) == 1
    assert all(removed("todo") not in str(m.get("content")) for b in bodies for m in b["messages"])
    logs = "".join(px.prefix_log.read_text() for px in replicas if px.prefix_log.exists())
    assert _drift_count(replicas) == drift_before  # no drift reported by either replica
    assert "replicated-session-1" not in logs and "Deploys frozen" not in logs  # hashes only, no text
