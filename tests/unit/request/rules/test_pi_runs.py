"""Which run a pi section patch belongs to (issue 12, section 1).

A patch directly before a user message (only system/developer messages in between) is
part of that user message's run: pi sends the patch for a change the user made with
the typed prompt it goes with. A removal there is the user's own change and must reach
the model on that turn and every later one, even when an earlier notification run had
the same kind of removal dropped."""
from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings, strategies as st

from harness.realistic import anthropic_tools
from harness.sessions import NOTIFICATION, PiClient, removed, updated
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.rules.patches import run_owner, run_owners
from litellm_prefix.request.sections import parse_patch
from litellm_prefix.settings import Settings
from tests.support import examples

TODO, PLAN = "- [ ] ship the release", "1. read\n2. fix"


def _stabilizer(**kwargs) -> Stabilizer:
    kwargs.setdefault("path_check", "absolute")
    return Stabilizer(Settings(**kwargs))


def stable(head: str) -> str:
    fresh = _stabilizer()
    return fresh.stabilize_sync({"messages": [{"role": "system", "content": head}]})["messages"][0]["content"]


def _assert_monotone(outputs: list[list[dict]]) -> None:
    for earlier, later in zip(outputs, outputs[1:]):
        assert later[: len(earlier)] == earlier


def test_run_owners_give_a_leading_patch_to_the_prompt_it_precedes():
    body = [
        {"role": "user", "content": NOTIFICATION},          # 0
        {"role": "system", "content": removed("plan")},      # 1: inside the notification run
        {"role": "assistant", "content": "ok"},              # 2
        {"role": "system", "content": removed("todo")},      # 3: leads the typed prompt at 5
        {"role": "developer", "content": "reminder"},        # 4: leads it too
        {"role": "user", "content": "/todo off"},            # 5
        {"role": "system", "content": "Context compacted."},  # 6: tail: the run of 5
    ]
    assert run_owners(body) == [0, 0, 0, 5, 5, 5, 5]
    assert run_owners([{"role": "system", "content": "x"}, {"role": "assistant", "content": "y"}]) == [None, None]


_ITEMS = st.one_of(
    st.sampled_from([{"role": "user", "content": "typed"}, {"role": "user", "content": NOTIFICATION},
                     {"role": "user", "content": [{"type": "tool_result", "content": "r"}]},
                     {"role": "assistant", "content": "ok"}, {"role": "tool", "content": "out"},
                     {"role": "system", "content": "patch"}, {"role": "developer", "content": "reminder"},
                     {"type": "function_call", "role": "system"}, {"role": "user", "content": []}]),
    st.builds(lambda role: type("Message", (), {"role": role, "content": "m"})(), st.sampled_from(["user", "system"])),
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_ITEMS, max_size=14))
def test_the_run_of_one_message_is_its_place_in_run_owners(body):
    """``run_owner`` (what the patch rule asks for each patch) looks only around the message:
    the same run as ``run_owners`` for every message of any body, negative indices too."""
    owners = run_owners(body)
    assert [run_owner(body, i) for i in range(len(body))] == owners
    assert [run_owner(body, i - len(body)) for i in range(len(body))] == owners


def test_typed_prompt_patch_after_a_notification_flip_reaches_the_model_every_turn():
    """The sequence of the issue: a notification run drops an extension section (a flip the
    gateway hides), then the user types a prompt whose patch re-adds that section and removes
    another extension section. The re-add is a no-op (the model never lost the section) and is
    dropped; the removal reaches the model on that turn and on every later one."""
    client = PiClient(extensions={"todo": TODO, "plan": PLAN})
    st = _stabilizer()
    head = client.head()
    outputs = []
    expected_body: list[dict] = []
    for turn in range(10):
        if turn == 3:
            client.user(NOTIFICATION)
            expected_body.append(client.body[-1])
            client.system(removed("plan"))  # the flip: dropped, never reaches the model
            client.tool_round()
            expected_body.extend(client.body[-2:])
        elif turn == 4:
            client.system(updated("plan", PLAN) + "\n\n" + removed("todo"))  # sent with the typed prompt
            client.user("/todo off, then continue with the release")
            expected_body.append({"role": "system", "content": removed("todo")})
            expected_body.append(client.body[-1])
        else:
            client.user(f"typed prompt {turn}")
            expected_body.append(client.body[-1])
        out = st.stabilize_sync(client.request())["messages"]
        assert out == [{"role": "system", "content": stable(head)}, *copy.deepcopy(expected_body)], f"turn {turn}"
        outputs.append(out)
        client.assistant()
        expected_body.append(client.body[-1])
    _assert_monotone(outputs)
    assert st.stats["drift"] == 0


def test_a_drop_recorded_before_the_typed_prompt_arrived_is_lifted():
    """The request ended at a removal during a notification run (dropped and recorded); the user
    aborted and typed a prompt right after it: the removal leads the typed run, so it is the
    user's own change and reaches the model from that turn on."""
    client = PiClient(extensions={"todo": TODO})
    st = _stabilizer()
    client.user("start")
    st.stabilize_sync(client.request())
    client.assistant()
    client.user(NOTIFICATION)
    client.tool_round()
    client.system(removed("todo"))
    out = st.stabilize_sync(client.request())["messages"]
    assert removed("todo") not in [m["content"] for m in out]  # judged part of the notification run
    client.user("turn the todo list off")  # typed directly after it, no assistant reply in between
    for turn in range(3):
        out = st.stabilize_sync(client.request())["messages"]
        assert out[-2 - 2 * turn] == {"role": "system", "content": removed("todo")}, f"turn {turn}"
        client.assistant()
        client.user(f"next {turn}")


