"""The head as sections (issue 12, section 3): parsed once, rewritten section by section,
hashed once, joined once; the bytes are those of the whole-text functions."""
from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings, strategies as st

from harness.realistic import PI_SUFFIX, TOOL_NAMES, install_root, pi_sections, render_pi, shuffled, tool_lines
from litellm_prefix.request import sections as sections_module
from litellm_prefix.request.context import Context
from litellm_prefix.request.journal import content_hash
from litellm_prefix.request.rules.paths import rewrite_text, stabilize_install_paths
from litellm_prefix.request.rules.tools import normalize_tool_order, sort_tools_section
from litellm_prefix.request.sections import (
    JOIN,
    KNOWN,
    KnownTexts,
    SectionedText,
    memo,
    parse_head,
    section_digests,
    text_digest,
)
from litellm_prefix.request.view import View
from litellm_prefix.settings import Settings
from tests.support import examples

ROOTS = [install_root("a"), install_root("b"), "/srv/x/" + PI_SUFFIX, "relative/" + PI_SUFFIX, "/" + PI_SUFFIX]
fast = settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def sectioned_heads(draw) -> str:
    rng = random.Random(draw(st.integers(0, 10_000)))
    sections = pi_sections(target_tokens=300, seed=rng.randint(0, 99), root=draw(st.sampled_from(ROOTS[:3])),
                           tool_order=shuffled(TOOL_NAMES[:8], rng.randint(0, 99)))
    for name in draw(st.lists(st.sampled_from(list(sections)), max_size=4)):  # root mentions anywhere
        root = draw(st.sampled_from(ROOTS))
        where = draw(st.sampled_from(["start", "end", "middle"]))
        mention = draw(st.sampled_from([root, f"({root}/docs)", f"{root}.", f'"{root}"']))
        text = sections[name]
        sections[name] = {"start": f"{mention} {text}", "end": f"{text}\n{mention}",
                          "middle": text.replace(" ", f" {mention} ", 1)}[where]
    if draw(st.booleans()):  # a second <tools> line inside a later section
        sections["skills"] += "\n<tools>\n- zz: later\n- aa: list\n</tools>"
    if draw(st.booleans()):
        sections["plan"] = "1. " + tool_lines(["b", "a"], 1)
    return render_pi(sections)


def _ctx(check: str = "trusted", exists=lambda path: True) -> Context:
    return Context(settings=Settings(path_check=check, stable_path="/srv/pi-home"), path_exists=exists)


def _whole_text(text: str, ctx: Context) -> str:
    return sort_tools_section(rewrite_text(text, ctx, {}))


@fast
@given(sectioned_heads(), st.sampled_from(["trusted", "exists", "absolute"]), st.booleans(), st.booleans())
def test_property_section_rules_give_the_whole_text_bytes(text, check, cold, none_exist):
    # (none_exist: pathCheck exists on a gateway that has none of the roots on its disk)
    ctx = _ctx(check, exists=(lambda path: False) if none_exist else (lambda path: "v23" not in path))
    if cold:
        KNOWN.clear()
    view = View("chat", (text,), None, ())
    for _ in range(2):  # the second time from what the process remembers
        after_paths, _ = stabilize_install_paths(view, ctx)
        after_tools, _ = normalize_tool_order(after_paths, ctx)
        assert after_tools.head == (_whole_text(text, ctx),)
        parsed = parse_head(after_tools.head[0])
        assert parsed is None or JOIN.join(block for _, block in parsed) == after_tools.head[0]


@fast
@given(sectioned_heads(), st.sampled_from(["trusted", "exists", "absolute"]), st.integers(0, 10**6), st.sampled_from("xA\n<"))
def test_property_compacted_heads_give_the_same_bytes_and_tell_texts_apart(text, check, at, char):
    """Every known head held as its sections from its first parse (``COMPACT_CHARS`` 0): the rules
    write the same bytes, a new copy of a head is that head, and a text of the same length that
    differs in one character anywhere is another one."""
    original = sections_module.COMPACT_CHARS
    sections_module.COMPACT_CHARS = 0
    try:
        KNOWN.clear()
        ctx = _ctx(check)
        for _ in range(2):
            copy = "".join(list(text))  # another object each time, as every request brings
            after_tools, _ = normalize_tool_order(stabilize_install_paths(View("chat", (copy,), None, ()), ctx)[0], ctx)
            assert after_tools.head == (_whole_text(text, ctx),)
        entry = KNOWN.entry("".join(list(text)))
        if parse_head(text) is not None:
            assert entry.text is None  # compacted: its sections stand for it
        index = at % len(text)
        changed = text[:index] + char + text[index + 1:]
        assert (KNOWN.entry(changed) is entry) == (changed == text)
    finally:
        sections_module.COMPACT_CHARS = original


