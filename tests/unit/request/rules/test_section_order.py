"""Reordered forced prompts (pi 0.99, issue 12 section 2).

An extension's replacement prompt applies to typed-prompt runs only; runs started by
extension messages use pi's own prompt. A replacement that only moves sections makes the
head switch between two orders of the same sections: the recorded order goes upstream."""
from __future__ import annotations

import copy
import random

from hypothesis import HealthCheck, given, settings, strategies as st

from harness.realistic import openai_tools, paragraph
from harness.sessions import NOTIFICATION
from litellm_prefix.request.context import Context
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.journal import Journal
from litellm_prefix.request.rules.section_order import FILLER_PARAGRAPHS, head_units, keep_section_order, record_section_order
from litellm_prefix.request.sections import JOIN
from litellm_prefix.request.view import View
from litellm_prefix.settings import Settings
from tests.support import examples

FILLER = FILLER_PARAGRAPHS[0]


def pi_099_parts(agents_md: str = "") -> dict[str, str]:
    """pi 0.99's prompt as named parts: untagged paragraphs (tool list, filler, guidelines), then tagged sections."""
    rng = random.Random(99)
    context = "\n\n".join(paragraph(rng, 6) for _ in range(12)) + agents_md
    return {
        "intro": "You are an expert coding assistant operating inside pi, a coding agent harness.",
        "tools": "Available tools:\n- read: Read file contents\n- bash: Execute bash commands\n- edit: Make edits",
        "filler": FILLER,
        "guidelines": "Guidelines:\n- Use read to examine files before editing\n- Be concise in your responses",
        "docs": "<docs>\nMain documentation: /home/alice/.pi/pi-home/README.md\n</docs>",
        "project_context": f"<project_context>\n# AGENTS.md\n\n{context}\n</project_context>",
        "cwd": "<cwd>\nCurrent working directory: /home/alice/src/webshop\n</cwd>",
    }


PI_ORDER = ["intro", "tools", "filler", "guidelines", "docs", "project_context", "cwd"]
# A permission extension's forced prompt: the tool list moved after cwd (the filler stays put).
FORCED_ORDER = ["intro", "filler", "guidelines", "docs", "project_context", "cwd", "tools"]


def render(parts: dict[str, str], order: list[str]) -> str:
    return JOIN.join(parts[name] for name in order)


def _stabilizer() -> Stabilizer:
    return Stabilizer(Settings(path_check="absolute"))


class Session:
    def __init__(self) -> None:
        self.body: list[dict] = []
        self.tools = openai_tools()
        self.turn = 0

    def request(self, head: str) -> dict:
        return {"model": "chat-model", "messages": [{"role": "system", "content": head}, *copy.deepcopy(self.body)],
                "tools": copy.deepcopy(self.tools), "metadata": {"session_id": "pi-099"}}

    def tool_round(self) -> None:
        self.turn += 1
        cid = f"call_{self.turn}"
        self.body.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "read", "arguments": "{}"}}]})
        self.body.append({"role": "tool", "tool_call_id": cid, "content": f"result {self.turn}"})


def _assert_monotone(outputs: list[list[dict]]) -> None:
    for earlier, later in zip(outputs, outputs[1:]):
        assert later[: len(earlier)] == earlier


def test_head_units_split_tagged_blocks_and_paragraphs():
    parts = pi_099_parts()
    text = render(parts, PI_ORDER)
    units = head_units(text)
    assert JOIN.join(units) == text
    assert units[:4] == (parts["intro"], parts["tools"], FILLER, parts["guidelines"])
    assert units[-3:] == (parts["docs"], parts["project_context"], parts["cwd"])  # blank lines inside a block stay in it


def test_alternating_orders_across_typed_and_notification_runs_send_one_head():
    parts = pi_099_parts()
    forced, own = render(parts, FORCED_ORDER), render(parts, PI_ORDER)
    session, st_ = Session(), _stabilizer()
    outputs = []
    for turn in range(12):
        notification = turn % 3 == 2
        session.body.append({"role": "user", "content": NOTIFICATION if notification else f"typed prompt {turn}"})
        head = own if notification else forced  # the forced prompt applies to typed runs only
        for step in range(2 if notification else 1):
            out = st_.stabilize_sync(session.request(head))["messages"]
            assert out == [{"role": "system", "content": forced}, *copy.deepcopy(session.body)], f"turn {turn}"
            outputs.append(out)
            if step == 0 and notification:
                session.tool_round()
        session.body.append({"role": "assistant", "content": "Done."})
    _assert_monotone(outputs)
    assert st_.stats["drift"] == 0


def test_a_changed_line_inside_a_section_passes_and_warns_once():
    parts = pi_099_parts()
    changed = pi_099_parts(agents_md="\n- Deploys are frozen on Fridays")
    session, st_ = Session(), _stabilizer()
    expected_heads = []
    for turn in range(8):
        notification = turn % 2 == 1
        session.body.append({"role": "user", "content": NOTIFICATION if notification else f"typed {turn}"})
        current = changed if turn >= 4 else parts
        head = render(current, PI_ORDER if notification else FORCED_ORDER)
        out = st_.stabilize_sync(session.request(head))["messages"]
        # Turn 4 (typed) brings the change, in the forced order: it passes and is recorded;
        # from then on pi's own order of the changed sections is sent in that recorded order.
        expected = render(changed if turn >= 4 else parts, FORCED_ORDER)
        if turn == 4:
            assert expected == head
        expected_heads.append(expected)
        assert out[0]["content"] == expected, f"turn {turn}"
        session.body.append({"role": "assistant", "content": "ok"})
    assert len(set(expected_heads[4:])) == 1  # from the change on, one head again
    assert st_.stats["drift"] == 1


