"""Learned volatile lines in the value formats real status blocks use (issue 24, item 8).

A number with thousands separators (987 -> 1,204), a 12-hour clock crossing noon or midnight
(11:58 PM -> 12:03 AM), weekday and month names of a date (Monday -> Tuesday, Nov -> Dec):
such a line is learned like a line whose digits move. A word that is no part of a date or
number still passes (Mode: fast -> slow, "May I", "March on"), and so does any other changed
character of a learned line.
"""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings, strategies as st

from litellm_prefix.request.journal import Journal, LearnedLine, LearnState
from litellm_prefix.request.rules.volatile import _hex, candidate_lines, is_nonce_change, shape_key, shape_of
from tests.support import examples
from tests.unit.request.rules.test_learned_volatile import PREAMBLE, _stabilizer, expected, run

T0 = datetime(2026, 11, 30, 23, 50, 0, tzinfo=UTC)


def status_head(at: datetime, files: int, mode: str = "build") -> str:
    """An agent's status block: a 12-hour clock with weekday and month names, a grouped counter."""
    return (PREAMBLE + "\n## Status\n"
            f"Now: {at:%A}, {at:%b} {at.day} {at:%Y} {at:%I:%M %p}\n"
            f"Indexed files: {files:,}\n"
            f"Mode: {mode}\n\nAnswer in English.")


def test_a_status_block_across_midnight_and_the_month_end_sends_one_head():
    moments = [T0 + timedelta(minutes=5 * turn) for turn in range(6)]  # Monday Nov 30 11:50 PM -> Tuesday Dec 1
    counts = [987, 987, 1204, 1204, 1310, 12_345]
    heads = [status_head(at, n) for at, n in zip(moments, counts)]
    assert "Monday, Nov 30 2026 11:50 PM" in heads[0] and "Tuesday, Dec 1 2026 12:00 AM" in heads[2]
    st_ = _stabilizer()
    outputs = run(st_, heads, [at.timestamp() for at in moments])

    def line(at):
        return f"Now: {at:%A}, {at:%b} {at.day} {at:%Y} {at:%I:%M %p}"

    notes = {1: [line(moments[1])],  # the clock's first change
             2: [line(moments[2]),  # the date changed (midnight, a new month): at once
                 "Indexed files: 1,204"]}  # the counter's first change (987 -> 1,204); later ones wait the hour
    assert outputs == expected(heads[0], 6, notes)
    assert st_.stats["drift"] == 0


def test_noon_crossing_and_a_pi_style_clock():
    moments = [datetime(2026, 12, 3, 11, 58, tzinfo=UTC) + timedelta(minutes=5 * t) for t in range(3)]
    heads = [PREAMBLE + f"Current time: {at:%I:%M:%S}\u202f{at:%p} UTC\nEnd." for at in moments]
    outputs = run(_stabilizer(), heads, [at.timestamp() for at in moments], session="noon")
    assert {out[0]["content"] for out in outputs} == {heads[0]}


def test_words_that_are_no_part_of_a_date_pass():
    for old, new in [("Mode: fast", "Mode: slow"), ("May I ask 3 things", "Can I ask 3 things"),
                     ("March on with 2 teams", "Walk on with 2 teams"), ("Sun Microsystems 3", "Sat Microsystems 3"),
                     ("Monday meeting notes: 4 items", "Monday planning notes: 4 items"),
                     ("Built at 11:58 PM", "Built at 11:58 PT"), ("Rows: 1,204", "Rows: 1.204")]:
        assert shape_of(old) != shape_of(new), (old, new)
        heads = [PREAMBLE + f"{text}\nBuild 4\nEnd." for text in (old, new, new)]
        outputs = run(_stabilizer(), heads, [0.0, 1.0, 2.0], session=f"w-{old}")
        assert new in outputs[1][0]["content"] and new in outputs[2][0]["content"]


def test_value_formats_have_the_same_shape():
    for old, new in [("Rows: 987", "Rows: 1,204"), ("Rows: 1,204", "Rows: 12,345,678"),
                     ("Rows: 1\u202f204", "Rows: 987"), ("at 11:58 PM", "at 12:03 AM"), ("at 11:58pm", "at 12:03am"),
                     ("Today is Monday", "Today is Tuesday"), ("Tue Nov 30 2026", "Wed Dec 01 2026"),
                     ("Thursday, December 3, 2026", "Friday, January 15, 2027"), ("Month: Nov 2026", "Month: Dec 2026")]:
        assert shape_of(old) == shape_of(new), (old, new)
        assert not is_nonce_change(old, new)
    assert shape_of("at 11:58 PM") != shape_of("at 11:58 pm")  # the format is part of the shape
    assert shape_of("Today is Monday") != shape_of("Today is March 3")  # a weekday is not a month
    assert not is_nonce_change("at 12:03 PM", "at 12:03 AM")
    # a line with a full weekday name and no digit is a candidate; other digit-free lines are not
    assert list(candidate_lines(("Today is Monday\nMode: fast\nMay I",)).values()) == ["Today is Monday"]


