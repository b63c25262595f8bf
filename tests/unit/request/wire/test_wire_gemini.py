"""Gemini's native shape (``wire/gemini.py``): Gemini CLI's ``generateContent`` requests to a Gemini
deployment get every rule a chat request gets, with the same guarantees.

The requests are Gemini CLI 0.61's own (``tests/fixtures/agents_gq/gemini-cli.json``, recorded in chat
form, turned back into the native body: ``harness.agent_requests.gemini_native``) and the native
bodies the hooks saw through a real proxy (``tests/fixtures/real_traffic/calls.json.gz``).
"""
from __future__ import annotations

import copy
import json
import re

from hypothesis import HealthCheck, given, settings, strategies as st

from harness.agent_requests import gemini_native
from litellm_prefix.measure import prefix
from litellm_prefix.request import target as targets, wire
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.rules.mid_system import SYSTEM_UPDATE_NOTE
from litellm_prefix.request.rules.notes import MERGED_NOTE_END, unfolded
from litellm_prefix.request.target import Target
from litellm_prefix.request.wire import gemini
from litellm_prefix.settings import Settings
from tests.support import FIXTURES, examples

FIXTURE = FIXTURES / "agents_gq" / "gemini-cli.json"
RECORDED = json.loads(FIXTURE.read_text(encoding="utf-8"))
HEADERS = RECORDED["headers"]
ROUTE = "agenerate_content_stream"
GEMINI = targets.resolve("gemini/gemini-2.5-flash", None, None, call_type=ROUTE)
BRANCH = "\u251c\u2500\u2500\u2500"  # the tree's "├───"
DAY = 86400
T0 = 1796300000.0


def native(name: str) -> dict:
    """The recorded request ``name`` as Gemini CLI sends it on its native route (headers in the metadata,
    as the deployment hook gets them)."""
    body = copy.deepcopy(RECORDED["requests"][name])
    body["tools"] = RECORDED["tool_sets"][body["tools"]]
    return {"model": "gemini/gemini-2.5-flash", **gemini_native(body), "metadata": {"headers": dict(HEADERS)}}


def rerendered(data: dict, *, day: str | None = None, new_file: str | None = None) -> dict:
    """Gemini CLI's ``<session_context>`` as it renders it on a resume: another date, a file added."""
    data = copy.deepcopy(data)
    part = data["contents"][0]["parts"][0]
    if day is not None:
        part["text"] = re.sub(r"Today's date is [^(\n]*\(", f"Today's date is {day} (", part["text"])
    if new_file is not None:
        part["text"] = part["text"].replace(f"{BRANCH}README.md\n", f"{BRANCH}{new_file}\n{BRANCH}README.md\n")
    return data


def stabilized(stabilizer: Stabilizer, data: dict, at: float, call_id: str | None = None) -> dict:
    stabilizer.clock = lambda: at
    data = copy.deepcopy(data)
    if call_id:
        data["litellm_call_id"] = call_id
    return stabilizer.stabilize_sync(data, ROUTE, target=GEMINI)


def texts(content: dict) -> list[str]:
    return [p["text"] for p in content["parts"] if isinstance(p.get("text"), str)]


# -- the adapter ------------------------------------------------------------------------------


def recorded_native_bodies() -> list[dict]:
    from harness import hook_record

    calls = hook_record.load()["gemini-cli"]
    return [call["pre_call"]["data"] for call in calls if call["pre_call"]["call_type"].startswith("agenerate_content")]


