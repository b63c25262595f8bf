"""``journal.content_hash`` writes its JSON with orjson where the bytes are the json module's:
the digests stored in journals (anchors, traces, orders) must not change with that speed-up."""
from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json

from hypothesis import given, strategies as st

from litellm_prefix.request.journal import content_hash, unmarked


def reference(value) -> str:
    """The definition: sorted-key compact JSON (json module) of the value without its marks."""
    if isinstance(value, str):
        return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    raw = json.dumps(unmarked(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:20]


keys = st.sampled_from(["role", "content", "text", "type", "cache_control", "tool_calls", "name", "é", "a b"]) | st.text()
scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats()
           | st.text())
text_part = st.fixed_dictionaries({"type": st.just("text"), "text": st.text()})
marked_part = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(),
                                     "cache_control": st.just({"type": "ephemeral"})})
values = st.recursive(
    scalars | text_part | marked_part,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(keys, inner, max_size=4)
    | st.fixed_dictionaries({"role": st.just("user"), "content": st.lists(text_part | marked_part, max_size=2)}),
    max_leaves=20,
)


@given(values)
def test_the_same_digest_as_the_json_module(value):
    assert content_hash(value) == reference(value)


@dataclasses.dataclass(frozen=True)
class Segment:
    name: str
    text: str


def test_objects_json_cannot_write_are_written_as_their_str():
    """Dataclasses and datetimes: ``default=str`` as in the json module (orjson would write them itself)."""
    for value in ([Segment("a", "b")], {"at": datetime.datetime(2026, 12, 6, 10, 0)}, {1: "int key"},
                  [1.5e-7, "x"], [float("nan"), float("inf")], {"n": 1e-05}, {"content": [{"type": "text", "text": "one part"}]},
                  {"content": "s", "cache_control": {"type": "ephemeral"}}, ["\ud800 lone surrogate"]):
        assert content_hash(value) == reference(value), value


def test_marks_and_one_text_part_lists_read_as_before():
    plain = {"role": "user", "content": "hello"}
    assert content_hash({"role": "user", "content": [{"type": "text", "text": "hello"}]}) == content_hash(plain)
    assert content_hash({"role": "user", "content": "hello", "cache_control": {"type": "ephemeral"}}) == \
        content_hash(plain)
    assert content_hash({"role": "user", "content": "hello!"}) != content_hash(plain)


def test_a_long_body_with_one_marked_message():
    """Claude Code's body: one message marked among many plain ones (each its own way)."""
    body = [{"role": "user", "content": f"turn {i}"} for i in range(50)]
    body[-1] = {"role": "user", "content": [{"type": "text", "text": "turn 49", "cache_control": {"type": "ephemeral"}}]}
    assert content_hash([["head"], None, body]) == reference([["head"], None, body])
    assert content_hash(body) == content_hash([{"role": "user", "content": f"turn {i}"} for i in range(50)])
