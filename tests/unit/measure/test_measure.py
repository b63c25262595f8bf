"""Measured cache use per call through the transform and the success callback, in process.

The upstream is simulated the way ``replay`` counts: the request rendered (ChatML) and
tokenized with cl100k_base, cached tokens = the longest common token prefix with the
previous request (llama.cpp, one slot), optionally rounded down to 128-token steps
(OpenAI). The success callback gets the ``kwargs`` LiteLLM builds: the call id and a
``standard_logging_object`` with ``metadata.usage_object``, ``model_id``, ``api_base``.
The end-to-end proof against a real proxy and llama.cpp server is in tests/integration/litellm/test_metrics.py.
"""
from __future__ import annotations

import copy
import json
import string

import pytest
from hypothesis import given, settings as hsettings, strategies as st
from prometheus_client import REGISTRY

from harness.realistic import conversation, openai_tools, pi_sections, render_pi
from litellm_prefix.measure import prefix
from litellm_prefix.measure.sinks import flush_logs
from litellm_prefix.offline.replay import Turn, common_prefix, render, tokens
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings
from tests.support import examples

LOCAL = "http://127.0.0.1:8080/v1"
SECRET = "PROMPT-TEXT-MUST-NOT-BE-LOGGED"


class SimulatedUpstream:
    def __init__(self, step: int = 1) -> None:
        self.previous: list[int] = []
        self.step = step

    def forget(self) -> None:
        self.previous = []

    def usage(self, data: dict, route: str = "chat") -> dict:
        ids = tokens(render(Turn("", route, data)))
        lcp = common_prefix(self.previous, ids) // self.step * self.step
        self.previous = ids
        if route == "messages":
            return {"input_tokens": len(ids) - lcp, "cache_read_input_tokens": lcp, "cache_creation_input_tokens": 0,
                    "output_tokens": 1}
        if route == "responses":
            return {"input_tokens": len(ids), "input_tokens_details": {"cached_tokens": lcp}, "output_tokens": 1}
        return {"prompt_tokens": len(ids), "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": lcp}}


class Session:
    """One agent session through a Stabilizer and a simulated upstream."""

    def __init__(self, tmp_path, upstream: SimulatedUpstream | None = None, provider: str = "openai",
                 api_base: str = LOCAL, route: str = "chat", session: str = "sess-measure-1",
                 group: str = "group-m") -> None:
        self.log = tmp_path / "prefix.jsonl"
        self.stabilizer = Stabilizer(Settings(path_check="absolute", log=str(self.log)))
        self.upstream = upstream or SimulatedUpstream()
        self.provider, self.api_base, self.route, self.session = provider, api_base, route, session
        self.n = 0
        self.group = group

    def call(self, data: dict, deployment: str = "dep-a", usage: dict | None = None) -> dict:
        self.n += 1
        data = copy.deepcopy(data)
        call_id = f"{self.session}-{self.n}"
        meta_key = "litellm_metadata" if self.route == "messages" else "metadata"
        data.update({"litellm_call_id": call_id, meta_key: {"session_id": self.session}})
        call_type = {"chat": "acompletion", "messages": "anthropic_messages", "responses": "aresponses"}[self.route]
        self.stabilizer.stabilize_sync(data, call_type, target=Target(model="openai/m", provider=self.provider),
                                       model_names=(self.group, "openai/m"))
        sent = {k: v for k, v in data.items() if k not in ("litellm_call_id", meta_key)}
        usage = usage if usage is not None else self.upstream.usage(sent, self.route)
        slo = {"litellm_call_id": call_id, "model_id": deployment, "custom_llm_provider": self.provider,
               "model": "m", "api_base": self.api_base, "metadata": {"usage_object": usage}}
        out = self.stabilizer.completed({"litellm_call_id": call_id, "standard_logging_object": slo}, None)
        assert out is not None
        return out

    def records(self) -> list[dict]:
        return [json.loads(line) for line in (flush_logs(), self.log.read_text())[1].splitlines()]


