"""Forced-order sessions after a section edit (pi 0.99, issue 24 item 9).

A permission extension forces a reordered prompt on typed runs; notification runs keep
pi's own prompt. A typed run that edits AGENTS.md goes upstream with the forced head,
which already holds the new text (recorded), and pi puts the change into the transcript as
an ``Updated system prompt section "project_context"`` message. The next notification run
sends pi's ORIGINAL head plus that message: with the patch applied it holds exactly the
recorded head's sections, so the recorded head goes upstream, byte for byte, and the patch
message still reaches the model. A genuine change in the same shape passes through."""
from __future__ import annotations

import copy
import random

from hypothesis import HealthCheck, event, given, settings, strategies as st

from harness.realistic import TOOL_NAMES, openai_tools, paragraph, pi_sections
from harness.sessions import NOTIFICATION, removed, updated
from litellm_prefix.offline import replay
from litellm_prefix.request.context import Context
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.journal import Journal
from litellm_prefix.request.rules import section_order
from litellm_prefix.request.rules.section_order import head_units, keep_section_order, patched_units, record_section_order
from litellm_prefix.request.sections import JOIN, PI_SECTIONS, parse_patch
from litellm_prefix.request.view import View
from litellm_prefix.settings import Settings
from tests.support import examples
from tests.unit.request.rules.test_section_order import FORCED_ORDER, PI_ORDER, heads, pi_099_parts, render

EDIT = "\n- Deploys are frozen on Fridays"


def _agents_md(parts: dict[str, str]) -> str:
    """The body of the project_context block (what pi's patch carries between the tags)."""
    block = parts["project_context"]
    return block[len("<project_context>\n"):-len("\n</project_context>")]


class ForcedOrderPi:
    """pi 0.99 with a forced-order extension: typed runs send ``forced`` order of the current
    sections; notification runs send pi's own order of the session's ORIGINAL sections, and
    every later change reaches the transcript as a section patch."""

    def __init__(self, original: dict[str, str], own: list[str], forced: list[str], seed: int = 24) -> None:
        self.original = dict(original)
        self.current = dict(original)
        self.own, self.forced = own, forced
        self.body: list[dict] = []
        self.tools = openai_tools()
        self.rng = random.Random(seed)
        self.calls = 0

    def typed_head(self) -> str:
        return render(self.current, self.forced)

    def notification_head(self) -> str:
        return render(self.original, self.own)

    def edit_section(self, name: str, parts: dict[str, str]) -> None:
        """The user edits a file behind section ``name``: pi sends the patch with the next typed prompt."""
        self.current[name] = parts[name]
        inner = parts[name][len(f"<{name}>\n"):-len(f"\n</{name}>")]
        self.body.append({"role": "system", "content": updated(name, inner)})

    def request(self, head: str) -> dict:
        return {"model": "chat-model", "messages": [{"role": "system", "content": head}, *copy.deepcopy(self.body)],
                "tools": copy.deepcopy(self.tools), "metadata": {"session_id": "pi-099-forced"}}

    def tool_round(self) -> None:
        self.calls += 1
        cid = f"call_{self.calls}"
        self.body.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "bash", "arguments": '{"command": "make"}'}}]})
        self.body.append({"role": "tool", "tool_call_id": cid, "content": paragraph(self.rng, 3)})


def run_session(client: ForcedOrderPi, edited: dict[str, str], stabilizer: Stabilizer | None,
                notification_change=None) -> tuple[list[dict], list[dict]]:
    """Six runs: typed, notification, typed with the AGENTS.md edit, notification, typed,
    notification; two tool rounds per run. Returns (client requests, upstream requests)."""
    sent, upstream = [], []
    for run in range(6):
        notification = run % 2 == 1
        if run == 2:
            client.edit_section("project_context", edited)
        client.body.append({"role": "user", "content": NOTIFICATION if notification else f"typed prompt {run}"})
        for step in range(3):
            head = client.notification_head() if notification else client.typed_head()
            if notification and run == 3 and notification_change is not None:
                head = notification_change(head)
            data = client.request(head)
            sent.append(copy.deepcopy(data))
            upstream.append(stabilizer.stabilize_sync(data) if stabilizer is not None else data)
            if step < 2:
                client.tool_round()
        client.body.append({"role": "assistant", "content": f"Run {run} done."})
    return sent, upstream


def _stabilizer() -> Stabilizer:
    return Stabilizer(Settings(path_check="absolute"))


def _patch_messages(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages[1:] if m.get("role") == "system" and parse_patch(m["content"])]


def _assert_monotone(upstream: list[dict], start: int) -> None:
    for earlier, later in zip(upstream[start:], upstream[start + 1:]):
        assert later["messages"][: len(earlier["messages"])] == earlier["messages"]