def test_a_journal_of_the_previous_version_loads_and_its_changed_shapes_are_learned_again():
    """The previous version blanked only digit runs: ``Rows: 1,204`` had the shape ``Rows: \\0,\\0``.
    Its journal loads; a line whose shape is the same now stays pinned; a line whose shape changed
    meaning (a grouped number) is no longer found under its old key and is learned again."""
    def head(rows, n):
        return PREAMBLE + f"Rows: {rows}\nMessages: {n}\nEnd."

    old_rows_key = _hex("Rows: \x00,\x00", 12)
    assert old_rows_key != shape_key("Rows: 1,204")
    assert shape_key("Messages: 3") == _hex("Messages: \x00", 12)  # unchanged shapes keep their keys
    journal = Journal(learned=LearnState(learned=(
        LearnedLine(old_rows_key, "Rows: 1,204", "Rows: 1,300", "Rows: 1,300", 100),
        LearnedLine(shape_key("Messages: 3"), "Messages: 3", "Messages: 5", "Messages: 5", 100))))
    raw = journal.encoded()
    assert Journal.decoded(raw) == journal
    st_ = _stabilizer()
    st_.store.restore({"k": (1, raw, ())}, {})
    # run a session with that state: stored under the session's key
    data = {"model": "m", "messages": [{"role": "system", "content": head("1,400", 6)},
                                       {"role": "user", "content": "go"}], "litellm_session_id": "old"}
    st_.clock = lambda: 200.0
    st_.stabilize_sync(json.loads(json.dumps(data)))  # creates the session's journal
    (key,) = [k for k in st_.store.snapshot()[0] if k != "k"]
    st_.store.restore({key: (1, raw, ())}, {})
    outs = []
    for rows, n in [("1,400", 6), ("1,500", 7), ("1,600", 8)]:
        data["messages"][0]["content"] = head(rows, n)
        outs.append(st_.stabilize_sync(json.loads(json.dumps(data)))["messages"][0]["content"])
    assert all("Messages: 3\n" in out for out in outs)  # the old pin holds
    assert "Rows: 1,400" in outs[0] and "Rows: 1,400" in outs[2]  # passed once, then learned again


# -- properties ---------------------------------------------------------------------------

WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
SLOTS = {
    "weekday": st.sampled_from(WEEKDAYS),
    "date": st.builds(lambda m, d, y: f"{m} {d}, {y}", st.sampled_from(MONTHS), st.integers(1, 28), st.integers(2020, 2030)),
    "clock": st.builds(lambda h, m, p: f"{h}:{m:02d} {p}", st.integers(1, 12), st.integers(0, 59), st.sampled_from(["AM", "PM"])),
    "grouped": st.integers(0, 10**9).map(lambda n: f"{n:,}"),
}
TEMPLATES = ["Status at {clock} on {weekday}: {grouped} files indexed",
             "Session started {date} ({weekday}), {grouped} tokens used",
             "Next sync: {weekday}, {date} at {clock}"]


@st.composite
def value_changes(draw):
    template = draw(st.sampled_from(TEMPLATES))
    def values():
        return {name: draw(strategy) for name, strategy in SLOTS.items()}

    return template, values(), values()


props = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@props
@given(value_changes())
def test_a_line_that_differs_only_in_value_tokens_is_learned(case):
    template, first, second = case
    old, new = template.format(**first), template.format(**second)
    heads = [PREAMBLE + f"{old}\nEnd.", PREAMBLE + f"{new}\nEnd.", PREAMBLE + f"{new}\nEnd."]
    outputs = run(_stabilizer(), heads, [0.0, 1.0, 2.0], session="prop-learn")
    if old == new:
        return
    assert outputs == expected(heads[0], 3, {1: [new]})  # pinned, its first change noted at once


@props
@given(value_changes(), st.data())
def test_any_other_changed_character_passes(case, data):
    template, first, second = case
    old = template.format(**first)
    # change one character of the template's own text (never inside a value)
    text = template
    positions = [i for i in range(len(text)) if not _inside_slot(text, i)]
    at = data.draw(st.sampled_from(positions))
    replacement = data.draw(st.sampled_from([c for c in "xZ7 ,:-" if c != text[at]]))
    edited = text[:at] + replacement + text[at + 1:]
    changed = edited.format(**second)
    heads = [PREAMBLE + f"{old}\nEnd.", PREAMBLE + f"{changed}\nEnd."]
    outputs = run(_stabilizer(), heads, [0.0, 1.0], session="prop-pass")
    assert changed in outputs[1][0]["content"].split("\n")  # the client's line, as sent


def _inside_slot(template: str, index: int) -> bool:
    depth = 0
    for i, char in enumerate(template):
        if char == "{":
            depth += 1
        if i == index:
            return depth > 0 or char in "{}"
        if char == "}":
            depth -= 1
    return False
