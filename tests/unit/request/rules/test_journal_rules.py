"""Rules that need the session journal, on scripted pi-like sessions of 10+ turns.

Each test asserts the exact messages of every turn's output, and that every turn's
output is a prefix of the next one's (the cache-hit condition)."""
from __future__ import annotations

import copy

import pytest

from harness.sessions import NOTIFICATION, PiClient, removed, updated
from litellm_prefix.fleet.store import MemoryStore
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.rules.memory import correction
from litellm_prefix.request.rules.mid_system import SYSTEM_UPDATE_NOTE
from litellm_prefix.request.rules.notes import MERGED_NOTE_END
from litellm_prefix.request.rules.volatile import volatile_note
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings


def _stabilizer(**kwargs) -> Stabilizer:
    kwargs.setdefault("path_check", "absolute")
    return Stabilizer(Settings(**kwargs))


def stable(head: str) -> str:
    """The head as the stateless rules leave it (install root rewritten, <tools> lines sorted)."""
    fresh = Stabilizer(Settings(path_check="absolute"))
    return fresh.stabilize_sync({"messages": [{"role": "system", "content": head}]})["messages"][0]["content"]


def _expected(head: str, body: list[dict], notes: list[tuple[int, dict | str]]) -> list[dict]:
    """The head, the body, each note (a message) after its anchor; a note given as a text is
    folded into its anchor (the form for targets whose role rules are unknown)."""
    out = [{"role": "system", "content": stable(head)}]
    for index, message in enumerate(body):
        for at, note in notes:
            if at == index and isinstance(note, str):
                message = {**message, "content": f"{message['content']}\n\n{SYSTEM_UPDATE_NOTE}\n\n{note}\n\n{MERGED_NOTE_END}"}
        out.append(message)
        out.extend(note for at, note in notes if at == index and not isinstance(note, str))
    return out


def _assert_monotone(outputs: list[list[dict]]) -> None:
    for earlier, later in zip(outputs, outputs[1:]):
        assert later[: len(earlier)] == earlier


def test_memory_write_delete_restore_over_twelve_turns():
    client = PiClient(memory=["User prefers tabs", "Project uses uv", "Tests run with pytest -x"])
    st = _stabilizer()
    first_head = client.head()
    outputs, notes = [], []
    for turn in range(12):
        client.user(f"turn {turn}: {'continue' if turn % 2 else 'next step'}")
        if turn == 3:
            client.memory.append("Deploys are frozen on Fridays")  # a write: not re-rendered
        if turn == 6:
            client.memory.remove("Project uses uv")  # a deletion: one correction note
            # (hosted_vllm declares nothing about its roles: the note is folded into its anchor)
            notes.append((len(client.body) - 1, correction(["- Project uses uv"], [])))
        if turn == 9:
            client.memory.insert(1, "Project uses uv")  # a restore: one more note
            notes.append((len(client.body) - 1, correction([], ["- Project uses uv"])))
        out = st.stabilize_sync(client.request(), target=Target(provider="hosted_vllm"))
        assert out["messages"] == _expected(first_head, copy.deepcopy(client.body), notes), f"turn {turn}"
        outputs.append(out["messages"])
        client.tool_round()
        client.assistant()
    _assert_monotone(outputs)
    assert st.stats["drift"] == 0


def test_memory_notes_are_user_notes_where_the_target_hoists():
    client = PiClient(memory=["A fact", "Another fact"])
    st = _stabilizer()
    client.user("hi")
    st.stabilize_sync(client.request(), target=Target(provider="gemini"))
    client.memory.remove("A fact")
    out = st.stabilize_sync(client.request(), target=Target(provider="gemini"))
    # folded into the user message it follows: never two user messages in a row
    assert out["messages"][-1] == {"role": "user", "content": (
        f"hi\n\n{SYSTEM_UPDATE_NOTE}\n\n{correction(['- A fact'], [])}\n\n{MERGED_NOTE_END}")}


def test_memory_refresh_is_exact_pass_through():
    client = PiClient(memory=["A fact"])
    st = _stabilizer(memory_snapshot="refresh")
    client.user("hi")
    st.stabilize_sync(client.request())
    client.memory.append("New fact")
    request = client.request()
    out = st.stabilize_sync(copy.deepcopy(request))
    assert out["messages"] == [{"role": "system", "content": stable(client.head())}, *request["messages"][1:]]
    assert "New fact" in out["messages"][0]["content"]


def test_compaction_reseeds_the_memory_snapshot():
    client = PiClient(memory=["A fact", "B fact"])
    st = _stabilizer()
    for turn in range(4):
        client.user(f"t{turn}")
        if turn == 2:
            client.memory.remove("A fact")
        st.stabilize_sync(client.request())
        client.assistant()
    client.body = [{"role": "user", "content": "Summary of the conversation so far: ..."}]  # compacted
    out = st.stabilize_sync(client.request())
    assert out["messages"][0]["content"] == stable(client.head())  # re-seeded: the current block
    assert len(out["messages"]) == 2  # and the old note is gone with its anchor
    assert st.stats["drift"] == 1  # the head moved at the compaction boundary