def test_notification_run_after_an_agents_md_edit_sends_the_recorded_head_and_keeps_the_patch():
    parts, edited = pi_099_parts(), pi_099_parts(agents_md=EDIT)
    client, st_ = ForcedOrderPi(parts, PI_ORDER, FORCED_ORDER), _stabilizer()
    sent, upstream = run_session(client, edited, st_)
    for n, (data, out) in enumerate(zip(sent, upstream)):
        expected = render(parts if n < 6 else edited, FORCED_ORDER)
        assert out["messages"][0]["content"] == expected, f"request {n}"
        # Nothing lost: the body reaches the model as the client sent it, the patch message included.
        assert out["messages"][1:] == data["messages"][1:], f"request {n}"
    for n in range(6, len(sent)):
        assert _patch_messages(upstream[n]["messages"]) == [updated("project_context", _agents_md(edited))]
    # The notification run's client head really is pi's original one (the case of item 9).
    assert sent[9]["messages"][0]["content"] == render(parts, PI_ORDER)
    _assert_monotone(upstream[:6], 0)
    _assert_monotone(upstream, 6)  # from the edit on: one growing prefix
    assert st_.stats["drift"] == 1  # the edit itself, once


def test_tagged_pi_head_with_an_extension_flip_in_the_notification_run():
    """The sectioned head of DESIGN section 3 rule 6 (``<tools>`` ... ``<cwd>``) with a todo
    extension section. The notification run after the edit carries the AGENTS.md patch and
    pi's removal of the todo section (an extension flip the patch rule drops): the head with
    the patches that reach the model applied is the recorded head's sections."""
    def tagged(agents_md: str) -> dict[str, str]:
        sections = pi_sections(target_tokens=3000, seed=11, tool_order=sorted(TOOL_NAMES))  # (tool order: not this test's)
        sections["project_context"] += agents_md
        sections["todo"] = "- [ ] ship the release"
        return {name: (text if name == "preamble" else f"<{name}>\n{text}\n</{name}>") for name, text in sections.items()}

    own = list(tagged(""))
    forced = [name for name in own if name != "tools"] + ["tools"]  # tools moved after cwd and todo
    parts, edited = tagged(""), tagged(EDIT)
    client, st_ = ForcedOrderPi(parts, own, forced), _stabilizer()

    original_tool_round = client.tool_round

    def tool_round() -> None:  # in the notification run after the edit: pi flips its todo section off
        original_tool_round()
        if sum(1 for m in client.body if m.get("content") == NOTIFICATION) == 2 \
                and not any(m.get("content") == removed("todo") for m in client.body):
            client.body.append({"role": "system", "content": removed("todo")})

    client.tool_round = tool_round
    sent, upstream = run_session(client, edited, st_)
    assert any(m.get("content") == removed("todo") for m in sent[-1]["messages"])
    for n, out in enumerate(upstream):
        assert out["messages"][0]["content"] == render(parts if n < 6 else edited, forced), f"request {n}"
    _assert_monotone(upstream, 6)
    assert st_.stats["drift"] == 1
    # The edit reaches the model (the recorded head holds it), the todo flip never does.
    assert EDIT.strip() in upstream[9]["messages"][0]["content"]
    assert all(m.get("content") != removed("todo") for m in upstream[-1]["messages"])


def test_a_genuine_change_in_the_same_shape_passes_through():
    """The same session, but the notification run's head also moved the cwd: with the patch
    applied it is no longer the recorded head's sections, so it goes upstream as sent."""
    parts, edited = pi_099_parts(), pi_099_parts(agents_md=EDIT)
    client, st_ = ForcedOrderPi(parts, PI_ORDER, FORCED_ORDER), _stabilizer()

    def moved_cwd(head: str) -> str:
        return head.replace("Current working directory: /home/alice/src/webshop",
                            "Current working directory: /home/alice/src/webshop-v2")

    sent, upstream = run_session(client, edited, st_, notification_change=moved_cwd)
    for n in range(9, 12):
        assert "webshop-v2" in sent[n]["messages"][0]["content"]
        assert upstream[n]["messages"] == sent[n]["messages"], f"request {n}"
    assert st_.stats["drift"] >= 2  # the edit, then the cwd change


def test_a_patch_that_disagrees_with_the_recorded_head_passes_through():
    """A second edit reaches only the transcript (no typed run recorded it): the patched head
    differs from the recorded one in that section and goes upstream as sent."""
    parts, edited = pi_099_parts(), pi_099_parts(agents_md=EDIT)
    journal = _recorded(render(edited, FORCED_ORDER))
    body = (
        {"role": "system", "content": updated("project_context", _agents_md(edited))},
        {"role": "user", "content": "typed"},
        {"role": "system", "content": updated("project_context", _agents_md(pi_099_parts(agents_md="\n- Other")))},
        {"role": "user", "content": NOTIFICATION},
    )
    view = View("chat", (render(parts, PI_ORDER),), None, body)
    assert keep_section_order(view, journal, Context(settings=Settings())) == (view, journal, [])


