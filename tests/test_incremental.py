"""The incremental request path (core: a stream's last request remembered, reused where every
input the rules read is the same) writes exactly what the full path writes, on every turn of
any generated session: retries, resumes on another replica over the same store, compaction,
cache marks that move, head changes, warm-up pings. Two worlds run side by side, one with the
incremental path and one without (``Stabilizer(incremental=False)``), each with two replicas
sharing a store; they must agree on every request's bytes and on every event that reaches
the sinks."""
from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from harness.agent_requests import mark_last
from harness.sessions import NOTIFICATION, PiClient, memory_flip_turn, removed, resume_session_requests

from litellm_prefix.context import Target
from litellm_prefix.core import Stabilizer
from litellm_prefix.settings import Settings
from litellm_prefix.store import MemoryStore
from tests.test_properties import PROVIDERS, messages, requests

SETTINGS = Settings(path_check="trusted", stable_path="/srv/pi-home")


class World:
    """Two replicas over one store, all reading one clock; records what reaches the sinks."""

    def __init__(self, incremental: bool) -> None:
        store = MemoryStore(1000, 3600)
        self.now = 1_800_000_000.0
        self.replicas = [Stabilizer(SETTINGS, store=store, incremental=incremental) for _ in range(2)]
        self.reported: list = []
        for replica in self.replicas:
            replica.clock = lambda: self.now
            replica.sinks.transformed = self._capture

    def _capture(self, call_id, key, data, shape, events, drift, *args, **kwargs):
        self.reported.append((key, shape, [(e.kind, json.dumps(e.data, sort_keys=True, default=str)) for e in events],
                              json.dumps(drift, sort_keys=True, default=str)))

    def send(self, data: dict, target: Target, replica: int) -> str:
        out = self.replicas[replica].stabilize_sync(copy.deepcopy(data), target=target)
        return json.dumps(out, sort_keys=True, default=str)


def _agree(steps) -> int:
    """Run ``steps`` (data, target, replica, seconds later) through both worlds; returns reuses."""
    inc, full = World(True), World(False)
    for data, target, replica, later in steps:
        inc.now += later
        full.now += later
        assert inc.send(data, target, replica) == full.send(data, target, replica)
        assert inc.reported == full.reported
    assert all(r.stats["errors"] == 0 for r in inc.replicas + full.replicas)
    assert all(r.stats["incremental_reused"] == 0 for r in full.replicas)
    return sum(r.stats["incremental_reused"] for r in inc.replicas)


@st.composite
def sessions(draw):
    """A generated session: turns appended to a generated first request, with retries, replica
    switches, compaction, marks that move, head edits and pings in between."""
    data, target = draw(requests(max_turns=4))
    steps, replica = [], 0
    for _ in range(draw(st.integers(2, 7))):
        op = draw(st.sampled_from(["append", "append", "retry", "retry", "replica", "compact", "mark", "head", "ping"]))
        data = copy.deepcopy(data)
        data.pop("max_tokens", None)
        if op == "append":
            data["messages"] += draw(messages(draw(st.integers(1, 3))))
        elif op == "replica":
            replica = 1 - replica
        elif op == "compact":
            keep = draw(st.integers(0, max(0, len(data["messages"]) - 1)))
            data["messages"] = data["messages"][:1] + data["messages"][1 + keep:]
        elif op == "mark" and len(data["messages"]) > 1 and data["messages"][-1].get("content"):
            data["messages"] = [data["messages"][0], *mark_last(data["messages"][1:])]
        elif op == "head":
            data["messages"][0] = {"role": "system", "content": data["messages"][0]["content"] + "\n\nedited"}
        elif op == "ping":
            data["max_tokens"] = 1
        steps.append((data, target, replica, draw(st.sampled_from([0, 1, 700]))))
        if op == "retry" or draw(st.booleans()):
            steps.append((copy.deepcopy(data), target, replica, 0))
    return steps


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.sampled_from(PROVIDERS))
def test_incremental_equals_full_on_every_turn(steps, provider):
    _agree([(d, Target(provider=provider), r, s) for d, _, r, s in steps])


def test_scripted_pi_session_with_retries_and_a_second_replica():
    """harness/sessions.py's pi session (memory write and deletion, a notification run that
    flips a section), each turn sent twice, alternating replicas from turn 4: the retries are
    reused, and every byte agrees."""
    client = PiClient(memory=["Project uses uv"], extensions={"todo": "- [ ] a"}, session="incremental")
    target = Target(provider="openai")
    steps = []
    for turn in range(8):
        memory_flip_turn(client, turn)
        request = client.request()
        replica = turn % 2 if turn >= 4 else 0
        steps += [(request, target, replica, 30), (request, target, replica, 0), (request, target, replica, 0)]
        client.assistant()
    assert _agree(steps) > 0


def test_resumed_session_and_moving_marks():
    """The store tests' resumed session, then Claude-Code-like marks moved to the newest message."""
    target = Target(provider="anthropic")
    steps = []
    for request in resume_session_requests():
        marked = dict(request, messages=[request["messages"][0], *mark_last(request["messages"][1:])])
        steps += [(request, target, 0, 5), (marked, target, 1, 0), (marked, target, 1, 0)]
    assert _agree(steps) > 0


def test_notification_head_change_is_never_reused():
    """A head that changes between two requests with the same body takes the full path."""
    client = PiClient(extensions={"todo": "- [ ] a"}, session="flip")
    target = Target(provider="openai")
    client.user("typed 0")
    first = client.request()
    client.user(NOTIFICATION)
    client.system(removed("todo"))
    client.extensions.pop("todo")
    _agree([(first, target, 0, 1), (first, target, 0, 1), (client.request(), target, 0, 1),
            (client.request(), target, 0, 1)])