def test_folded_head_in_an_anthropic_notification_run_with_tool_results():
    """/v1/messages: tool results are user messages, but they do not start a run. A head folded
    without an extension section during a notification run keeps the pinned head across the
    tool round trip (the run is the notification's, not the tool result's)."""
    client = PiClient(extensions={"todo": TODO, "plan": PLAN})
    st = _stabilizer(supports_mid_conversation_system=False)
    pinned = client.head()
    tools = anthropic_tools()

    def request(head: str, messages: list[dict]) -> dict:
        return {"model": "claude", "system": head, "messages": copy.deepcopy(messages), "tools": tools,
                "metadata": {"session_id": "anthropic-runs"}}

    messages = [{"role": "user", "content": "typed start"}, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": NOTIFICATION}]
    st.stabilize_sync(request(pinned, messages[:1]), "anthropic_messages")
    del client.extensions["todo"]  # folded removal during the notification run
    out = st.stabilize_sync(request(client.head(), messages), "anthropic_messages")
    assert out["system"] == stable(pinned)
    messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "data"}]}]
    out = st.stabilize_sync(request(client.head(), messages), "anthropic_messages")
    assert out["system"] == stable(pinned)
    assert st.stats["drift"] == 0


# -- property: generated pi sessions -------------------------------------------------------

EXTENSIONS = {"todo": TODO, "plan": PLAN, "notes": "remember the flaky test"}

op = st.tuples(st.sampled_from(["remove", "readd", "update", "pi_update"]), st.integers(0, 2))
run = st.tuples(
    st.booleans(),  # typed (True) or notification run
    st.lists(op, max_size=3),  # patch entries sent before the run's user message
    st.lists(st.one_of(st.just("tools"), st.lists(op, min_size=1, max_size=2)), max_size=3),  # steps
    st.booleans(),  # a request in the middle of the run as well
)


def _patch_text(ops, sections: dict[str, str], counter: list[int]) -> str | None:
    """Apply abstract ops to pi's own view of its sections; the patch pi would send, or None."""
    parts = []
    for action, pick in ops:
        present = sorted(n for n in EXTENSIONS if n in sections)
        absent = sorted(n for n in EXTENSIONS if n not in sections)
        if action == "remove" and present:
            name = present[pick % len(present)]
            del sections[name]
            parts.append(removed(name))
        elif action == "readd" and absent:
            name = absent[pick % len(absent)]
            sections[name] = EXTENSIONS[name]
            parts.append(updated(name, EXTENSIONS[name]))
        elif action == "update" and present:
            name = present[pick % len(present)]
            counter[0] += 1
            sections[name] = f"{EXTENSIONS[name]}\n- revision {counter[0]}"
            parts.append(updated(name, sections[name]))
        elif action == "pi_update":
            counter[0] += 1
            sections["cwd"] = f"Current working directory: /home/alice/src/webshop-{counter[0]}"
            parts.append(updated("cwd", sections["cwd"]))
    return "\n\n".join(parts) if parts else None


def _typed_leading_removals(body: list[dict]) -> list[tuple[int, int, str]]:
    """(patch index, owning user index, section) for each removal in a patch that leads a typed prompt."""
    out = []
    for index, message in enumerate(body):
        if message["role"] != "system":
            continue
        follower = index + 1
        while follower < len(body) and body[follower]["role"] == "system":
            follower += 1
        if follower < len(body) and body[follower]["role"] == "user" and body[follower]["content"] != NOTIFICATION:
            for entry in parse_patch(message["content"]) or []:
                if entry.action == "removed":
                    out.append((index, follower, entry.name))
    return out


def _system_entries_before(out: list[dict], users_before: int) -> list:
    """Patch entries of the system messages directly before the output's user message number ``users_before``."""
    seen = -1
    for position, message in enumerate(out):
        if message["role"] == "user":
            seen += 1
            if seen == users_before:
                entries = []
                back = position - 1
                while back > 0 and out[back]["role"] == "system":
                    entries.extend(parse_patch(out[back]["content"]) or [])
                    back -= 1
                return entries
    raise AssertionError("user message missing from the output")


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(run, min_size=1, max_size=7))
def test_property_typed_run_removals_always_reach_the_model(runs):
    client = PiClient(extensions=dict(EXTENSIONS), tokens=1500)
    sections = {name: text for name, text in EXTENSIONS.items()} | {"cwd": client.sections["cwd"]}
    st_ = _stabilizer()
    counter = [0]
    requests = []
    for typed, leading, steps, middle in runs:
        text = _patch_text(leading, sections, counter)
        if text:
            client.system(text)
        client.user("continue with the next step" if typed else NOTIFICATION)
        for step in steps:
            if step == "tools":
                client.tool_round()
            else:
                text = _patch_text(step, sections, counter)
                if text:
                    client.system(text)
            if middle:
                requests.append(st_.stabilize_sync(client.request())["messages"])
        requests.append(st_.stabilize_sync(client.request())["messages"])
        client.assistant()
    # Every removal sent with a typed prompt is in the upstream body on every request from then on.
    final_body = client.body
    for index, owner, name in _typed_leading_removals(final_body):
        users_before = sum(1 for m in final_body[:owner] if m["role"] == "user")
        for out in requests:
            if sum(1 for m in out if m["role"] == "user") <= users_before:
                continue  # a request from before that prompt
            names = [(e.action, e.name) for e in _system_entries_before(out, users_before)]
            assert ("removed", name) in names, (index, name)
    assert st_.stats["errors"] == 0