def test_volatile_date_line_is_pinned_and_the_new_value_sent_once():
    client = PiClient()
    client.sections["cwd"] += "\nCurrent date: 2026-12-01"
    st = _stabilizer(volatile_presets=["current-date"])
    first_head = client.head()
    outputs, notes = [], []
    for turn in range(10):
        client.user(f"step {turn}")
        if turn == 4:
            client.sections["cwd"] = client.sections["cwd"].replace("2026-12-01", "2026-12-02")
            notes.append((len(client.body) - 1, {"role": "system",
                                                 "content": volatile_note("current-date", "Current date: 2026-12-02")}))
        out = st.stabilize_sync(client.request(), target=Target(provider="openai"))
        assert out["messages"] == _expected(first_head, copy.deepcopy(client.body), notes), f"turn {turn}"
        outputs.append(out["messages"])
        client.assistant()
    _assert_monotone(outputs)
    assert st.stats["drift"] == 0


def _patch_session(st: Stabilizer, extension_text: str = "- [ ] ship it"):
    """A 12-turn pi session with a todo extension section and a notification-run flip.

    Asserts each turn's exact output: the stable head, then the client's messages without
    the flip's patch messages (the removal is dropped, the re-add is then a no-op)."""
    client = PiClient(extensions={"todo": extension_text})
    head = client.head()
    outputs = []
    for turn in range(12):
        if turn == 4:
            client.user(NOTIFICATION)  # a run started by an extension notification
            client.system(removed("todo"))  # the extension drops its section: a flip
            client.tool_round()
            client.user("also check the linter")  # a follow-up queued during that run
            client.system(updated("todo", extension_text))  # ...and the section comes back
        else:
            client.user(f"typed prompt {turn}")
        out = st.stabilize_sync(client.request())["messages"]
        expected = [m for m in copy.deepcopy(client.body) if m["role"] != "system"]
        assert out == [{"role": "system", "content": stable(head)}, *expected], f"turn {turn}"
        outputs.append(out)
        client.assistant()
    return client, head, outputs


def test_notification_run_flip_never_reaches_the_model():
    st = _stabilizer()
    client, head, outputs = _patch_session(st)
    assert len(outputs) == 12
    _assert_monotone(outputs)
    assert st.stats["drift"] == 0


def test_resumed_session_keeps_dropping_recorded_removals():
    store = MemoryStore(100, 3600)
    first = Stabilizer(Settings(path_check="absolute"), store=store)
    client, head, _ = _patch_session(first)
    # A new process (same store) whose notification patterns no longer match: the recorded drop still applies.
    resumed = Stabilizer(Settings(path_check="absolute", notification_patterns=[]), store=store)
    client.user("resume")
    out = resumed.stabilize_sync(client.request())["messages"]
    assert removed("todo") not in [m["content"] for m in out]
    # ...while a fresh session without that record, under the same patterns, would let it through
    fresh = Stabilizer(Settings(path_check="absolute", notification_patterns=[]))
    assert removed("todo") in [m["content"] for m in fresh.stabilize_sync(client.request())["messages"]]


def test_removal_in_a_typed_run_reaches_the_model():
    client = PiClient(extensions={"todo": "- [ ] a"})
    st = _stabilizer()
    client.user("turn the todo extension off")
    client.system(removed("todo"))
    out = st.stabilize_sync(client.request())["messages"]
    assert out[-1] == {"role": "system", "content": removed("todo")}


def test_removal_of_a_pi_section_reaches_the_model_even_in_a_notification_run():
    client = PiClient(extensions={"todo": "- [ ] a"})
    st = _stabilizer()
    client.user(NOTIFICATION)
    client.system(removed("skills") + "\n\n" + removed("todo"))
    out = st.stabilize_sync(client.request())["messages"]
    assert out[-1] == {"role": "system", "content": removed("skills")}  # the todo removal alone is dropped


def test_text_changes_tool_additions_and_compaction_notice_pass_through():
    client = PiClient(extensions={"todo": "- [ ] a"})
    st = _stabilizer()
    client.user(NOTIFICATION)
    client.system(updated("todo", "- [x] a"))
    client.system("Context compacted.")
    request = client.request()
    request["tools"].append({"type": "function", "function": {"name": "zz_new", "parameters": {}}})
    out = st.stabilize_sync(copy.deepcopy(request))
    assert out["messages"][-2:] == request["messages"][-2:]
    assert out["tools"][-1]["function"]["name"] == "zz_new"


def test_no_op_updates_and_emptied_patches_are_dropped_in_any_run():
    client = PiClient(extensions={"todo": "- [ ] a"})
    st = _stabilizer()
    client.user("typed")
    client.system(updated("todo", "- [ ] a") + "\n\n" + updated("cwd", client.sections["cwd"]))
    out = st.stabilize_sync(client.request())["messages"]
    assert [m["role"] for m in out] == ["system", "user"]


