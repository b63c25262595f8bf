"""Learned volatile lines: head lines of agents no preset knows that change only in their digits.

Exact bytes for whole sessions (one head upstream, each note where and when it is due), and
properties: a genuine word change always reaches the model; learned pins are the same on
every replica and after a restart; determinism and idempotence hold.
"""
from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from litellm_prefix.fleet.store import MemoryStore
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.journal import Journal
from litellm_prefix.request.rules.volatile import (
    MAX_TRACKED_LINES,
    candidate_lines,
    is_nonce_change,
    learned_note,
    shape_of,
)
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings
from tests.support import examples

OPENAI = Target(provider="openai")
T0 = datetime(2026, 12, 3, 8, 0, 0, tzinfo=UTC)

PREAMBLE = (
    "You are Orbit, an autonomous coding agent. You work in the user's repository and keep changes small.\n"
    "Always run the tests before you report success. Never commit secrets.\n\n"
    "## Tools\nUse `shell` for commands, `edit` for files, `search` to find code. Prefer `search` over grep.\n\n"
    "## Project\nThe project is a Python 3.11 web shop (FastAPI, PostgreSQL 16). Tests: `make test` (about 40 s).\n"
)


def orbit_head(now: datetime, messages: int, *, mode: str = "build", extra: str = "") -> str:
    """An unknown agent that re-renders its prompt every request with a seconds clock and a counter."""
    return (PREAMBLE + "\n## Session\n"
            f"Last recompiled: {now:%Y-%m-%d %H:%M:%S} UTC\n"
            f"Messages in conversation: {messages}\n"
            f"Mode: {mode}\n" + extra +
            "\nAnswer in English.")


def _stabilizer(store: MemoryStore | None = None, **kwargs) -> Stabilizer:
    kwargs.setdefault("path_check", "absolute")
    return Stabilizer(Settings(**kwargs), store=store)


def run(st: Stabilizer, heads: list[str], times: list[float], session: str = "orbit-1",
        target: Target = OPENAI) -> list[list[dict]]:
    body: list[dict] = []
    outputs = []
    for turn, (head, at) in enumerate(zip(heads, times)):
        body.append({"role": "user", "content": f"step {turn}: continue with the cart page"})
        st.clock = lambda at=at: at
        data = {"model": "m", "messages": [{"role": "system", "content": head}, *copy.deepcopy(body)],
                "litellm_session_id": session}
        outputs.append(st.stabilize_sync(data, target=target)["messages"])
        body.append({"role": "assistant", "content": f"Done with step {turn}."})
    return outputs


def expected(head: str, turns: int, notes: dict[int, list[str]]) -> list[list[dict]]:
    out, body = [], []
    for turn in range(turns):
        body.append({"role": "user", "content": f"step {turn}: continue with the cart page"})
        body.extend({"role": "system", "content": learned_note(line)} for line in notes.get(turn, ()))
        out.append([{"role": "system", "content": head}, *copy.deepcopy(body)])
        body.append({"role": "assistant", "content": f"Done with step {turn}."})
    return out


def clock_line(at: datetime) -> str:
    return f"Last recompiled: {at:%Y-%m-%d %H:%M:%S} UTC"


def test_seconds_clock_and_message_counter_over_twenty_turns():
    """Turn 1: both lines learned, each first change noted at once. Then at most one note per line
    per hour: turn 13 is the first turn an hour after turn 1's notes. The head upstream never moves."""
    moments = [T0 + timedelta(seconds=300 * turn + 7 * turn) for turn in range(20)]
    heads = [orbit_head(at, 2 * turn + 1) for turn, at in enumerate(moments)]
    st = _stabilizer()
    outputs = run(st, heads, [at.timestamp() for at in moments])
    assert (moments[13] - moments[1]).total_seconds() >= 3600 > (moments[12] - moments[1]).total_seconds()
    notes = {1: [clock_line(moments[1]), "Messages in conversation: 3"],
             13: [clock_line(moments[13]), "Messages in conversation: 27"]}
    assert outputs == expected(heads[0], 20, notes)
    assert {out[0]["content"] for out in outputs} == {heads[0]}
    for earlier, later in zip(outputs, outputs[1:]):
        assert later[: len(earlier)] == earlier
    assert st.stats["drift"] == 0


