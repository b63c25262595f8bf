"""The incremental request path (core: a stream's last request remembered, reused where every
input the rules read is the same, or where the request only appends messages that change no
rule's decision: ``appended``) writes exactly what the full path writes, on every turn of
any generated session: appended turns, retries, resumes on another replica over the same
store, compaction, cache marks that move, head changes, warm-up pings. Two worlds run side by side, one with the
incremental path and one without (``Stabilizer(incremental=False)``), each with two replicas
sharing a store; they must agree on every request's bytes and on every event that reaches
the sinks."""
from __future__ import annotations

import copy
import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.agent_requests import claude_code_headers, mark_last
from harness.sessions import NOTIFICATION, PiClient, memory_flip_turn, removed, resume_session_requests
from litellm_prefix.caches import RECORD_BYTES, StreamRecord, Streams
from litellm_prefix.fleet.store import MemoryStore
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.journal import unmarked
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings
from tests.support import examples
from tests.unit.request.test_profiles import _cc_session
from tests.unit.request.test_properties import PROVIDERS, messages, requests

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

    def send(self, data: dict, target: Target, replica: int, call_type: str | None = None) -> tuple[str, str]:
        """The request's bytes out, and the path it took: ``reused`` (a repeat of the stream's last
        request), ``appended`` (it with messages appended) or ``full``."""
        stats = self.replicas[replica].stats
        before = stats["incremental_reused"], stats["incremental_appended"]
        out = self.replicas[replica].stabilize_sync(copy.deepcopy(data), call_type, target=target)
        path = "reused" if stats["incremental_reused"] > before[0] else \
            "appended" if stats["incremental_appended"] > before[1] else "full"
        return json.dumps(out, sort_keys=True, default=str), path


def _agree(steps, call_type: str | None = None) -> list[str]:
    """Run ``steps`` (data, target, replica, seconds later) through both worlds; returns the path
    each request took in the incremental world."""
    inc, full = World(True), World(False)
    paths = []
    for data, target, replica, later in steps:
        inc.now += later
        full.now += later
        out, path = inc.send(data, target, replica, call_type)
        assert out == full.send(data, target, replica, call_type)[0]
        assert inc.reported == full.reported
        paths.append(path)
    assert all(r.stats["errors"] == 0 for r in inc.replicas + full.replicas)
    assert all(r.stats["incremental_reused"] == r.stats["incremental_appended"] == 0 for r in full.replicas)
    return paths


OPS = ("append", "append", "turn", "turn", "moved", "retry", "retry", "replica", "compact", "mark", "head", "ping")
# Mostly agent turns: the sessions the appended path is for, with every other change among them.
TURNS = ("turn",) * 4 + ("moved",) * 2 + ("retry", "replica", "compact", "mark", "head", "ping", "append")


@st.composite
def sessions(draw, ops=OPS):
    """A generated session: turns appended to a generated first request (any messages, or an
    agent's turn without system messages, its cache mark moved or not), with retries, replica switches, compaction, marks
    that move, head edits and pings in between."""
    data, target = draw(requests(max_turns=4))
    steps, replica = [], 0
    for _ in range(draw(st.integers(2, 7))):
        op = draw(st.sampled_from(ops))
        data = copy.deepcopy(data)
        data.pop("max_tokens", None)
        if op == "append":
            data["messages"] += draw(messages(draw(st.integers(1, 3))))
        elif op == "turn":  # an agent's turn: no system message (what the appended path takes)
            data["messages"] += [m for m in draw(messages(draw(st.integers(1, 3))))
                                 if m["role"] not in ("system", "developer")]
        elif op == "moved" and len(data["messages"]) > 1:  # Claude Code's turn: the mark moves to the newest message
            new = [m for m in draw(messages(draw(st.integers(1, 3)))) if m["role"] not in ("system", "developer")]
            if new:
                data["messages"] = [data["messages"][0], *mark_last([*data["messages"][1:-1],
                                                                      unmarked(data["messages"][-1]), *new])]
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


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.sampled_from(PROVIDERS))
def test_incremental_equals_full_on_every_turn(steps, provider):
    _agree([(d, Target(provider=provider), r, s) for d, _, r, s in steps])


def _without_id(data: dict) -> dict:
    """The request as an agent that sends no session id sends it (session.py: a derived session)."""
    return {k: v for k, v in data.items() if k != "metadata"}


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(TURNS), st.sampled_from(PROVIDERS))
def test_incremental_equals_full_without_a_session_id(steps, provider):
    """Derived sessions (their first request fresh, the second seeded from it, traces taken at 1,
    2, 4, 8 answers and saved on the appended path too): the same bytes and events as the full path."""
    _agree([(_without_id(d), Target(provider=provider), r, s) for d, _, r, s in steps])


def test_a_derived_session_takes_the_appended_path_when_its_trace_is_taken():
    """An id-less agent's session: the first request runs fresh, the second is seeded from it (its
    record kept once the seed is saved under the session's key), and from the third on every turn
    takes the appended path, those that take the trace (2, 4, 8 answers) as well; the bytes and
    events agree with the full path on every turn."""
    client = PiClient(session="unused")
    client.user("start")
    steps = [(_without_id(client.request()), Target(provider="openai"), 0, 5)]
    for turn in range(10):
        _agent_turn(client, turn)
        steps.append((_without_id(client.request()), Target(provider="openai"), 0, 5))
    assert _agree(steps) == ["full", "full"] + ["appended"] * 9