# -- properties -----------------------------------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "delta", "read", "edit", "tests", "files", "run", "keep"]
NAMES = ["rules", "docs", "skills", "cwd", "plan", "todo", "notes", "addendum", "context"]

line = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
untagged = st.lists(line, min_size=1, max_size=3).map("\n".join)
block_body = st.lists(untagged, min_size=1, max_size=3).map(JOIN.join)


@st.composite
def heads(draw) -> list[str]:
    paragraphs = draw(st.lists(untagged, min_size=1, max_size=4))
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=5))
    blocks = [f"<{name}>\n{draw(block_body)}\n</{name}>" for name in names]
    units = paragraphs + blocks
    return draw(st.permutations(units))


def _view(text: str) -> View:
    return View(shape="chat", head=(text,), tools=None, body=({"role": "user", "content": "hi"},))


def _recorded(text: str) -> Journal:
    _, journal, _ = record_section_order(_view(text), Journal(), Context(settings=Settings()))
    return journal


fast = settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(heads(), st.data())
def test_property_any_permutation_of_the_recorded_sections_gets_the_recorded_head(units, data):
    recorded = JOIN.join(units)
    assert head_units(recorded) == tuple(units)
    permuted = JOIN.join(data.draw(st.permutations(units)))
    st_ = _stabilizer()
    body = [{"role": "user", "content": "hi"}]
    first = st_.stabilize_sync({"messages": [{"role": "system", "content": recorded}, *body],
                                "metadata": {"session_id": "perm-session"}})
    out = st_.stabilize_sync({"messages": [{"role": "system", "content": permuted}, *body],
                              "metadata": {"session_id": "perm-session"}})
    assert out["messages"][0]["content"] == first["messages"][0]["content"] == recorded
    assert st_.stats["drift"] == 0


@fast
@given(heads(), st.sampled_from(["change", "drop", "add"]), st.integers(0, 50), st.data())
def test_property_a_head_that_is_not_a_permutation_is_left_alone(units, how, pick, data):
    journal = _recorded(JOIN.join(units))
    other = list(data.draw(st.permutations(units)))
    at = pick % len(other)
    if how == "change":
        other[at] = other[at] + " changed" if not other[at].startswith("<") else other[at].replace("\n", "\nchanged ", 1)
    elif how == "drop":
        if len(other) == 1:
            other.append("extra paragraph")
        else:
            del other[at]
    else:
        other.insert(at, "a new paragraph")
    view = _view(JOIN.join(other))
    new_view, new_journal, events = keep_section_order(view, journal, Context(settings=Settings()))
    assert new_view is view and events == [] and new_journal is journal
    # ...and it is recorded once sent: a later reorder of it gets it back
    _, recorded, _ = record_section_order(view, journal, Context(settings=Settings()))
    assert recorded.order != journal.order


def test_the_recorded_order_is_the_head_sent_after_the_head_pin():
    """Folded patches (no mid-conversation system support): during a notification run the head
    pin sends the pinned head instead of the head without an extension section. The order
    recorded is that of the head sent, so a forced reorder on the next typed turn still gets
    the pinned head back."""
    parts = pi_099_parts() | {"todo": "<todo>\n- [ ] ship it\n</todo>"}
    own, forced = PI_ORDER + ["todo"], FORCED_ORDER + ["todo"]
    session = Session()
    st_ = Stabilizer(Settings(path_check="absolute", supports_mid_conversation_system=False))
    heads = [("typed 0", render(parts, own)),
             (NOTIFICATION, render(parts, [n for n in own if n != "todo"])),  # folded removal: pinned head kept
             ("typed 2", render(parts, forced)),  # only a reorder of the pinned head
             ("typed 3", render(parts, own))]
    for turn, (prompt, head) in enumerate(heads):
        session.body.append({"role": "user", "content": prompt})
        out = st_.stabilize_sync(session.request(head))["messages"]
        assert out[0]["content"] == render(parts, own), f"turn {turn}"
        session.body.append({"role": "assistant", "content": "ok"})
    assert st_.stats["drift"] == 0


def test_replicas_sharing_the_journal_keep_the_same_order():
    """Two gateways sharing one store, turns alternating between them: the order is in the journal."""
    from litellm_prefix.fleet.store import MemoryStore

    store = MemoryStore(100, 3600)
    replicas = [Stabilizer(Settings(path_check="absolute"), store=store) for _ in range(2)]
    parts = pi_099_parts()
    session = Session()
    for turn in range(6):
        notification = turn % 2 == 1
        session.body.append({"role": "user", "content": NOTIFICATION if notification else f"typed {turn}"})
        head = render(parts, PI_ORDER if notification else FORCED_ORDER)
        out = replicas[turn % 2].stabilize_sync(session.request(head))["messages"]
        assert out[0]["content"] == render(parts, FORCED_ORDER), f"turn {turn}"
        session.body.append({"role": "assistant", "content": "ok"})
    assert sum(r.stats["drift"] for r in replicas) == 0