# -- the replay accounting --------------------------------------------------------------------


def _reprocessed(requests: list[dict]) -> int:
    return replay.account(replay.Turn("s", "chat", {k: v for k, v in r.items() if k != "metadata"})
                          for r in requests).lcp


def measure() -> dict[str, float]:
    """Re-processed tokens (one-slot exact-prefix cache, cl100k_base) of the fixture session
    against the append-only client that sends the recorded head every time: without the
    plugin, with it before this fix (patched heads not compared), and with it."""
    parts, edited = pi_099_parts(), pi_099_parts(agents_md=EDIT)
    sent, _ = run_session(ForcedOrderPi(parts, PI_ORDER, FORCED_ORDER), edited, None)
    bound = [dict(r, messages=[{"role": "system", "content": render(parts if n < 6 else edited, FORCED_ORDER)},
                               *r["messages"][1:]]) for n, r in enumerate(sent)]
    _, with_fix = run_session(ForcedOrderPi(parts, PI_ORDER, FORCED_ORDER), edited, _stabilizer())
    original = section_order._patched_in_order
    section_order._patched_in_order = lambda *args: None
    try:
        _, before = run_session(ForcedOrderPi(parts, PI_ORDER, FORCED_ORDER), edited, _stabilizer())
    finally:
        section_order._patched_in_order = original
    stable = _reprocessed(bound)
    return {"no plugin": _reprocessed(sent) / stable, "before": _reprocessed(before) / stable,
            "after": _reprocessed(with_fix) / stable}


def test_replay_accounting_reaches_the_append_only_bound():
    ratios = measure()
    assert ratios["after"] <= 1.02
    assert ratios["before"] > 1.2  # the notification run re-processed the conversation before the fix
    assert ratios["no plugin"] > 1.2


# -- property -------------------------------------------------------------------------------------


def _recorded(text: str) -> Journal:
    _, journal, _ = record_section_order(View("chat", (text,), None, ()), Journal(), Context(settings=Settings()))
    return journal


def _tagged_name(unit: str) -> str | None:
    if unit.startswith("<") and ">\n" in unit:
        name = unit[1:unit.index(">\n")]
        if unit.endswith(f"\n</{name}>"):
            return name
    return None


fast = settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(heads(), st.data())
def test_property_patched_permutations_keep_the_recorded_head_or_pass_through_exactly(units, data):
    names = [n for n in map(_tagged_name, units) if n]
    ops = data.draw(st.lists(st.tuples(st.sampled_from(["update", "remove", "add"]), st.integers(0, 20),
                                       st.sampled_from(["new text", "more", "x y"])), max_size=3))
    patches = []
    for how, pick, body in ops:
        if how == "add" or not names:
            name = f"ext{pick}"
            patches.append(updated(name, body))
        else:
            name = names[pick % len(names)]
            patches.append(removed(name) if how == "remove" else updated(name, body))
    typed = data.draw(st.booleans())
    request_units = list(data.draw(st.permutations(units)))
    # What reaches the model: in a notification run the patch rule drops removals of extension sections.
    reaching = [[e for e in parse_patch(p) if typed or e.action != "removed" or e.name in PI_SECTIONS] for p in patches]
    patched = list(patched_units(tuple(request_units), reaching))
    # The recorded head: the patched sections in some order (the match), or that with one change.
    recorded_units = list(data.draw(st.permutations(patched))) if patched else ["a lone paragraph"]
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(recorded_units) - 1))
        recorded_units[at] = recorded_units[at] + " changed" if not _tagged_name(recorded_units[at]) \
            else recorded_units[at].replace("\n", "\nchanged ", 1)
    recorded = JOIN.join(recorded_units)
    if head_units(recorded) != tuple(recorded_units):  # (an empty head, or one that re-splits: not a pi head)
        return
    journal = _recorded(recorded)
    body = []
    for text in patches:
        body.append({"role": "system", "content": text})
    body.append({"role": "user", "content": "typed prompt" if typed else NOTIFICATION})
    view = View("chat", (JOIN.join(request_units),), None, tuple(body))
    ctx = Context(settings=Settings(), client_body=tuple(body))
    out, new_journal, events = keep_section_order(view, journal, ctx)
    assert new_journal is journal
    same = sorted(patched) == sorted(recorded_units) or sorted(request_units) == sorted(recorded_units)
    event("kept the recorded head" if out is not view else "passed through")
    if same and JOIN.join(request_units) != recorded:
        assert out.head == (recorded,) and out.body == view.body and events
    else:
        assert out is view and events == []
    # Deterministic and idempotent: the same request again gives the same bytes; the result again changes nothing.
    assert keep_section_order(view, journal, ctx)[0].head == out.head
    again = keep_section_order(out, journal, ctx)
    assert again[0].head == out.head