def pi_head(**changes) -> str:
    sections = pi_sections(target_tokens=3000)
    sections["addendum"] += " " + SECRET
    sections.update(changes)
    return render_pi(sections)


def turns(n: int, head: str | None = None, edit_at: int | None = None, edited: str | None = None):
    history = conversation(n)
    for i in range(1, n + 1):
        system = edited if edit_at is not None and i >= edit_at else head
        yield {"model": "m", "messages": [{"role": "system", "content": system}, *history[: 4 * i - 3]],
               "tools": openai_tools()}


def test_stable_session_every_later_turn_is_a_hit(tmp_path):
    s = Session(tmp_path)
    classes = [s.call(req)["class"] for req in turns(6, pi_head())]
    assert classes == ["first"] + ["hit"] * 5
    calls = [r for r in s.records() if r["event"] == "call"]
    assert [r["turn"] for r in calls] == [1, 2, 3, 4, 5, 6]
    assert all(r["tokens_lost"] == 0 for r in calls)
    assert SECRET not in (flush_logs(), s.log.read_text())[1]


def test_the_last_request_kept_for_measuring_is_bounded_in_bytes(tmp_path, monkeypatch):
    """Each session's last chat request is kept (``sinks.seen``) to measure the next one from
    where it differs; past the byte bound, or for one request larger than it, a session is
    measured whole, with the same classes and no internal error."""
    from litellm_prefix.measure import sinks

    s = Session(tmp_path)
    outs = [s.call(req) for req in turns(4, pi_head())]
    assert [o["class"] for o in outs] == ["first"] + ["hit"] * 3
    assert len(s.stabilizer.sinks.seen) == 1
    monkeypatch.setattr(sinks, "SEEN_BYTES", 1000)  # smaller than one request
    small = Session(tmp_path, session="sess-measure-small")
    outs = [small.call(req) for req in turns(4, pi_head())]
    assert [o["class"] for o in outs] == ["first"] + ["hit"] * 3
    assert len(small.stabilizer.sinks.seen) == 0 and small.stabilizer.stats["errors"] == 0


def test_genuine_head_edit_is_one_client_drift_naming_the_section(tmp_path):
    s = Session(tmp_path)
    base = pi_sections(target_tokens=3000)
    edited = pi_head(rules=base["rules"] + "\n- Never push to main.")
    outs = [s.call(req) for req in turns(6, pi_head(), edit_at=4, edited=edited)]
    assert [o["class"] for o in outs] == ["first", "hit", "hit", "client_drift", "hit", "hit"]
    drift = outs[3]
    assert drift["where"] == "section:rules" and "section:rules" in drift["drift"]["changed"]
    # everything after the rules section had to be prefilled again: lost = previous size - cached
    assert drift["tokens_lost"] > 0.5 * outs[2]["prompt_tokens"]
    assert drift["tokens_lost"] == outs[2]["prompt_tokens"] - drift["cached_tokens"]
    assert sum(1 for r in s.records() if r["event"] == "drift") == 1


def test_history_edit_is_client_drift_in_the_messages(tmp_path):
    s = Session(tmp_path)
    requests = list(turns(4, pi_head()))
    for req in requests[:3]:
        s.call(req)
    compacted = copy.deepcopy(requests[3])
    compacted["messages"][3]["content"] = "summary of earlier work"  # the client rewrote its history
    out = s.call(compacted)
    assert out["class"] == "client_drift" and out["where"].startswith("messages[")
    assert "drift" not in out  # the head did not change: no drift event, the history did