def test_a_long_head_is_held_as_its_sections_and_shared_where_a_value_holds_it():
    text = render_pi(pi_sections(target_tokens=20000, root=install_root("b"), tool_order=shuffled(TOOL_NAMES, 4)))
    assert len(text) >= sections_module.COMPACT_CHARS
    KNOWN.clear()
    digests = section_digests(text)
    entry = KNOWN.entry(text)
    assert entry.text is None and entry.sections() is not None  # the head string is not held twice
    copy = "".join(list(text))
    assert KNOWN.entry(copy) is entry and section_digests(copy) is digests  # a new copy: the same memos
    assert memo(copy, "itself", lambda t: t) is copy  # a value that is the text: the caller's copy, not held
    assert memo(text, "itself", lambda t: t) is text
    shared = KNOWN.canonical("".join(list(text)))  # a derived value equal to it: held, and shared from now on
    assert KNOWN.canonical("".join(list(text))) is shared and entry.text is shared


def test_two_section_rules_in_a_row_join_the_head_once():
    text = render_pi(pi_sections(target_tokens=2000, root=install_root("b"), tool_order=shuffled(TOOL_NAMES, 4)))
    ctx = _ctx()
    KNOWN.clear()
    view, _ = stabilize_install_paths(View("chat", (text,), None, ()), ctx)
    assert isinstance(view.segments[0], SectionedText)  # handed on unjoined
    view, _ = normalize_tool_order(view, ctx)
    segment = view.segments[0]
    assert isinstance(segment, SectionedText) and segment._text is None
    head = view.head[0]
    assert view.head[0] is head and segment.text is head  # joined once, when first read
    again, _ = normalize_tool_order(stabilize_install_paths(View("chat", (text,), None, ()), ctx)[0], ctx)
    assert again.head[0] is head  # a head seen before: no join, no rewrite


def test_known_texts_tell_apart_texts_that_share_the_sample():
    known = KnownTexts(max_chars=10_000)
    a = "x" * 40 + "A" + "y" * 40
    b = "x" * 40 + "B" + "y" * 40
    assert known.entry(a) is not known.entry(b)
    assert known.entry("".join(["x" * 40, "A", "y" * 40])) is known.entry(a)  # equal text, another object
    assert text_digest(a) == content_hash(a) and text_digest(b) == content_hash(b)


def test_known_texts_stay_within_their_bound():
    known = KnownTexts(max_chars=1_000)
    for i in range(100):
        known.entry(f"{i:04d}" + "z" * 96)
    assert known._chars <= 1_000


def test_view_replace_keeps_head_and_segments_apart():
    view = View("chat", ("a",), None, ())
    changed = view.replace(segments=(SectionedText((("preamble", "p"), ("cwd", "<cwd>\nx\n</cwd>"))),))
    assert changed.head == ("p\n\n<cwd>\nx\n</cwd>",)
    assert changed.replace(body=({"role": "user", "content": "u"},)).head == changed.head
    assert changed.replace(head=("b",)).segments == ("b",)
    assert changed == View("chat", ("p\n\n<cwd>\nx\n</cwd>",), None, ())


def test_a_written_request_leaves_no_joined_head_behind():
    """After a request is written, what the process keeps of its head (the memos, the stream
    record) is sections, not a second joined copy: the joined texts and the strings held by
    identity for the request's lookups are let go; the next request writes the same bytes."""
    from harness.sessions import PiClient
    from litellm_prefix.request.core import Stabilizer

    KNOWN.clear()
    stabilizer = Stabilizer(Settings(path_check="trusted", stable_path="/srv/pi-home"))
    client = PiClient(session="joined", tokens=6000)
    client.user("start")
    heads = []
    for turn in range(3):
        out = stabilizer.stabilize_sync(client.request())
        heads.append(out["messages"][0]["content"])
        client.assistant("ok")
        client.user(f"next {turn}")
    assert "/srv/pi-home" in heads[0]  # the install-path rule rewrote the head: a SectionedText
    assert heads[0] == heads[1] == heads[2]
    kept = [segment for record in stabilizer.streams._records.values() for segment in (record.result[0] or ())]
    assert any(isinstance(segment, SectionedText) for segment in kept)  # the record keeps the sections
    assert all(segment._text is None for segment in kept if isinstance(segment, SectionedText))
    assert not sections_module._JOINED and not KNOWN._recent
    assert stabilizer.stats["incremental_appended"] >= 1