def test_note_interval_zero_notes_every_change():
    moments = [T0 + timedelta(seconds=61 * turn) for turn in range(5)]
    heads = [orbit_head(at, 4) for at in moments]  # only the clock moves
    st = _stabilizer(learned_volatile_note_seconds=0)
    outputs = run(st, heads, [at.timestamp() for at in moments])
    assert outputs == expected(heads[0], 5, {turn: [clock_line(moments[turn])] for turn in range(1, 5)})


def test_a_date_change_in_a_learned_line_is_noted_at_once():
    start = datetime(2026, 12, 3, 23, 50, 0, tzinfo=UTC)
    moments = [start + timedelta(seconds=240 * turn) for turn in range(6)]  # midnight between turns 2 and 3
    heads = [orbit_head(at, 9) for at in moments]
    st = _stabilizer()
    outputs = run(st, heads, [at.timestamp() for at in moments])
    assert moments[2].day == 3 and moments[3].day == 4
    assert outputs == expected(heads[0], 6, {1: [clock_line(moments[1])], 3: [clock_line(moments[3])]})
    assert st.stats["drift"] == 0


def test_a_nonce_line_is_pinned_and_never_noted():
    nonces = ["7f3a9c21e4", "0b81d6aa93", "c4e2f10a7b", "9d0c3be5f1", "1a2b3c4d5e"]
    traces = ["550e8400-e29b-41d4-a716-446655440000", "6fa459ea-ee8a-3ca4-894e-db77e160355e",
              "16fd2706-8baf-433b-82eb-8c7fada847da", "886313e1-3b8a-5372-9b90-0c9aee199e5d",
              "a8098c1a-f86e-11da-bd1a-00112fc6b2a5"]
    heads = [orbit_head(T0, 1, extra=f"Request id: {n}\nTrace: {t}\n") for n, t in zip(nonces, traces)]
    st = _stabilizer()
    outputs = run(st, heads, [T0.timestamp() + 60 * i for i in range(5)])
    assert outputs == expected(heads[0], 5, {})
    assert st.stats["drift"] == 0


def test_a_one_off_numeric_edit_reaches_the_model_at_once():
    heads = [orbit_head(T0, 1, extra=f"Max file size: {100 if turn < 3 else 200} KB\n") for turn in range(6)]
    st = _stabilizer()
    outputs = run(st, heads, [T0.timestamp() + turn for turn in range(6)])
    assert outputs == expected(heads[0], 6, {3: ["Max file size: 200 KB"]})


def test_a_word_change_passes_also_in_a_learned_line():
    heads = [orbit_head(T0, turn, mode="plan" if turn < 4 else "build") for turn in range(6)]
    st = _stabilizer()
    outputs = run(st, heads, [T0.timestamp() + turn for turn in range(6)])
    assert outputs[3][0]["content"] == heads[0]  # the counter is pinned
    assert "Mode: build" in outputs[4][0]["content"]  # the word change reaches the model on its turn
    assert st.stats["drift"] == 1
    # The learned counter line itself changes a word: it passes with the client's current digits.
    heads = [PREAMBLE + f"Budget: {9000 - turn} tokens left in {'plan' if turn < 3 else 'build'} mode" for turn in range(5)]
    st = _stabilizer()
    outputs = run(st, heads, [T0.timestamp()] * 5, session="budget")
    assert outputs[2][0]["content"] == heads[0]
    assert outputs[3][0]["content"] == heads[3]  # the word change passes, with the client's digits
    # The changed line is a new line: its next digit change is learned (pinned, noted at once).
    assert outputs[4][0]["content"] == heads[3]
    assert outputs[4][-1] == {"role": "system", "content": learned_note("Budget: 8996 tokens left in build mode")}