def test_cache_gone_on_another_deployment_is_a_provider_miss(tmp_path):
    s = Session(tmp_path)
    requests = list(turns(3, pi_head()))
    s.call(requests[0])
    s.call(requests[1])
    s.upstream.forget()  # the server restarted, or the router sent the call elsewhere
    out = s.call(requests[2], deployment="dep-b")
    assert (out["class"], out["reason"]) == ("provider_miss", "other_deployment")
    assert (out["deployment"], out["previous_deployment"]) == ("dep-b", "dep-a")
    assert out["tokens_lost"] == out["expected_tokens"] > 0
    calls = [r for r in s.records() if r["event"] == "call"]
    assert out["expected_tokens"] == calls[-2]["prompt_tokens"]  # the previous prompt, measured


def test_openai_steps_and_minimum(tmp_path):
    s = Session(tmp_path, SimulatedUpstream(step=128), api_base="https://api.openai.com/v1")
    assert [s.call(req)["class"] for req in turns(4, pi_head())] == ["first", "hit", "hit", "hit"]
    short = Session(tmp_path / "short", SimulatedUpstream(), api_base="https://api.openai.com/v1",
                    session="sess-short-1")
    (tmp_path / "short").mkdir()
    small = [{"model": "m", "messages": [{"role": "user", "content": "hi"}]},
             {"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                                         {"role": "user", "content": "more"}]}]
    short.call(small[0])
    out = short.call(small[1], usage={"prompt_tokens": 20, "prompt_tokens_details": {"cached_tokens": 0}})
    assert out["class"] == "below_minimum" and out["tokens_lost"] == out["expected_tokens"] > 0


def test_unknown_when_the_upstream_reports_no_cache_use(tmp_path):
    s = Session(tmp_path)
    reqs = list(turns(2, pi_head()))
    s.call(reqs[0])
    out = s.call(reqs[1], usage={"prompt_tokens": 4000, "completion_tokens": 1})
    assert out["class"] == "unknown" and out["cache_reported"] is False


def test_anthropic_messages_and_responses_shapes(tmp_path):
    for route in ("messages", "responses"):
        (tmp_path / route).mkdir()
        s = Session(tmp_path / route, route=route, provider="anthropic" if route == "messages" else "openai",
                    session=f"sess-{route}-1")
        head = pi_head()
        history = [m for m in conversation(3) if m["role"] in ("user", "assistant") and isinstance(m["content"], str)]
        outs = []
        for i in range(1, 4):
            msgs = history[: 2 * i - 1]
            if route == "messages":
                req = {"model": "m", "system": head, "messages": msgs, "max_tokens": 100}
            else:
                req = {"model": "m", "instructions": head,
                       "input": [{"role": m["role"], "content": m["content"]} for m in msgs]}
            outs.append(s.call(req))
        assert [o["class"] for o in outs] == ["first", "hit", "hit"], route
        assert outs[1]["cached_tokens"] > 0


def test_metrics_count_calls_tokens_and_internal_events(tmp_path):
    def value(name, **labels):
        return REGISTRY.get_sample_value(name, labels) or 0.0

    group = "group-metrics-test"  # this test's own series: nothing else counts into them
    drift_before = value("litellm_prefix_internal_events_total", event="drift")
    s = Session(tmp_path, session="sess-metrics-1", group=group)
    outs = [s.call(req) for req in turns(3, pi_head())]
    labels = {"model_group": group, "agent": outs[0].get("agent", "")}  # the pi profile, when detected
    assert value("litellm_prefix_calls_total", **labels, **{"class": "first"}) == 1
    assert value("litellm_prefix_calls_total", **labels, **{"class": "hit"}) == 2
    assert value("litellm_prefix_prompt_tokens_total", **labels, **{"class": "hit"}) == sum(
        o["prompt_tokens"] for o in outs[1:])
    assert value("litellm_prefix_cached_tokens_total", **labels, **{"class": "hit"}) == sum(
        o["cached_tokens"] for o in outs[1:])
    assert value("litellm_prefix_requests_total", **labels) == 3
    assert value("litellm_prefix_transform_seconds_count") >= 3
    # the gauge of sessions held, set by the last counted request: this stabilizer's one session
    assert value("litellm_prefix_sessions") == len(s.stabilizer.local_store) == 1
    other = Session(tmp_path, session="sess-metrics-2", group=group)
    other.stabilizer.store = other.stabilizer.local_store = s.stabilizer.local_store  # two sessions held
    other.call(next(turns(1, pi_head())))
    assert value("litellm_prefix_sessions") == 2
    # an internal counter (a drift) shows up as litellm_prefix_internal_events_total{event="drift"}
    s.call(next(turns(4, pi_head(cwd="Current working directory: /tmp/other"))))
    assert value("litellm_prefix_internal_events_total", event="drift") == drift_before + 1
    assert value("litellm_prefix_drift_events_total", part="section:cwd", **labels) == 1


def test_metric_counts_go_to_the_registry_as_counter_inc_would():
    """``Metrics.count`` increments a counter child's value directly (skipping ``Counter.inc``'s
    per-call checks): the registry shows the same totals, a negative amount is refused as
    ``Counter.inc`` refuses it, and a child laid out otherwise is counted by its own ``inc``."""
    from prometheus_client import CollectorRegistry

    from litellm_prefix.measure import metrics

    registry = CollectorRegistry()
    m = metrics.Metrics(registry)
    labels = ("group-a", "hit", "pi")
    m.count(m.calls, labels)
    m.count(m.calls, labels)
    m.count(m.prompt_tokens, labels, 20000)
    m.count(m.prompt_tokens, labels, 512)
    m.count(m.internal, ("drift",), 3)
    sample = {"model_group": "group-a", "class": "hit", "agent": "pi"}
    assert registry.get_sample_value("litellm_prefix_calls_total", sample) == 2
    assert registry.get_sample_value("litellm_prefix_prompt_tokens_total", sample) == 20512
    assert registry.get_sample_value("litellm_prefix_internal_events_total", {"event": "drift"}) == 3
    with pytest.raises(ValueError):
        m.count(m.cached_tokens, labels, -1)
    assert registry.get_sample_value("litellm_prefix_cached_tokens_total", sample) in (None, 0.0)

    class Other:  # (another prometheus_client's layout)
        total = 0

        def inc(self, amount=1):
            self.total += amount

    other = Other()
    assert metrics._value_inc(other) == other.inc
    metrics._value_inc(other)(5)
    assert other.total == 5


def test_calls_the_transform_never_saw_and_broken_callbacks(tmp_path):
    stabilizer = Stabilizer(Settings(path_check="absolute"))
    assert stabilizer.completed({"litellm_call_id": "never-seen"}, None) is None
    assert stabilizer.completed({"standard_logging_object": "garbage"}, object()) is None
    assert stabilizer.stats["errors"] == 0


def test_disabled_measures_nothing(tmp_path):
    stabilizer = Stabilizer(Settings(enabled=False, log=str(tmp_path / "log.jsonl")))
    data = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "litellm_call_id": "x1"}
    stabilizer.stabilize_sync(data, "acompletion")
    assert stabilizer.completed({"litellm_call_id": "x1"}, None) is None
    assert not (tmp_path / "log.jsonl").exists()


# -- the shared-prefix comparison (digests only) ----------------------------------------

texts = st.text(alphabet=string.ascii_letters + " \n{}\"é", min_size=0, max_size=3000)


@hsettings(max_examples=examples(150), deadline=None)
@given(st.text(alphabet="ab\n", min_size=2100, max_size=2400), texts, texts, st.integers(min_value=0, max_value=6000))
def test_shared_prefix_is_exact_for_a_prefix_and_within_one_piece_otherwise(head, body, tail, cut):
    a = head + body
    b = a[: min(cut, len(a))] + tail
    shape_a, _ = prefix.shape_of([("system", a.encode())])
    shape_b, text_b = prefix.shape_of([("system", b.encode())])
    shared = prefix.compare(shape_a, shape_b, text_b)
    true = common_prefix(list(a.encode()), list(b.encode()))
    if b.encode().startswith(a.encode()):
        assert shared.whole and shared.bytes == len(a.encode())
        return
    assert not shared.whole and shared.bytes <= true and shared.where == "system"
    if len(b.encode()) >= prefix.PIECES_FROM:  # long parts are compared piece by piece
        assert true - prefix.PIECE < shared.bytes


@hsettings(max_examples=examples(60), deadline=None)
@given(st.lists(texts, min_size=1, max_size=8), st.integers(min_value=0, max_value=7), texts)
def test_shared_prefix_over_parts_never_exceeds_the_true_one(messages, edit, replacement):
    def parts(msgs):
        return [("system", b"<|im_start|>system\nhead")] + [(f"messages[{i + 1}]", m.encode()) for i, m in
                                                             enumerate(msgs)] + [("end", b"<|im_start|>assistant\n")]
    before = parts(messages)
    after_messages = list(messages)
    after_messages[min(edit, len(messages) - 1)] = replacement
    after = parts(after_messages + ["next turn"])
    shape_a, _ = prefix.shape_of(before)
    shape_b, text_b = prefix.shape_of(after)
    shared = prefix.compare(shape_a, shape_b, text_b)
    # the previous request's generation prompt ("end") is where the model's turn began: not compared
    joined_a, joined_b = b"".join(p for _, p in before[:-1]), b"".join(p for _, p in after)
    if shared.whole:
        assert joined_b.startswith(joined_a)
    else:
        assert shared.bytes <= common_prefix(list(joined_a), list(joined_b))
        assert after_messages[: len(messages)] != messages  # a change really happened


def test_agent_profile_becomes_a_label_and_a_field(tmp_path, monkeypatch):
    """The agent detection reports an ``agent`` event (profile name); sinks label calls with it."""
    from litellm_prefix.request import pipeline
    from litellm_prefix.request.events import Event

    def detected(view, journal, ctx):
        return view, journal, [Event("agent", {"name": "pi"})]

    monkeypatch.setattr(pipeline, "RULES", [detected, *pipeline.RULES])
    before = REGISTRY.get_sample_value("litellm_prefix_calls_total",
                                       {"model_group": "group-m", "class": "hit", "agent": "pi"}) or 0.0
    s = Session(tmp_path, session="sess-agent-1")
    outs = [s.call(req) for req in turns(3, pi_head())]
    assert all(o["agent"] == "pi" for o in outs)
    assert REGISTRY.get_sample_value("litellm_prefix_calls_total",
                                     {"model_group": "group-m", "class": "hit", "agent": "pi"}) == before + 2
    headers = s.stabilizer.response_headers(f"{s.session}-3")
    assert headers["x-litellm-prefix-agent"] == "pi"


def test_late_developer_message_is_no_drift_where_litellm_does_not_hoist(tmp_path):
    """openai_system_messages_first hoists only for OpenAI and Azure deployments (LiteLLM's
    OPENAI_SYSTEM_MESSAGES_FIRST_PROVIDERS): a late developer item sent to a vLLM deployment
    stays in place, so appending one is an append, not a head change (seen on llama.cpp:
    the server reused all but the new tokens)."""
    stabilizer = Stabilizer(Settings(path_check="absolute"))
    target = Target(model="hosted_vllm/local", provider="hosted_vllm", system_messages_first=True)
    head = pi_head()
    first = [{"role": "user", "content": "fix the build"}, {"role": "assistant", "content": "done"}]
    requests = [{"model": "m", "instructions": head, "input": first[:1]},
                {"model": "m", "instructions": head,
                 "input": [*first, {"role": "developer", "content": "Reminder: approvals are required."}]}]
    for i, request in enumerate(requests):
        data = {**copy.deepcopy(request), "litellm_call_id": f"dev-{i}", "litellm_metadata": {"session_id": "dev-1"}}
        stabilizer.stabilize_sync(data, "aresponses", target=target)
    shared = stabilizer.sinks.pending["dev-1"].shared
    assert shared.whole, shared


@hsettings(max_examples=examples(100), deadline=None)
@given(st.lists(texts, min_size=1, max_size=5), st.lists(st.text(alphabet="xy\né", min_size=2048, max_size=2600),
                                                         min_size=1, max_size=3))
def test_a_shape_from_text_parts_is_the_shape_from_their_bytes(short, long):
    """Long text parts take their digests from the remembered text: the same shape as hashing the bytes."""
    parts = [(f"messages[{i}]", t) for i, t in enumerate([*short, *long, *long])]
    as_text, _ = prefix.shape_of(parts)
    as_bytes, _ = prefix.shape_of([(label, t.encode()) for label, t in parts])
    assert as_text == as_bytes


@hsettings(max_examples=examples(100), deadline=None)
@given(st.lists(texts, min_size=1, max_size=5), st.lists(st.text(alphabet="xy\né", min_size=2000, max_size=2600),
                                                         min_size=1, max_size=3), st.booleans())
def test_framed_parts_give_the_shape_and_the_comparison_of_their_joined_texts(short, long, hoist):
    """``render`` frames each part as (prefix, body, suffix) so that a long body is looked up by
    its own string: the shape, and the comparison with the previous request, are those of the
    joined parts (bodies just under and over the long-part length included)."""
    messages = [{"role": "system", "content": "head " * 20}]
    messages += [{"role": ("user", "assistant")[i % 2], "content": t} for i, t in enumerate([*short, *long])]
    tools = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
    target = {"provider": "gemini"} if hoist else {}
    request = {"model": "m", "messages": messages, "tools": tools}
    framed = prefix.render(request, "chat", target)
    joined = [(label, "".join(text)) for label, text in framed]
    assert all(isinstance(text, tuple) for _, text in framed)
    shape_framed, texts_framed = prefix.shape_of(framed)
    shape_joined, texts_joined = prefix.shape_of(joined)
    assert shape_framed == shape_joined
    earlier, _ = prefix.shape_of(prefix.render({**request, "messages": messages[:-1]}, "chat", target))
    assert prefix.compare(earlier, shape_framed, texts_framed) == prefix.compare(earlier, shape_joined, texts_joined)
    changed = [*messages[:-1], {**messages[-1], "content": messages[-1]["content"][:-1] + "#"}]
    after, after_texts = prefix.shape_of(prefix.render({**request, "messages": changed}, "chat", target))
    assert prefix.compare(shape_framed, after, after_texts) == prefix.compare(
        shape_joined, after, [("".join(t)) for t in after_texts])


_contents = st.one_of(
    texts,
    st.text(alphabet="xy\né", min_size=2040, max_size=2300),  # long parts: pieces, memoised digests
    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": texts}), min_size=1, max_size=2),
    st.just([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]),
)
_messages = st.builds(
    lambda role, content, calls: {"role": role, "content": content,
                                  **({"tool_calls": [{"id": "c1", "type": "function", "function": {
                                      "name": "read", "arguments": calls}}]} if calls and role == "assistant" else {})},
    st.sampled_from(["user", "assistant", "tool", "developer", "system"]), _contents,
    st.one_of(st.none(), texts))
_edits = st.one_of(
    st.tuples(st.just("append"), st.lists(_messages, min_size=1, max_size=3)),
    st.tuples(st.just("edit"), st.integers(min_value=0, max_value=12), _messages),
    st.tuples(st.just("truncate"), st.integers(min_value=1, max_value=12)),
    st.tuples(st.just("tools"), st.sampled_from(["read", "write", "grep"])),
    st.tuples(st.just("retry")),
)


@hsettings(max_examples=examples(150), deadline=None)
@given(st.sampled_from([{"role": "system", "content": "head " * 30}, {"role": "user", "content": "no head"},
                        {"role": "developer", "content": "x" * 2100}]),
       st.lists(_messages, min_size=0, max_size=4), st.lists(_edits, min_size=1, max_size=6), st.booleans(),
       st.sampled_from([{}, {"provider": "gemini"}, {"provider": "openai", "system_messages_first": True},
                        {"provider": "hosted_vllm"}]))
def test_measuring_from_where_a_request_differs_is_measuring_it_whole(first, history, edits, tools_given, target):
    """A session's requests measured one after the other with what the previous one left
    (``prefix.measure``): the shape and the comparison with the previous request are those
    of rendering and hashing each request whole, whatever the next request appends, edits,
    truncates, retries or changes in the tools, with every kind of message content."""
    messages = [first, *history]
    tools = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
    seen, previous, sent = None, None, []
    for edit in [("retry",), *edits]:
        if edit[0] == "append":
            messages = [*messages, *copy.deepcopy(edit[1])]
        elif edit[0] == "edit":
            messages = [*messages]
            messages[min(edit[1], len(messages) - 1)] = copy.deepcopy(edit[2])
        elif edit[0] == "truncate":
            messages = messages[: max(1, len(messages) - edit[1])]
        elif edit[0] == "tools":
            tools = [{"type": "function", "function": {"name": edit[1], "parameters": {}}}]
        # A fresh copy per request, as a client sends it (equal objects, never the same ones).
        request = {"model": "m", "messages": copy.deepcopy(messages), "tools": copy.deepcopy(tools)}
        tools_text = "\n".join(json.dumps(t, separators=(",", ":")) for t in tools) if tools_given else None
        # (the leading messages equal to the previous request's: what the incremental path proves)
        same = prefix.leading_equal(request["messages"], sent)
        shape, shape_texts, seen = prefix.measure(request, "chat", target, tools_text, seen, same)
        sent = copy.deepcopy(request["messages"])
        whole, whole_texts = prefix.shape_of(prefix.render(request, "chat", target, tools_text))
        assert shape == whole
        assert (seen is None) == bool(target.get("provider") == "gemini" or target.get("system_messages_first"))
        if previous is not None:
            assert prefix.compare(previous, shape, shape_texts) == prefix.compare(previous, whole, whole_texts)
        previous = whole


def test_a_request_measured_from_an_earlier_one_compares_with_any_previous_shape():
    """Two requests of one session in flight at once: B is measured from the request both
    started from, while A (a shorter retry, or one that edits an earlier message) became the
    session's previous request. B's parts taken over carry no text; comparing B with A gives
    what comparing B measured whole with A gives."""
    head = {"role": "system", "content": "head " * 40}
    turns = [{"role": ("user", "assistant")[i % 2], "content": f"turn {i} " * 30} for i in range(4)]
    tools = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
    start = {"model": "m", "messages": [head, *turns], "tools": tools}
    _, _, seen = prefix.measure(copy.deepcopy(start), "chat", {}, None, None)
    later = {**copy.deepcopy(start), "messages": [head, *turns, {"role": "user", "content": "next"}]}  # B
    shape_b, texts_b, _ = prefix.measure(later, "chat", {}, None, seen, len(start["messages"]))
    whole_b, whole_texts = prefix.shape_of(prefix.render(later, "chat", {}))
    assert shape_b == whole_b and None in texts_b
    edited = [head, turns[0], {**turns[1], "content": "edited " * 30}, *turns[2:]]
    for messages in ([head, *turns[:2]], edited):  # A
        shape_a, _, _ = prefix.measure({**copy.deepcopy(start), "messages": messages}, "chat", {}, None, None)
        assert prefix.compare(shape_a, shape_b, texts_b) == prefix.compare(shape_a, whole_b, whole_texts)
