"""The behaviour contract (DESIGN.md section 2) as properties over generated conversations."""
from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, given, settings, strategies as st

from harness.realistic import PI_SUFFIX, TINY_PNG, TOOL_NAMES, openai_tools
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.rules.mid_system import role_rules
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings
from tests.support import examples

SETTINGS = Settings(path_check="trusted", stable_path="/srv/pi-home")
PROVIDERS = ["openai", "gemini", "anthropic", "hosted_vllm", "vertex_ai"]

roots = st.sampled_from([f"/home/a/lib/{PI_SUFFIX}", f"/opt/x/{PI_SUFFIX}", f"/Users/b/.volta/{PI_SUFFIX}"])
words = st.text(alphabet="abcdefghij klmnop/.:-_\n", min_size=0, max_size=40)


@st.composite
def system_prompts(draw):
    tool_names = draw(st.permutations(TOOL_NAMES[:8]))
    pieces = [
        draw(words),
        f"Docs: {draw(roots)}/docs/{draw(st.sampled_from(['a.md', 'b.md']))}",
        "<tools>\n" + "\n".join(f"- {n}: does {n}" for n in tool_names) + "\n</tools>",
        f"<rules>\n{draw(words)}\n</rules>",
        f"relative {PI_SUFFIX}/docs and ({draw(roots)})",
    ]
    return "\n\n".join(draw(st.permutations(pieces))[: draw(st.integers(1, len(pieces)))])


@st.composite
def messages(draw, n_turns):
    out = []
    for i in range(n_turns):
        kind = draw(st.sampled_from(["user", "user_image", "tool_round", "system", "developer", "assistant"]))
        if kind == "user":
            out.append({"role": "user", "content": draw(words)})
        elif kind == "user_image":
            out.append({"role": "user", "content": [{"type": "text", "text": draw(words)},
                                                    {"type": "image_url", "image_url": {"url": TINY_PNG}}]})
        elif kind == "tool_round":
            cid = f"call_{i}"
            out.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "read", "arguments": "{}"}}]})
            out.append({"role": "tool", "tool_call_id": cid, "content": draw(words)})
        elif kind == "assistant":
            out.append({"role": "assistant", "content": draw(words)})
        else:
            content = draw(st.one_of(words, st.builds(lambda t: [{"type": "text", "text": t}], words)))
            out.append({"role": kind, "content": content})
    return out


@st.composite
def requests(draw, max_turns=8):
    names = draw(st.lists(st.sampled_from(TOOL_NAMES), unique=True, max_size=10))
    tools = openai_tools(names) if names else None
    if tools and draw(st.booleans()):
        tools[-1]["cache_control"] = {"type": "ephemeral"}
    data = {
        "model": "m",
        "messages": [{"role": "system", "content": draw(system_prompts())}, *draw(messages(draw(st.integers(1, max_turns))))],
        "metadata": {"session_id": "prop-session"},
    }
    if tools is not None:
        data["tools"] = tools
    return data, Target(provider=draw(st.sampled_from(PROVIDERS)))


def _fresh() -> Stabilizer:
    return Stabilizer(SETTINGS)


def _stabilize(data, target, stabilizer=None):
    return (stabilizer or _fresh()).stabilize_sync(copy.deepcopy(data), target=target)


def _payload(data) -> str:
    return json.dumps({k: data.get(k) for k in ("messages", "tools")}, sort_keys=True)


fast = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(requests())
def test_deterministic(case):
    data, target = case
    assert _payload(_stabilize(data, target)) == _payload(_stabilize(data, target))


@fast
@given(requests())
def test_idempotent(case):
    data, target = case
    once = _stabilize(data, target)
    twice = _stabilize(once, target)
    assert _payload(once) == _payload(twice)