@pytest.mark.parametrize("joined", [False, True], ids=["own-block", "one-string"])
@pytest.mark.parametrize("exclude", [None, [r"^Build id: "]], ids=["default", "operator-list"])
def test_claude_code_billing_block_is_never_learned(exclude, joined):
    """Anthropic's own API must receive the attribution block exactly as sent (cch is new every request):
    as its own system block (set aside by the billing rule) and as the first line of one system
    string (where only the profile's never-learned line keeps the learned rule off it), also where
    the operator lists lines of their own in learnedVolatileExclude."""
    st = _stabilizer() if exclude is None else _stabilizer(learned_volatile_exclude=exclude)
    body: list[dict] = []
    for turn, cch in enumerate(["3f2a1", "9c0de", "b7714", "0e5a2"]):
        body.append({"role": "user", "content": [{"type": "text", "text": f"turn {turn}"}]})
        billing = f"x-anthropic-billing-header: cc_version=2.1.36.e41; cc_entrypoint=cli; cch={cch};"
        identity = "You are Claude Code, Anthropic's official CLI for Claude."
        system = (f"{billing}\n{identity}" if joined else
                  [{"type": "text", "text": billing}, {"type": "text", "text": identity}])
        data = {"model": "claude-sonnet-4-5", "max_tokens": 8000, "system": copy.deepcopy(system),
                "messages": copy.deepcopy(body), "litellm_session_id": "cc-billing"}
        out = st.stabilize_sync(data, "anthropic_messages", target=Target(provider="anthropic"))
        assert out["system"] == system
        body.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})


def test_at_most_max_lines_are_learned():
    moments = [T0 + timedelta(seconds=30 * turn) for turn in range(4)]
    heads = [orbit_head(at, turn) for turn, at in enumerate(moments)]
    st = _stabilizer(learned_volatile_max_lines=1)
    outputs = run(st, heads, [at.timestamp() for at in moments])
    for turn, out in enumerate(outputs):
        assert clock_line(moments[0]) in out[0]["content"]  # the first line in head order is learned
        assert f"Messages in conversation: {turn}\n" in out[0]["content"]  # the second passes
    assert st.stats["drift"] == 3


def test_off_switch():
    moments = [T0 + timedelta(seconds=30 * turn) for turn in range(3)]
    heads = [orbit_head(at, turn) for turn, at in enumerate(moments)]
    st = _stabilizer(learned_volatile=False)
    outputs = run(st, heads, [at.timestamp() for at in moments])
    assert [out[0]["content"] for out in outputs] == heads


def test_compaction_keeps_the_pin_and_tells_the_current_value_again():
    moments = [T0 + timedelta(seconds=30 * turn) for turn in range(6)]
    st = _stabilizer()
    st.clock = lambda: T0.timestamp()
    body: list[dict] = []
    for turn in range(6):
        if turn == 4:
            body = [{"role": "user", "content": "Summary of the conversation so far: cart page done."}]  # compacted
        body.append({"role": "user", "content": f"step {turn}"})
        data = {"model": "m", "messages": [{"role": "system", "content": orbit_head(moments[turn], 5)},
                                           *copy.deepcopy(body)], "litellm_session_id": "compacting"}
        out = st.stabilize_sync(data, target=OPENAI)["messages"]
        assert out[0]["content"] == orbit_head(moments[0], 5)  # the head never moves, not even here
        if turn == 4:  # the old note went with the compacted history: the current value is told again
            assert out[1:] == [*body, {"role": "system", "content": learned_note(clock_line(moments[4]))}]
        if turn == 5:  # and kept in place; the next change waits for the hour
            assert out[1:] == [*body[:2], {"role": "system", "content": learned_note(clock_line(moments[4]))},
                               *body[2:]]
        body.append({"role": "assistant", "content": "ok"})


def test_evicted_line_text_pins_the_current_value():
    store = MemoryStore(100, 3600)
    st = _stabilizer(store=store)
    moments = [T0 + timedelta(seconds=30 * turn) for turn in range(4)]
    heads = [orbit_head(at, 1) for at in moments]
    body: list[dict] = []
    outs = []
    for turn in range(4):
        if turn == 1:
            evicted = MemoryStore(100, 3600)  # the blob space lost the old line texts (LRU eviction, Redis TTL)
            evicted.restore(store.snapshot()[0], {})
            st.store = st.local_store = evicted
        body.append({"role": "user", "content": f"step {turn}"})
        st.clock = lambda turn=turn: moments[turn].timestamp()
        outs.append(st.stabilize_sync({"model": "m", "messages": [{"role": "system", "content": heads[turn]},
                                                                  *copy.deepcopy(body)], "litellm_session_id": "ev"},
                                      target=OPENAI)["messages"][0]["content"])
        body.append({"role": "assistant", "content": "ok"})
    assert outs == [heads[0], heads[1], heads[1], heads[1]]  # the head moves once, then stays