def test_folded_patches_keep_the_pinned_head_during_a_notification_run():
    """Twelve turns against a model without mid-conversation system support: pi folds patches into the head."""
    client = PiClient(extensions={"todo": "- [ ] a", "plan": "1. do it"})
    st = _stabilizer(supports_mid_conversation_system=False)
    pinned = client.head()
    outputs = []
    for turn in range(12):
        expected_head = pinned
        if turn == 3:
            client.user(NOTIFICATION)
            del client.extensions["todo"]  # folded removal during a notification run: kept out
        elif turn == 4:
            client.user("queued follow-up")
            client.extensions = {"todo": "- [ ] a", **client.extensions}  # the re-add: the pinned head again
        elif turn == 8:
            client.user("turn the plan extension off")
            del client.extensions["plan"]  # a typed run: the removal is genuine and reaches the model
        else:
            client.user(f"typed {turn}")
        if turn >= 8:
            expected_head = client.head()
        out = st.stabilize_sync(client.request())["messages"]
        assert out == [{"role": "system", "content": stable(expected_head)}, *copy.deepcopy(client.body)], f"turn {turn}"
        outputs.append(out)
        client.assistant()
    _assert_monotone(outputs[:8])
    _assert_monotone(outputs[8:])
    assert st.stats["drift"] == 1  # only the genuine change


def test_head_policy_pin_delivers_section_changes_as_notes():
    client = PiClient(extensions={"todo": "- [ ] a"})
    st = _stabilizer(head_policy="pin")
    pinned = client.head()
    outputs, notes = [], []
    for turn in range(10):
        client.user(f"t{turn}")
        if turn == 3:
            client.extensions["todo"] = "- [x] a"
            notes.append((len(client.body) - 1, {"role": "system", "content": updated("todo", "- [x] a")}))
        if turn == 7:
            del client.extensions["todo"]
            notes.append((len(client.body) - 1, {"role": "system", "content": removed("todo")}))
        out = st.stabilize_sync(client.request(), target=Target(provider="openai"))
        assert out["messages"] == _expected(pinned, copy.deepcopy(client.body), notes), f"turn {turn}"
        outputs.append(out["messages"])
        client.assistant()
    _assert_monotone(outputs)
    assert st.stats["drift"] == 0


def test_tenants_never_share_a_journal():
    store = MemoryStore(100, 3600)
    st = Stabilizer(Settings(path_check="absolute"), store=store)
    a = PiClient(memory=["tenant A secret"], session="same-id")
    a.user("hi")
    request = a.request()
    request["metadata"]["user_api_key_hash"] = "key-a"
    st.stabilize_sync(request)
    b = PiClient(memory=["tenant B fact"], session="same-id")
    b.user("hi")
    request = b.request()
    request["metadata"]["user_api_key_hash"] = "key-b"
    out = st.stabilize_sync(request)
    assert "tenant B fact" in out["messages"][0]["content"]  # B's own first head, not A's snapshot
    assert "tenant A secret" not in out["messages"][0]["content"]
    assert len(store) == 2


@pytest.mark.parametrize("turns", [12])
def test_retries_with_the_same_call_id_do_not_duplicate_notes(turns):
    client = PiClient(memory=["A", "B"])
    st = _stabilizer()
    client.user("t0")
    st.stabilize_sync(client.request(litellm_call_id="call-0"))
    client.memory.remove("A")
    client.user("t1")
    first = st.stabilize_sync(client.request(litellm_call_id="call-1"))
    again = st.stabilize_sync(copy.deepcopy(first))  # the deployment hook / a retry: same call id
    assert again["messages"] == first["messages"]


@pytest.mark.parametrize("preset, before, after", [
    ("todays-date", "Today's date: Tue Dec 01 2026", "Today's date: Wed Dec 02 2026"),
    ("git-status", "gitStatus: This is the git status at the start of the conversation.\nCurrent branch: main\n\n"
                   "Status:\nM src/a.py\n\nRecent commits:\nabc123 fix a\ndef456 add b",
     "gitStatus: This is the git status at the start of the conversation.\nCurrent branch: main\n\n"
     "Status:\nM src/a.py\nM src/c.py\n\nRecent commits:\n789abc wip\nabc123 fix a"),
])
def test_volatile_presets_for_opencode_and_claude_code(preset, before, after):
    st = _stabilizer(volatile_presets=[preset])
    prefix = "You are a coding agent.\n\n"
    body = [{"role": "user", "content": "hi"}]
    st.stabilize_sync({"model": "m", "messages": [{"role": "system", "content": prefix + before}, *body],
                       "metadata": {"session_id": f"preset-{preset}"}})
    body += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    out = st.stabilize_sync({"model": "m", "messages": [{"role": "system", "content": prefix + after}, *body],
                             "metadata": {"session_id": f"preset-{preset}"}}, target=Target(provider="openai"))
    assert out["messages"][0]["content"] == prefix + before
    assert out["messages"][-1] == {"role": "system", "content": volatile_note(preset, after)}
    assert st.stats["drift"] == 0