def test_generated_sessions_take_the_appended_path():
    """The property above, on a fixed set of generated sessions made mostly of agent turns
    (derandomized: the same every run), takes the appended path on a share of its requests:
    the property cannot hold vacuously."""
    paths: Counter = Counter()

    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(sessions(TURNS), st.sampled_from(PROVIDERS))
    def run(steps, provider):
        paths.update(_agree([(d, Target(provider=provider), r, s) for d, _, r, s in steps]))

    run()
    assert paths["appended"] >= 0.1 * sum(paths.values()), paths
    assert paths["reused"] > 0 and paths["full"] > 0, paths


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
    assert "reused" in _agree(steps)


def test_resumed_session_and_moving_marks():
    """The store tests' resumed session, then Claude-Code-like marks moved to the newest message."""
    target = Target(provider="anthropic")
    steps = []
    for request in resume_session_requests():
        marked = dict(request, messages=[request["messages"][0], *mark_last(request["messages"][1:])])
        steps += [(request, target, 0, 5), (marked, target, 1, 0), (marked, target, 1, 0)]
    assert "reused" in _agree(steps)


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


def _agent_turn(client: PiClient, turn: int) -> None:
    client.tool_round()
    client.assistant("ok")
    client.user(f"typed {turn}")


def test_agent_turns_take_the_appended_path():
    """bench/session_steps.py's session: from the third request on (the first saves the session's
    first decisions, the second is the first remembered), every turn reuses the last one's
    decisions and runs nothing for its appended messages; the bytes agree on every turn."""
    client = PiClient(session="appended")
    client.user("start")
    steps = []
    for turn in range(12):
        _agent_turn(client, turn)
        steps.append((client.request(), Target(provider="openai"), 0, 5))
    assert _agree(steps) == ["full", "full"] + ["appended"] * 10


def test_what_the_appended_path_refuses():
    """An edited or truncated history, an appended system message (and the turn after one: its
    patch's run is the next message), a head change and a journal another replica changed
    take the full path; the agent's next plain turn is appended again."""
    client = PiClient(extensions={"todo": "- [ ] a"}, session="refused")
    client.user("start")
    target = Target(provider="openai")
    steps, expected = [], []

    def send(path: str, replica: int = 0, request: dict | None = None) -> None:
        steps.append((request or client.request(), target, replica, 5))
        expected.append(path)

    for turn in range(3):
        _agent_turn(client, turn)
        send("full" if turn < 2 else "appended")
    edited = client.request()
    edited["messages"][3] = {**edited["messages"][3], "content": "an edited tool result"}
    send("full", request=edited)
    _agent_turn(client, 3)
    send("full")  # (the edited request's record is not this history's)
    _agent_turn(client, 4)
    send("appended")
    client.system("Reminder: keep the todo list current.")
    send("full")
    _agent_turn(client, 5)
    send("full")
    _agent_turn(client, 6)
    send("appended")
    compacted = client.request()
    compacted["messages"] = compacted["messages"][:1] + compacted["messages"][5:]
    send("full", request=compacted)
    _agent_turn(client, 7)
    client.user(NOTIFICATION)
    client.system(removed("todo"))
    client.extensions.pop("todo")
    send("full", replica=1)  # a head change, on the other replica: the head stays pinned in a notification run
    client.assistant("Noted.")
    send("full", replica=1)  # (the journal records the head the last request sent)
    _agent_turn(client, 8)
    send("full", replica=1)  # the notification run is over: head_pin decides again
    _agent_turn(client, 9)
    send("full")  # back on the first replica: the journal changed since its record
    _agent_turn(client, 10)
    send("appended")
    assert _agree(steps) == expected


def test_a_moving_cache_mark_takes_the_appended_path():
    """Claude Code marks its newest message and unmarks the one before (a marked text part reads
    as its string again): only marker fields changed in the earlier messages, so the turn is
    appended, and the bytes agree with the full path's (the marks as this request sent them)."""
    client = PiClient(session="marks")
    client.user("start")
    steps = []
    for turn in range(8):
        _agent_turn(client, turn)
        request = client.request()
        request["messages"] = [request["messages"][0], *mark_last(request["messages"][1:])]
        steps.append((request, Target(provider="anthropic"), 0, 5))
    assert _agree(steps) == ["full", "full"] + ["appended"] * 6


@pytest.mark.parametrize("target", [Target(provider="hosted_vllm"), Target(provider="anthropic"),
                                    Target(provider="bedrock", strips_billing=True)], ids=["removed", "kept", "litellm"])
def test_claude_code_billing_block_and_moving_mark(target):
    """Claude Code's /v1/messages session: its billing block is new on every request (set aside by
    the billing rule, read by no other) and its cache mark moves: every turn from the third is
    appended, with the block as this request sent it, or removed, as the full path does."""
    steps = [({**body, "proxy_server_request": {"headers": claude_code_headers(), "body": {}}}, target, 0, 5)
             for body in _cc_session(8)]
    assert _agree(steps, "anthropic_messages") == ["full", "full"] + ["appended"] * 6


def test_stream_records_are_bounded_by_count_and_bytes():
    """The records hold the head written and the items the rules made (the body's JSON only as
    digests): at most ``maxsize`` of them and ``max_bytes`` together, least recently used out
    first; one larger than all may be is not kept."""
    def record(size: int) -> StreamRecord:
        return StreamRecord((), 0, (0, 0), 1, None, frozenset(), None, (("x" * size,), None, None, (), None, None))

    streams = Streams(3, max_bytes=3 * RECORD_BYTES + 3000)
    for key in "abcd":
        streams.put(key, record(10))
    assert len(streams) == 3 and streams.get("a") is None
    streams.put("big", record(4000))  # with the others: over the bytes until two are out
    assert streams.get("big") is not None and streams.get("d") is not None and len(streams) == 2
    streams.put("huge", record(4 * RECORD_BYTES))
    assert streams.get("huge") is None and streams.get("big") is not None
