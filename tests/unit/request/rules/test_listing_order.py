"""Listing order (rules/listing_order.py): Gemini CLI's skills, listed in glob()'s order.

The head and the ``activate_skill`` tool are rebuilt from @google/gemini-cli 0.61.0's bundle
(``getCoreSystemPrompt``'s "# Available Agent Skills" section, ``ActivateSkillTool``): the
order of the entries is the only thing that moves between two processes of one session.
"""
from __future__ import annotations

import copy
import json
import re

from hypothesis import HealthCheck, given, settings, strategies as st

from litellm_prefix.request import profiles
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.journal import Journal
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings
from tests.support import examples

VLLM = Target(model="hosted_vllm/gemini-like", provider="hosted_vllm")
GEMINI_HEADERS = {"user-agent": "GeminiCLI/0.61.0/scripted (linux; x64)"}
SKILLS = {
    "antigravity-support": "Use when the user asks questions, seeks help, or requests instructions related to installing, "
                           "setting up, or migrating to Antigravity CLI.",
    "skill-creator": "Guide for creating effective skills. This skill should be used when users want to create a new "
                     "skill (or update an existing skill).",
    "release-notes": "Write release notes from the git log since the last tag.",
}
ROOT = "/home/alice/.npm/lib/node_modules/@google/gemini-cli/bundle/builtin"


def head(order: list[str], tail: str = "Keep answers short.") -> str:
    entries = "".join(f"  <skill>\n    <name>{name}</name>\n    <description>{SKILLS[name]}</description>\n"
                      f"    <location>{ROOT}/{name}/SKILL.md</location>\n  </skill>\n" for name in order)
    return ("You are Gemini CLI, an interactive CLI agent specializing in software engineering tasks.\n\n"
            "# Available Agent Skills\n\nYou have access to the following specialized skills. To activate a skill "
            "and receive its detailed instructions, call the `activate_skill` tool with the skill's name.\n\n"
            f"<available_skills>\n{entries}</available_skills>\n\n# Hook Context\n\n{tail}")


def activate_skill(order: list[str]) -> dict:
    listed = ", ".join(f"'{name}'" for name in order)
    return {"type": "function", "function": {
        "name": "activate_skill",
        "description": f"Activates a specialized agent skill by name (Available: {listed}). Returns the skill's "
                       "instructions wrapped in `<activated_skill>` tags.",
        "parameters": {"type": "object", "properties": {"name": {"type": "string", "enum": list(order),
                                                                  "description": "The name of the skill to activate."}},
                       "required": ["name"]}}}


READ = {"type": "function", "function": {"name": "read_file", "description": "Reads a file.",
                                         "parameters": {"type": "object", "properties": {
                                             "mode": {"type": "string", "enum": ["text", "bytes"]}}}}}


def request(order: list[str], turn: int, tail: str = "Keep answers short.", tool_order: list[str] | None = None) -> dict:
    body = []
    for step in range(turn + 1):
        body.append({"role": "user", "content": f"step {step}"})
        if step < turn:
            body.append({"role": "assistant", "content": f"done {step}"})
    return {"model": "m", "messages": [{"role": "system", "content": head(order, tail)}, *body],
            "tools": [READ, activate_skill(tool_order or order)], "litellm_session_id": "gemini-skills",
            "proxy_server_request": {"headers": GEMINI_HEADERS, "body": {}}}


def run(requests: list[dict], stabilizer: Stabilizer | None = None) -> list[dict]:
    stabilizer = stabilizer or Stabilizer(Settings(path_check="absolute"))
    return [stabilizer.stabilize_sync(copy.deepcopy(r), target=VLLM) for r in requests]


def first_order() -> Stabilizer:
    """The Gemini CLI listing declared with ``order: first`` (the session's first order) instead of the
    profile's ``sort``; the settings' own listing comes before the profile's of the same name."""
    name, _, places, enums = profiles.BY_NAME["gemini-cli"].listings[0]
    return Stabilizer(Settings(path_check="absolute", listings=[{"name": name, "places": places, "enums": enums,
                                                                 "order": "first"}]))


def names(out: dict) -> tuple[list[str], list[str], list[str]]:
    text = out["messages"][0]["content"]
    tool = next(t for t in out["tools"] if t["function"]["name"] == "activate_skill")
    listed = re.search(r"\(Available: ([^)]*)\)", tool["function"]["description"]).group(1)
    return (re.findall(r"<name>([^<]+)</name>", text), re.findall(r"'([^']+)'", listed),
            tool["function"]["parameters"]["properties"]["name"]["enum"])


def test_the_profile_sorts_the_skills_in_all_three_places_every_request():
    """Gemini CLI's profile: by name, so every session of the kind sends the same head bytes."""
    moved, first = ["skill-creator", "antigravity-support"], ["antigravity-support", "skill-creator"]
    st_ = Stabilizer(Settings(path_check="absolute"))
    outs = run([request(moved, 0), request(first, 1), request(moved, 2)], st_)
    for out in outs:
        assert names(out) == (first, first, first)
        assert out["messages"][0] == outs[0]["messages"][0] and out["tools"] == outs[0]["tools"]
    assert st_.stats["drift"] == 0
    three = ["skill-creator", "release-notes", "antigravity-support"]
    assert names(run([request(three, 0)])[0]) == (sorted(three),) * 3
    assert outs[1]["tools"][0] == READ  # the read tool's own enum is another list: never touched