def test_a_gemini_route_is_taken_only_where_litellm_forwards_it_as_it_came():
    data = native("a1_first")
    assert GEMINI.receives_gemini_shape
    for route in ("agenerate_content", "agenerate_content_stream", "generate_content", "generate_content_stream"):
        assert wire.wire_for(data, route, GEMINI) is gemini
        assert wire.wire_for(data, route, Target(provider="gemini", model="gemini/x", receives_gemini_shape=True)) is gemini
        # a chat deployment: LiteLLM makes a chat completion of it, whose own hook takes it
        assert wire.wire_for(data, route, targets.resolve("anthropic/claude-sonnet-4-5", None, None)) is None
        assert wire.wire_for(data, route) is None  # no target known: not taken
    assert targets.resolve("vertex_ai/gemini-2.5-pro", None, None).receives_gemini_shape
    assert not targets.resolve("vertex_ai/claude-sonnet-4-5", None, None).receives_gemini_shape
    assert wire.wire_for(data) is gemini  # direct use: by its fields
    assert wire.wire_for(data, "acompletion", GEMINI) is None


def test_round_trip_is_the_identity_on_gemini_clis_requests():
    bodies = [native(name) for name in RECORDED["requests"] if name.startswith(("a", "b"))] + recorded_native_bodies()
    assert len(bodies) > 10
    for data in bodies:
        view = gemini.read(data)
        assert gemini.write(data, view) == {}
        assert all(gemini.content_of(message) is content for message, content in zip(view.body, data["contents"]))
        assert view.head == tuple(p["text"] for p in data["systemInstruction"]["parts"])
        assert [t["name"] for t in view.tools] == [d["name"] for d in data["tools"][0]["functionDeclarations"]]


def test_contents_read_as_chat_messages_with_calls_and_responses_invisible_to_text_rules():
    data = native("a2_resumed")
    view = gemini.read(data)
    roles = [m["role"] for m in view.body]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    first = view.body[0]["content"]
    assert [p["type"] for p in first] == ["text", "text"] and first[0]["text"].startswith("<session_context>")
    call = view.body[1]["content"][0]
    assert call["type"] == "tool_use" and call["name"] == "run_shell_command" and call["input"] == {
        "command": "git status --short"} and call["part"] is data["contents"][1]["parts"][0]
    results = view.body[2]["content"]
    assert [p["type"] for p in results] == ["tool_result", "tool_result"]
    assert results[0]["tool_use_id"] == call["id"] and results[0]["part"] is data["contents"][2]["parts"][0]


def test_a_changed_message_is_written_back_in_gemini_form_and_the_rest_as_sent():
    data = {"systemInstruction": {"parts": [{"text": "HEAD"}]}, "contents": [
        {"parts": [{"text": "hello", "thoughtSignature": "c2ln"}, {"inlineData": {"mimeType": "image/png", "data": "AA=="}}],
         "role": "user"},
        {"parts": [{"functionCall": {"name": "ls", "args": {}}}], "role": "model"},
        {"parts": [{"functionResponse": {"name": "ls", "response": {"output": "a"}}}], "role": "user"},
    ], "generationConfig": {"temperature": 1}}
    original = copy.deepcopy(data)
    view = gemini.read(data)
    first = view.body[0]
    changed = {**first, "content": [{**first["content"][0], "text": "hello!"}, first["content"][1]]}
    note = {"role": "user", "content": "a note"}
    folded = {**view.body[2], "content": [*view.body[2]["content"], {"type": "text", "text": "folded"}]}
    updates = gemini.write(data, view.replace(head=("HEAD2",), body=(changed, view.body[1], folded, note)))
    contents = updates["contents"]
    assert contents[0] == {"parts": [{"text": "hello!", "thoughtSignature": "c2ln"},
                                     original["contents"][0]["parts"][1]], "role": "user"}
    assert list(contents[0]) == ["parts", "role"]  # the client's key order
    assert contents[0]["parts"][1] is data["contents"][0]["parts"][1]  # a part no rule reads: as sent
    assert contents[1] is data["contents"][1]  # unchanged: the client's own object
    assert contents[2] == {"parts": [*original["contents"][2]["parts"], {"text": "folded"}], "role": "user"}
    assert contents[3] == {"role": "user", "parts": [{"text": "a note"}]}
    assert updates["systemInstruction"] == {"parts": [{"text": "HEAD2"}]}
    assert data == original  # the client's objects untouched
    assert "generationConfig" not in updates