def test_journal_stays_bounded_on_a_head_full_of_numbers():
    names = ["".join(chr(ord("g") + int(d)) for d in str(i)) for i in range(3000)]  # distinct, digit-free
    head = PREAMBLE + "\n".join(f"- {name} row: price {i * 3} cents, stock {i % 7}" for i, name in enumerate(names))
    st = _stabilizer(store=MemoryStore(10, 3600))
    st.stabilize_sync({"model": "m", "messages": [{"role": "system", "content": head}, {"role": "user", "content": "hi"}],
                       "litellm_session_id": "big"}, target=OPENAI)
    (raw,) = [entry[1] for entry in st.store.snapshot()[0].values()]
    assert len(json.loads(raw)["learned"]["lines"]) == MAX_TRACKED_LINES * 28
    assert len(raw) < 20_000


def test_shapes_and_nonce_classification():
    assert shape_of("Uptime 12:03:59, build 4f9a1c2, id 550e8400-e29b-41d4-a716-446655440000") == \
        "Uptime \x00:\x00:\x00, build \x00, id \x00"
    assert shape_of("decade facade 12") == "decade facade \x00"  # hex-letter words are words
    assert is_nonce_change("cch=3f2a1;", "cch=9c0de;")
    assert not is_nonce_change("count 11", "count 12")
    assert not is_nonce_change("req 3f2a1c on 2026-12-03", "req 9c0de1 on 2026-12-03")  # a date in it
    assert list(candidate_lines(("a 1\nb 2\na 3\nc",)).values()) == ["b 2"]  # repeated shapes out


# -- properties -------------------------------------------------------------------------

FRESH = iter(range(10**9))
LABELS = ["Uptime", "Queue depth", "Open files", "Build", "Window", "Cache entries", "Heap", "Retries"]


@st.composite
def sessions(draw):
    """An unknown agent's session: labelled lines whose digits move, nonces, and word edits."""
    n_lines = draw(st.integers(2, 6))
    labels = draw(st.permutations(LABELS))[:n_lines]
    values = [draw(st.integers(0, 10**6)) for _ in labels]
    words = ["steady"] * n_lines
    nonce = draw(st.text(alphabet="0123456789abcdef", min_size=6, max_size=10).filter(lambda s: any(c.isdigit() for c in s)))
    heads, times, word_turns = [], [], {}
    at = T0.timestamp()
    for turn in range(draw(st.integers(2, 7))):
        for i in range(n_lines):
            kind = draw(st.sampled_from(["same", "same", "digits", "word"]))
            if kind == "digits":
                values[i] = draw(st.integers(0, 10**6))
            elif kind == "word" and turn > 0:
                words[i] = "zq" + "".join(chr(ord("g") + int(d)) for d in str(next(FRESH)))  # no digit in it
                word_turns.setdefault(turn, []).append(i)
        if draw(st.booleans()):
            nonce = draw(st.text(alphabet="0123456789abcdef", min_size=6, max_size=10).filter(
                lambda s: any(c.isdigit() for c in s)))
        lines = [f"{label}: {value} ({word})" for label, value, word in zip(labels, values, words)]
        heads.append(PREAMBLE + "\n".join(lines) + f"\nNonce: {nonce}\nEnd of context.")
        times.append(at)
        at += draw(st.integers(0, 5000))
    return heads, times, word_turns, labels


def _lines(head: str) -> set[str]:
    return set(head.split("\n"))


props = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@props
@given(sessions())
def test_a_genuine_word_change_always_reaches_the_model(case):
    heads, times, word_turns, labels = case
    outputs = run(_stabilizer(), heads, times, session="prop-words")
    for turn, changed in word_turns.items():
        sent = _lines(outputs[turn][0]["content"])
        for i in changed:
            client_line = next(line for line in heads[turn].split("\n") if line.startswith(f"{labels[i]}: "))
            assert client_line in sent, (turn, client_line)


@props
@given(sessions())
def test_learned_pins_are_the_same_on_every_replica(case):
    heads, times, _, _ = case
    alone = run(_stabilizer(), heads, times, session="prop-replica")
    store = MemoryStore(100, 3600)
    replicas = [_stabilizer(store=store), _stabilizer(store=store)]
    shared = []
    for turn in range(len(heads)):  # requests alternate between two replicas sharing the store
        body_run = run_prefix(replicas[turn % 2], heads, times, turn, session="prop-replica")
        shared.append(body_run)
    assert shared == alone