def _text(message) -> str:
    """A message's text as a chat template reads it: its string, or its text parts joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n\n".join(p["text"] for p in content or [] if isinstance(p, dict) and isinstance(p.get("text"), str))


def _folds(target: Target) -> bool:
    """Notes and converted system messages are folded into their neighbours (rules/notes.py)."""
    return role_rules(target, None) != "system"


@fast
@given(requests(), st.data())
def test_prefix_monotone(case, more):
    data, target = case
    extended = copy.deepcopy(data)
    extended["messages"] += more.draw(messages(more.draw(st.integers(1, 4))))
    stabilizer = _fresh()
    turn_n = _stabilize(data, target, stabilizer)
    turn_n1 = _stabilize(extended, target, stabilizer)
    assert turn_n1.get("tools") == turn_n.get("tools")
    n = len(turn_n["messages"])
    assert turn_n1["messages"][: n - 1] == turn_n["messages"][: n - 1]
    last, later = turn_n["messages"][-1], turn_n1["messages"][n - 1]
    if later != last:
        # Where notes are folded, the previous request's last message may take the note of a
        # system message appended right after it, or (a note left after a final assistant turn)
        # move into the start of the user message that follows: its text stays a prefix.
        assert _folds(target) and later["role"] == last["role"] and last["role"] in ("user", "tool")
        assert _text(later).startswith(_text(last))
    assert stabilizer.stats["drift"] == 0


def _contains(new, old) -> bool:
    """``new`` is ``old``, or ``old`` with notes folded around its own content (every part kept, in order)."""
    if new == old:
        return True
    if new.get("role") != old["role"] or {k: v for k, v in new.items() if k != "content"} != {
            k: v for k, v in old.items() if k != "content"}:
        return False
    a, b = old["content"], new["content"]
    if isinstance(a, list):
        return isinstance(b, list) and any(_parts_kept(a, b[i:i + len(a)]) for i in range(len(b) - len(a) + 1))
    if isinstance(b, str):
        return a in b
    return any(p.get("text") == a for p in b) or (a == "" and isinstance(b, list))


def _parts_kept(old: list, new: list) -> bool:
    """Every old part, in order: equal, or (only the first and the last) a text part whose text a
    note was folded before or after, its other keys (a cache mark) unchanged."""
    for i, (a, b) in enumerate(zip(old, new)):
        if a == b:
            continue
        edge = i in (0, len(old) - 1)
        if not (edge and isinstance(a, dict) and isinstance(b, dict) and isinstance(a.get("text"), str)
                and isinstance(b.get("text"), str) and {k: v for k, v in a.items() if k != "text"}
                == {k: v for k, v in b.items() if k != "text"}
                and (b["text"].startswith(a["text"]) or b["text"].endswith(a["text"]))):
            return False
    return len(old) == len(new)


@fast
@given(requests())
def test_nothing_lost(case):
    data, target = case
    out = _stabilize(data, target)
    before, after = data["messages"], out["messages"]
    if not _folds(target):
        assert len(after) == len(before)
    for old, new in zip(before, after) if not _folds(target) else ():
        if old["role"] in ("user", "assistant", "tool"):
            assert new == old  # every user, assistant and tool message, in order, untouched
        elif new is not after[0]:
            # a converted mid-conversation system message keeps every original part
            if isinstance(old["content"], list):
                assert new["content"][-len(old["content"]):] == old["content"]
            else:
                assert new["content"].endswith(old["content"])
    if _folds(target):
        # every user, assistant and tool message, in order: untouched, or with notes folded
        # around its own content; a client system message after the head: its text in a message
        rest = iter(after[1:])
        for old in before[1:]:
            if old["role"] in ("user", "assistant", "tool"):
                assert any(_contains(new, old) for new in rest)
        texts = "\n\n".join(_text(m) for m in after[1:])
        for old in before[1:]:
            if old["role"] in ("system", "developer") and role_rules(target, None) == "user":
                assert _text(old) in texts
        # never a user message after a user message the client did not send so
        def pairs(ms):
            body = [m["role"] for m in ms[1:] if m["role"] not in ("system", "developer")]
            return sum(a == b == "user" for a, b in zip(body, body[1:]))
        assert pairs(after) <= pairs(before)
    calls = [c["id"] for m in after for c in (m.get("tool_calls") or [])]
    results = [m["tool_call_id"] for m in after if m["role"] == "tool"]
    assert calls == results
    for i, m in enumerate(after):  # nothing between an assistant's tool calls and their results
        for j, call in enumerate(m.get("tool_calls") or []):
            assert after[i + 1 + j].get("tool_call_id") == call["id"]
    assert sorted(t["function"]["name"] for t in out.get("tools") or []) == sorted(
        t["function"]["name"] for t in data.get("tools") or [])


@fast
@given(requests(), st.sampled_from(["read", "write", "drift"]))
def test_fail_open(case, where):
    data, target = case
    stabilizer = _fresh()

    def boom(*args, **kwargs):
        raise ValueError("injected")

    if where == "read":
        stabilizer.store.load = boom
    elif where == "write":
        import litellm_prefix.request.wire.chat as chat

        original = chat.write
        chat.write = boom
    else:
        import litellm_prefix.request.pipeline as pipeline

        original_drift = pipeline.RULES[-1]
        pipeline.RULES[-1] = boom
    try:
        snapshot = copy.deepcopy(data)
        out = stabilizer.stabilize_sync(data, target=target)
        if where == "write" and out is data and stabilizer.stats["errors"] == 0:
            return  # nothing to write for this request: the write path was never taken
        assert out == snapshot
        assert stabilizer.stats["errors"] == 1
    finally:
        if where == "write":
            chat.write = original
        elif where == "drift":
            pipeline.RULES[-1] = original_drift


@fast
@given(requests())
def test_off_means_off(case):
    data, target = case
    snapshot = copy.deepcopy(data)
    out = Stabilizer(Settings(enabled=False)).stabilize_sync(data, target=target)
    assert out is data and json.dumps(out, sort_keys=True) == json.dumps(snapshot, sort_keys=True)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                           max_leaves=6)


@fast
@given(st.text(min_size=0, max_size=200), st.permutations(["user", "tool", "system", "assistant"]),
       st.dictionaries(st.sampled_from(["name", "tool_call_id", "cache_control", "type", "extra"]),
                       st.text(max_size=8) | json_values, max_size=3))
def test_message_digest_is_content_hash(content, roles, extra):
    """The anchor hash remembered with a message's text is ``content_hash`` of the message, for
    messages sharing a text under other roles and fields, with marker fields and non-string values."""
    from litellm_prefix.request.journal import content_hash
    from litellm_prefix.request.rules.notes import message_digest

    for role in roles:  # the same texts (a long one is remembered) under each role in turn
        for message in ({"role": role, "content": content}, {"role": role, "content": "x" * 65 + content},
                        {"content": "x" * 65 + content, "role": role, **extra},
                        {"role": role, "content": [{"type": "text", "text": "x" * 65 + content}], **extra}):
            assert message_digest(message) == content_hash(message)
            assert message_digest(copy.deepcopy(message)) == content_hash(message)


# -- transient parts and listings (rules/transient.py, rules/listing_order.py) on generated traffic --

REMINDER = "<reminder>now: {}</reminder>"
LISTED = ["alpha", "beta", "gamma", "delta"]
SETTINGS_X = Settings(path_check="trusted", stable_path="/srv/pi-home", transient_parts=[r"<reminder>now: [^<]*</reminder>"],
                      listings=[{"name": "items", "places": [[r"<items>\n(?P<list>(?:- [a-z]+\n)+)</items>",
                                                              r"- (?P<key>[a-z]+)\n"]], "enums": True}])


def _with_listing(data, order):
    data = copy.deepcopy(data)
    data["messages"][0]["content"] += "\n\n<items>\n" + "".join(f"- {k}\n" for k in order) + "</items>"
    data["tools"] = [*(data.get("tools") or []), {"type": "function", "function": {
        "name": "pick", "description": "Pick one.", "parameters": {"type": "object", "properties": {
            "item": {"type": "string", "enum": list(order)}}}}}]
    return data


def _listed(out) -> tuple[list[str], list[str]]:
    import re
    head = re.findall(r"^- ([a-z]+)$", out["messages"][0]["content"].split("<items>\n")[-1], re.M)
    pick = next(t for t in out["tools"] if t["function"]["name"] == "pick")
    enum = pick["function"]["parameters"]["properties"]["item"]["enum"]
    return head, enum


@fast
@given(requests(), st.data())
def test_a_replay_that_leaves_out_transient_parts_and_moves_a_listing_keeps_the_prefix(case, more):
    """A client that drops the transient part of its last message on the next request, and lists
    the same items in another order: the next request still extends the previous one, the listing
    in the session's first order, and the client's other bytes as it sent them."""
    base, target = case
    first_order = more.draw(st.permutations(LISTED))
    stamp = more.draw(st.sampled_from(["Mon", "Tue 10:00", ""]))
    base = {**base, "messages": [*base["messages"], {"role": "user", "content": [
        {"type": "text", "text": REMINDER.format(stamp)}, {"type": "text", "text": more.draw(words) or "go"}]}]}
    data = _with_listing(base, first_order)
    replay = _with_listing(base, more.draw(st.permutations(LISTED)))
    replay["messages"][-1]["content"] = replay["messages"][-1]["content"][1:]  # the reminder left out
    replay["messages"] += more.draw(messages(more.draw(st.integers(1, 3))))
    stabilizer = Stabilizer(SETTINGS_X)
    turn_n = stabilizer.stabilize_sync(copy.deepcopy(data), target=target)
    turn_n1 = stabilizer.stabilize_sync(copy.deepcopy(replay), target=target)
    assert _listed(turn_n) == (list(first_order), list(first_order))
    assert _listed(turn_n1) == (list(first_order), list(first_order))
    assert turn_n1["messages"][0] == turn_n["messages"][0] and turn_n1.get("tools") == turn_n.get("tools")
    n = len(turn_n["messages"])
    assert turn_n1["messages"][: n - 1] == turn_n["messages"][: n - 1]
    last, later = turn_n["messages"][-1], turn_n1["messages"][n - 1]
    assert later == last or (_folds(target) and _text(later).startswith(_text(last)))
    assert stabilizer.stats["drift"] == 0 and stabilizer.stats["errors"] == 0


@fast
@given(requests())
def test_transient_parts_and_listings_keep_every_invariant_on_one_request(case):
    """With both rules on, a first request is deterministic, idempotent and loses nothing."""
    data, target = case
    data = _with_listing(data, ["gamma", "alpha", "delta", "beta"])
    data["messages"].append({"role": "user", "content": [{"type": "text", "text": REMINDER.format("Fri")},
                                                         {"type": "text", "text": "next"}]})
    once = Stabilizer(SETTINGS_X).stabilize_sync(copy.deepcopy(data), target=target)
    assert _payload(once) == _payload(Stabilizer(SETTINGS_X).stabilize_sync(copy.deepcopy(data), target=target))
    assert _payload(Stabilizer(SETTINGS_X).stabilize_sync(copy.deepcopy(once), target=target)) == _payload(once)
    assert _listed(once) == (["gamma", "alpha", "delta", "beta"],) * 2
    assert REMINDER.format("Fri") in json.dumps(once["messages"][-1]) or REMINDER.format("Fri") in json.dumps(once)