def test_a_message_gemini_cannot_carry_is_refused():
    data = native("a1_first")
    view = gemini.read(data)
    for message in ({"role": "system", "content": "x"}, {"role": "tool", "tool_call_id": "c", "content": "x"},
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}):
        try:
            gemini.write(data, view.replace(body=(*view.body, message)))
        except ValueError:
            continue
        raise AssertionError(f"{message} was written")


def test_tools_other_than_function_declarations_are_left_alone():
    decl = [{"name": n, "description": n} for n in ("b", "a", "c")]
    assert gemini.read({"contents": [], "tools": [{"functionDeclarations": decl}, {"googleSearch": {}}]}).tools is None
    assert gemini.read({"contents": [], "tools": [{"functionDeclarations": decl, "x": 1}]}).tools is None
    for key in ("functionDeclarations", "function_declarations"):
        data = {"contents": [], "tools": [{key: decl[:2]}, {key: decl[2:]}]}
        view = gemini.read(data)
        assert [t["name"] for t in view.tools] == ["b", "a", "c"]
        updates = gemini.write(data, view.replace(tools=(decl[1], decl[0], decl[2])))
        assert updates["tools"][0] == {key: [decl[1], decl[0]]} and updates["tools"][1] is data["tools"][1]


def test_system_instruction_string_and_snake_case():
    for key, system in (("systemInstruction", "SYS"), ("system_instruction", {"parts": [{"text": "SYS"}]})):
        data = {key: system, "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        view = gemini.read(data)
        assert view.head == ("SYS",)
        updates = gemini.write(data, view.replace(head=("NEW",)))
        assert updates[key] == ("NEW" if isinstance(system, str) else {"parts": [{"text": "NEW"}]})
        assert gemini.write(data, view) == {}


def test_the_measurement_renders_the_native_shape():
    data = native("a2_resumed")
    parts = prefix.render(data, "gemini", {"provider": "gemini"})
    labels = [label for label, _ in parts]
    assert labels[:2] == ["system", "tools"] and labels[-1] == "end"
    assert len(labels) == 2 + len(data["contents"]) + 1
    assert "<session_context>" in "".join(parts[2][1]) and "run_shell_command" in "".join(parts[3][1])


# -- a session ----------------------------------------------------------------------------------


def test_a_resume_the_next_day_with_a_file_added_keeps_the_first_context_and_notes_the_new_one():
    """Gemini CLI resumed the next day after a file was added re-renders its ``<session_context>`` with
    that day's date and tree: the first day's context goes upstream, the new date and tree as a note at
    the tail (folded after the new prompt's text), every other content as the client sent it, in order."""
    stabilizer = Stabilizer(Settings())
    day1 = [native("a1_first"), native("a1_last"), native("a2_resumed")]
    outs = [stabilized(stabilizer, data, T0 + 60 * i, f"call-{i}") for i, data in enumerate(day1)]
    resumed = rerendered(native("a3_next_day"), new_file="notes.md")
    out = stabilized(stabilizer, resumed, T0 + DAY, "call-3")
    context = outs[0]["contents"][0]
    assert out["contents"][0] == context == day1[0]["contents"][0]  # the first day's context, as first sent
    assert "notes.md" not in texts(out["contents"][0])[0] and "Thursday, December 3, 2026" in texts(context)[0]
    assert len(out["contents"]) == len(resumed["contents"])
    for sent, went in zip(resumed["contents"][1:-1], out["contents"][1:-1]):
        assert went == sent  # every call and response, in order, as sent
    last_sent, last = resumed["contents"][-1], out["contents"][-1]
    assert last["role"] == "user" and unfolded(last["parts"]) == last_sent["parts"]
    note = texts(last)[-1].removeprefix(texts(last_sent)[-1])
    assert note.startswith(f"\n\n{SYSTEM_UPDATE_NOTE}") and note.endswith(MERGED_NOTE_END)
    assert "Friday, December 4, 2026" in note and f"{BRANCH}notes.md" in note
    assert out["tools"] == outs[0]["tools"] and out["systemInstruction"] == outs[0]["systemInstruction"]
    assert stabilizer.stats["errors"] == 0 and stabilizer.stats["drift"] == 0

    # Idempotent: the deployment hook on the same call, and another gateway on the output.
    again = stabilizer.stabilize_sync(copy.deepcopy(out) | {"litellm_call_id": "call-3"}, ROUTE, target=GEMINI)
    assert {k: again[k] for k in out} == out
    assert stabilized(Stabilizer(Settings()), out, T0 + DAY)["contents"] == out["contents"]

    # Prefix-monotone: the next turn only appends, and the request before is a prefix of it.
    following = copy.deepcopy(resumed)
    following["contents"] += [{"parts": [{"text": "listed"}], "role": "model"},
                              {"parts": [{"text": "(agent: gemini-cli) And now?"}], "role": "user"}]
    after = stabilized(stabilizer, following, T0 + DAY + 60, "call-4")
    assert after["contents"][: len(out["contents"])] == out["contents"]
    assert after["contents"][len(out["contents"]):] == following["contents"][len(out["contents"]):]


def test_the_first_day_session_is_prefix_monotone_and_changes_nothing_else():
    stabilizer = Stabilizer(Settings())
    first, last = native("a1_first"), native("a1_last")
    out1 = stabilized(stabilizer, first, T0, "c1")
    out2 = stabilized(stabilizer, last, T0 + 30, "c2")
    assert out1["contents"] == first["contents"] and out2["contents"] == last["contents"]
    assert out2["contents"][: len(out1["contents"])] == out1["contents"]
    # Gemini CLI's skills listing (glob order) sorted by name in the activate_skill declaration, as on chat
    names = [d["name"] for d in out2["tools"][0]["functionDeclarations"]]
    assert names == [d["name"] for d in last["tools"][0]["functionDeclarations"]]


def test_an_unknown_client_on_the_native_route_is_left_as_sent():
    data = native("a3_next_day")
    data["metadata"] = {"headers": {"user-agent": "curl/8"}}
    data["systemInstruction"] = {"parts": [{"text": "You are a helpful assistant."}]}
    out = stabilized(Stabilizer(Settings()), data, T0)
    assert out["contents"] == data["contents"]


def test_fail_open_on_a_malformed_body():
    for contents in ([{"role": "user", "parts": "hi"}], [{"role": "user"}], ["hi"],
                     [{"role": "user", "parts": [{"text": "a"}, "b"]}]):
        data = {**native("a1_first"), "contents": contents}
        snapshot = copy.deepcopy(data)
        stabilizer = Stabilizer(Settings())
        out = stabilized(stabilizer, data, T0)
        assert out == snapshot and stabilizer.stats["errors"] == 1


# -- properties over generated requests ----------------------------------------------------------

words = st.text(alphabet="abcdefgh ijk\n:/.", min_size=0, max_size=30)
names = st.sampled_from(["read_file", "run_shell_command", "glob", "write_file"])


@st.composite
def parts_of(draw, role: str):
    kinds = ["text", "thought", "inline"] + (["call"] if role == "model" else ["response"])
    out = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(kinds))
        if kind == "text":
            out.append({"text": draw(words)})
        elif kind == "thought":
            out.append({"text": draw(words), "thoughtSignature": "c2ln"})
        elif kind == "inline":
            out.append({"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}})
        elif kind == "call":
            out.append({"functionCall": {"name": draw(names), "args": {"x": draw(words)}}})
        else:
            out.append({"functionResponse": {"name": draw(names), "response": {"output": draw(words)}}})
    return out


@st.composite
def gemini_requests(draw, agent: bool = True):
    date = draw(st.sampled_from(["Thursday, December 3, 2026", "Friday, December 4, 2026"]))
    tree = draw(st.sampled_from(["README.md", "app.py"]))
    context = (f"<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
               f"Today's date is {date} (formatted according to the user's locale).\nMy operating system is: linux\n"
               f"- **Workspace Directories:**\n  - /home/a/ws\n- **Directory Structure:**\n\n"
               f"Showing up to 200 items (files + folders).\n\n/home/a/ws/\n{BRANCH}{tree}\n\n\n</session_context>")
    first = [{"text": context}] if agent and draw(st.booleans()) else []
    contents = [{"parts": [*first, {"text": draw(words)}], "role": "user"}]
    for i in range(draw(st.integers(0, 6))):
        role = "model" if i % 2 == 0 else "user"
        content = {"parts": draw(parts_of(role)), "role": role}
        if draw(st.integers(0, 9)) == 0:
            content = {"role": role, "parts": content["parts"]}  # either key order
        contents.append(content)
    declarations = [{"name": n, "description": f"{n} tool", "parametersJsonSchema": {"type": "object"}}
                    for n in draw(st.lists(names, unique=True, max_size=4))]
    data: dict = {"contents": contents, "metadata": {"headers": dict(HEADERS) if agent else {}}}
    if draw(st.booleans()):
        data["systemInstruction"] = {"parts": [{"text": "You are Gemini CLI, an autonomous CLI agent specializing "
                                                        f"in software engineering tasks. {draw(words)}"}]}
    if declarations:
        data["tools"] = [{"functionDeclarations": declarations}]
    return data


fast = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(gemini_requests())
def test_round_trip_is_the_identity(data):
    view = gemini.read(data)
    assert gemini.write(data, view) == {}
    rebuilt = [gemini.content_of(json.loads(json.dumps(m))) for m in view.body]  # copies: converted back
    assert rebuilt == data["contents"]
    assert [list(c) for c in rebuilt] == [list(c) for c in data["contents"]]  # in the client's key order


def _redated(data: dict) -> dict:
    """The same request with its context re-rendered on another day (Gemini CLI resumed)."""
    data = copy.deepcopy(data)
    part = data["contents"][0]["parts"][0]
    part["text"] = part["text"].replace("Thursday, December 3", "Saturday, December 5").replace(
        "Friday, December 4", "Saturday, December 5")
    return data


@fast
@given(gemini_requests(), st.data())
def test_idempotent_prefix_monotone_and_nothing_lost(data, more):
    """Three requests of one session (the second appends to the first, the third appends and re-renders
    the context with another date): each output is a prefix of the next, stabilizing an output again
    changes nothing, and every content and part the client sent goes upstream in order (notes folded
    into text parts after the client's, the context pinned to its first value)."""
    def turn(request: dict) -> dict:
        extended = copy.deepcopy(request)
        extended["contents"] += [{"parts": more.draw(parts_of("model")), "role": "model"},
                                 {"parts": [{"text": more.draw(words)}, *more.draw(parts_of("user"))], "role": "user"}]
        return extended

    stabilizer = Stabilizer(Settings())
    second = turn(data)
    third = turn(_redated(second))
    outs = [stabilized(stabilizer, request, T0 + 60 * i, f"p{i}") for i, request in enumerate((data, second, third))]
    for earlier, later in zip(outs, outs[1:]):
        assert later["contents"][: len(earlier["contents"])] == earlier["contents"]
    last = outs[-1]
    assert stabilized(Stabilizer(Settings()), last, T0 + 120)["contents"] == last["contents"]
    again = stabilizer.stabilize_sync(copy.deepcopy(last) | {"litellm_call_id": "p2"}, ROUTE, target=GEMINI)
    assert again["contents"] == last["contents"]
    assert len(last["contents"]) == len(third["contents"])
    for i, (sent, went) in enumerate(zip(third["contents"], last["contents"])):
        assert list(went) == list(sent) and went["role"] == sent["role"]
        parts = unfolded(went["parts"])
        if i == 0:
            assert parts[1:] == sent["parts"][1:] and parts[0] == data["contents"][0]["parts"][0]
        else:
            assert parts == sent["parts"]
    assert stabilizer.stats["errors"] == 0