def run_prefix(st: Stabilizer, heads, times, turn, session):
    """Request ``turn`` of the session (the body as the client holds it then) through ``st``."""
    body: list[dict] = []
    for t in range(turn + 1):
        body.append({"role": "user", "content": f"step {t}: continue with the cart page"})
        if t < turn:
            body.append({"role": "assistant", "content": f"Done with step {t}."})
    st.clock = lambda: times[turn]
    data = {"model": "m", "messages": [{"role": "system", "content": heads[turn]}, *copy.deepcopy(body)],
            "litellm_session_id": session}
    return st.stabilize_sync(data, target=OPENAI)["messages"]


def _restarted(store: MemoryStore) -> MemoryStore:
    """A new process: every journal serialised and read back, the blob space carried over."""
    fresh = MemoryStore(100, 3600)
    journals, texts = store.snapshot()
    for key, (_, raw, refs) in journals.items():
        journal = Journal.from_json(json.loads(raw))
        assert Journal.from_json(json.loads(journal.encoded())) == journal
        journals[key] = (1, journal.encoded(), refs)
    fresh.restore(journals, texts)
    return fresh


@props
@given(sessions(), st.data())
def test_learned_pins_survive_a_restart(case, data):
    heads, times, _, _ = case
    alone = run(_stabilizer(), heads, times, session="prop-restart")
    cut = data.draw(st.integers(1, len(heads) - 1))
    store = MemoryStore(100, 3600)
    first = _stabilizer(store=store)
    outputs = [run_prefix(first, heads, times, turn, "prop-restart") for turn in range(cut)]
    second = _stabilizer(store=_restarted(store))
    outputs += [run_prefix(second, heads, times, turn, "prop-restart") for turn in range(cut, len(heads))]
    assert outputs == alone


@props
@given(sessions())
def test_deterministic_idempotent_and_prefix_monotone(case):
    heads, times, word_turns, _ = case
    once = run(_stabilizer(), heads, times, session="prop-det")
    assert run(_stabilizer(), heads, times, session="prop-det") == once
    # Stabilizing the stabilized session again changes nothing (one head, the notes kept in place).
    again = _stabilizer()
    for turn, messages in enumerate(once):
        again.clock = lambda turn=turn: times[turn]
        out = again.stabilize_sync({"model": "m", "messages": copy.deepcopy(messages), "litellm_session_id": "p2"},
                                   target=OPENAI)
        assert out["messages"] == messages
    if not word_turns:
        assert len({out[0]["content"] for out in once}) == 1
        for earlier, later in zip(once, once[1:]):
            assert later[: len(earlier)] == earlier


# -- end to end -------------------------------------------------------------------------


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(st.text(max_size=40), st.sampled_from(["v1.2.3", "é 7", "\u0663", "x" * 1001 + "1", "\r9"])),
                max_size=30))
def test_candidate_lines_of_a_segment_are_its_short_lines_holding_an_ascii_digit(lines):
    from litellm_prefix.request.rules.volatile import MAX_LINE_CHARS, _digit_lines, shape_key
    from litellm_prefix.request.sections import JOIN

    segment = "\n".join(lines)
    # also as a pi head: the same lines in sections (each section read on its own)
    sectioned = JOIN.join(f"<s{i}>\n{line}\n</s{i}>" for i, line in enumerate(lines) if "<" not in line)
    for text in (segment, sectioned):
        expected = tuple((shape_key(line), line) for line in text.split("\n")
                         if len(line) <= MAX_LINE_CHARS and re.search(r"[0-9]", line))
        assert _digit_lines(text) == expected


def test_journal_text_with_a_lone_surrogate_round_trips():
    """orjson refuses a lone surrogate (valid JSON, so possible in a prompt): the stdlib writes and reads it."""
    from litellm_prefix.request.journal import MemoryRecord, Note

    journal = Journal(memory=MemoryRecord("<memory>", "keep \ud800 this \u2028 \x1f ünïcode"),
                      notes=(Note(3, "a" * 20, "memory", "note \udfff"),), requests=4)
    text = journal.encoded()
    assert text == json.dumps(journal.to_json(), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    assert Journal.decoded(text) == journal
    plain = Journal(memory=MemoryRecord("<memory>", "ünïcode \u2028 \x1f \"quoted\" \\ / tab\t"), requests=2)
    assert plain.encoded() == json.dumps(plain.to_json(), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    assert Journal.decoded(plain.encoded()) == plain