def test_a_resumed_process_listing_the_skills_in_another_order_gets_the_sessions_order():
    first, moved = ["skill-creator", "antigravity-support"], ["antigravity-support", "skill-creator"]
    st_ = first_order()
    outs = run([request(first, 0), request(first, 1), request(moved, 2), request(moved, 3)], st_)
    for out in outs:
        assert names(out) == (first, first, first)
        assert out["messages"][0] == outs[0]["messages"][0] and out["tools"] == outs[0]["tools"]
    assert outs[3]["messages"][:5] == outs[2]["messages"][:5]
    assert st_.stats["drift"] == 0
    # the read tool's own enum is another list: never touched
    assert outs[2]["tools"][0] == READ


def test_a_skill_added_or_removed_passes_and_its_order_is_the_sessions_from_then_on():
    two, three = ["skill-creator", "antigravity-support"], ["release-notes", "antigravity-support", "skill-creator"]
    outs = run([request(two, 0), request(three, 1), request(list(reversed(three)), 2), request(two, 3),
                request(list(reversed(two)), 4)], first_order())
    assert names(outs[0])[0] == two
    assert names(outs[1]) == (three, three, three)  # a genuine change: as sent
    assert names(outs[2]) == (three, three, three)  # then kept in that order
    assert names(outs[3]) == (two, two, two)
    assert names(outs[4]) == (two, two, two)


def test_only_the_listing_moves_and_a_place_that_differs_is_left_alone():
    first = ["skill-creator", "antigravity-support"]
    out = run([request(first, 0), request(list(reversed(first)), 1, tail="A changed hook line.",
                                          tool_order=["skill-creator", "antigravity-support", "release-notes"])],
              first_order())[1]
    assert out["messages"][0]["content"] == head(first, "A changed hook line.")  # the other change passes
    text, listed, enum = names(out)
    assert listed == enum == ["skill-creator", "antigravity-support", "release-notes"]  # another set: as sent


def test_without_the_profile_nothing_is_reordered_and_a_duplicate_is_left_alone():
    first, moved = ["antigravity-support", "skill-creator"], ["skill-creator", "antigravity-support"]
    plain = [{**request(o, t), "proxy_server_request": {"headers": {}, "body": {}}} for o, t in ((first, 0), (moved, 1))]
    for r in plain:
        r["messages"][0]["content"] = r["messages"][0]["content"].replace("You are Gemini CLI", "You are an agent")
    assert names(run(plain)[1])[0] == moved
    doubled = [request(first, 0), request(["skill-creator", "skill-creator"], 1)]
    assert names(run(doubled)[1])[0] == ["skill-creator", "skill-creator"]
    assert names(run(doubled, first_order())[1])[0] == ["skill-creator", "skill-creator"]


def test_the_recorded_order_lives_in_the_journal():
    journal = Journal(listings=(("skills", ("a1", "b2")),))
    assert Journal.decoded(journal.encoded()) == journal
    assert Journal.decoded('{"v":1,"n":1}').listings == ()
    gemini = profiles.BY_NAME["gemini-cli"]
    assert [x.name for x in profiles.apply(Settings(), gemini).listings] == ["skills"]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.permutations(sorted(SKILLS)), min_size=2, max_size=5),
       st.lists(st.booleans(), min_size=5, max_size=5))
def test_properties_the_first_order_holds_and_nothing_else_changes(orders, shrink):
    orders = [list(o[:2]) if cut else list(o) for o, cut in zip(orders, shrink)]
    requests = [request(order, turn) for turn, order in enumerate(orders)]
    outs = run(requests, first_order())
    assert run(requests, first_order()) == outs  # deterministic
    sorted_outs = run(requests)  # the profile's own: sorted
    recorded = orders[0]
    for order, req, out, by_name in zip(orders, requests, outs, sorted_outs):
        if sorted(order) != sorted(recorded):
            recorded = order  # another set of skills: as sent, and the session's order from then on
        assert names(out) == (recorded, recorded, recorded)
        assert names(by_name) == (sorted(order),) * 3
        # a permutation of the entries and nothing else: the same text and tools once sorted
        entry = re.compile(r"  <skill>\n    <name>[^<]+</name>\n.*?\n  </skill>\n", re.S)

        def canonical(data, entry=entry):
            text = data["messages"][0]["content"]
            tool = json.loads(json.dumps(data["tools"][1]))
            tool["function"]["description"] = re.sub(r"'[^']+'", "'x'", tool["function"]["description"])
            tool["function"]["parameters"]["properties"]["name"]["enum"].sort()
            return entry.sub("\x00", text), sorted(entry.findall(text)), tool, data["tools"][0]
        assert canonical(out) == canonical(req)
        assert out["messages"][1:] == req["messages"][1:]
