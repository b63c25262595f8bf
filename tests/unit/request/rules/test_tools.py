"""Tool-order rule: tools[] in every shape, <tools> lines, cache_control marks."""
from __future__ import annotations

import copy

from hypothesis import given, settings, strategies as st

from harness.realistic import TOOL_NAMES, anthropic_tools, openai_tools, pi_system_prompt, responses_tools, shuffled
from litellm_prefix.request.rules.tools import normalize_tool_order, sort_tools, sort_tools_section
from litellm_prefix.request.view import View, tool_name
from tests.support import examples


def _names(tools):
    return [tool_name(t) for t in tools]


def test_openai_anthropic_and_responses_tools_are_sorted_by_name():
    for build in (openai_tools, anthropic_tools, responses_tools):
        a = sort_tools(tuple(build(shuffled(TOOL_NAMES, 1))))
        b = sort_tools(tuple(build(shuffled(TOOL_NAMES, 2))))
        assert _names(a) == sorted(TOOL_NAMES)
        assert list(a) == list(b)


def test_cache_control_moves_to_the_new_last_tool():
    tools = anthropic_tools(shuffled(TOOL_NAMES, 5))
    tools[-1] = {**tools[-1], "cache_control": {"type": "ephemeral"}}
    original_last = copy.deepcopy(tools[-1])
    out = sort_tools(tuple(tools))
    assert out[-1]["cache_control"] == {"type": "ephemeral"}
    assert [t for t in out if "cache_control" in t] == [out[-1]]
    assert tools[-1] == original_last  # client objects untouched
    assert sort_tools(out) is out  # idempotent


def test_cache_control_elsewhere_is_left_where_it_is():
    tools = anthropic_tools(["b", "a", "c"])
    tools[0] = {**tools[0], "cache_control": {"type": "ephemeral"}}
    out = sort_tools(tuple(tools))
    assert [("cache_control" in t) for t in out] == [False, True, False]


def test_builtin_tools_without_names_sort_by_type_deterministically():
    tools = ({"type": "web_search"}, {"type": "function", "name": "a"}, {"type": "code_interpreter"})
    assert _names(sort_tools(tools)) == ["a", "code_interpreter", "web_search"]


def test_tools_section_lines_are_sorted_and_other_lines_stay():
    a = pi_system_prompt(tool_order=shuffled(TOOL_NAMES, 3))
    b = pi_system_prompt(tool_order=shuffled(TOOL_NAMES, 4))
    assert a != b
    sa, sb = sort_tools_section(a), sort_tools_section(b)
    assert sa == sb
    section = sa.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].split("\n")
    assert section[0] == "Available tools:"
    assert section[-1] == "Use tools instead of guessing."
    entries = [line[2:].split(":")[0] for line in section if line.startswith("- ")]
    assert entries == sorted(TOOL_NAMES)
    assert sort_tools_section(sa) == sa


def test_continuation_lines_move_with_their_entry_and_runs_stay_in_their_groups():
    text = "<tools>\nBuilt-in:\n- write: w\n  long help for write\n- read: r\n\nExtensions:\n- zeta: z\n- alpha: a\n</tools>"
    assert sort_tools_section(text) == (
        "<tools>\nBuilt-in:\n- read: r\n- write: w\n  long help for write\n\nExtensions:\n- alpha: a\n- zeta: z\n</tools>"
    )


def test_tool_order_keep_leaves_everything(ctx):
    view = View("chat", (pi_system_prompt(tool_order=["b", "a"]),), tuple(openai_tools(["b", "a"])), ())
    out, events = normalize_tool_order(view, ctx(tool_order="keep"))
    assert out is view and events == []


def test_rule_reports_what_it_sorted(ctx):
    view = View("chat", (pi_system_prompt(tool_order=["b", "a"]),), tuple(openai_tools(["b", "a"])), ())
    out, events = normalize_tool_order(view, ctx(tool_order="sort"))
    assert {e.data["where"] for e in events} == {"tools section", "tools[]"}
    assert normalize_tool_order(out, ctx(tool_order="sort")) == (out, [])


def _slow_order(tools):
    """What the rule gives without the order remembered by the tools' text."""
    from litellm_prefix.caches import compact_json
    from litellm_prefix.request.drift import _unmarked_tool_json

    ordered = sort_tools(tuple(tools))
    return list(ordered), "[" + ",".join(_unmarked_tool_json(t, compact_json) for t in ordered) + "]"


tool_lists = st.lists(
    st.fixed_dictionaries(
        {"type": st.just("function"),
         "function": st.fixed_dictionaries({"name": st.sampled_from(["read", "bash", "edit", "a", "z", ""]),
                                            "description": st.text(max_size=5)})},
        optional={"cache_control": st.just({"type": "ephemeral"}), "strict": st.booleans()}),
    max_size=6)


@settings(max_examples=examples(200), deadline=None)
@given(tool_lists, st.integers(min_value=1, max_value=3))
def test_remembered_order_gives_the_same_tools_json_and_names_as_sorting(tools, repeats):
    """The order remembered with the tools' text: duplicates, marks and all, the same objects
    in the same order, the same head JSON and names, on the first request and on repeats
    (each repeat a fresh copy of the tools, as every request parses its own)."""
    from litellm_prefix.request.context import Context
    from litellm_prefix.request.drift import head_record, tools_json
    from litellm_prefix.settings import Settings

    expected_tools, expected_json = _slow_order(tools)
    for _ in range(repeats):
        fresh = copy.deepcopy(tools)
        ctx = Context(settings=Settings(tool_order="sort"))
        view, _ = normalize_tool_order(View("chat", (), tuple(fresh) if fresh else None, ()), ctx)
        got = list(view.tools or ())
        assert got == expected_tools
        if fresh:
            assert tools_json(view, ctx) == expected_json
            record, _ = head_record(view, ctx)
            assert record.tool_names == tuple(tool_name(t) for t in expected_tools)
            if not any("cache_control" in t for t in fresh):  # (a moved mark copies two tools)
                assert all(any(g is f for f in fresh) for g in got)  # the client's own objects
