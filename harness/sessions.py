"""A scripted pi-like client: a sectioned head that it re-renders, and a growing history."""
from __future__ import annotations

import copy
import json
import random

from harness.realistic import openai_tools, paragraph, pi_sections, render_pi

NOTIFICATION = "<background-task-notification>\ntask build-42 finished: exit 0\n</background-task-notification>"


class PiClient:
    def __init__(self, *, memory: list[str] | None = None, extensions: dict[str, str] | None = None,
                 session: str = "pi-session", seed: int = 5, tokens: int = 6000) -> None:
        self.sections = pi_sections(target_tokens=tokens, seed=seed)
        self.memory = list(memory or [])
        self.extensions = dict(extensions or {})
        self.body: list[dict] = []
        self.session = session
        self.rng = random.Random(seed)
        self.turn = 0
        self.tools = openai_tools()

    def head(self) -> str:
        sections = dict(self.sections)
        for name, text in self.extensions.items():
            sections[name] = text
        if self.memory:
            sections["memory"] = "\n".join(f"- {m}" for m in self.memory)
        return render_pi(sections)

    def user(self, text: str) -> None:
        self.body.append({"role": "user", "content": text})

    def tool_round(self) -> None:
        self.turn += 1
        cid = f"call_{self.turn}"
        self.body.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "read", "arguments": json.dumps({"path": f"f{self.turn}"})}}]})
        self.body.append({"role": "tool", "tool_call_id": cid, "content": paragraph(self.rng, 2)})

    def assistant(self, text: str = "Done.") -> None:
        self.body.append({"role": "assistant", "content": text})

    def system(self, text: str) -> None:
        self.body.append({"role": "system", "content": text})

    def request(self, **extra) -> dict:
        data = {"model": "chat-model", "messages": [{"role": "system", "content": self.head()}, *copy.deepcopy(self.body)],
                "tools": copy.deepcopy(self.tools), "metadata": {"session_id": self.session}}
        data.update(extra)
        return data


def removed(name: str) -> str:
    return f'Removed system prompt section "{name}".'


def updated(name: str, text: str) -> str:
    return f'Updated system prompt section "{name}":\n\n<{name}>\n{text}\n</{name}>'


def memory_flip_turn(client: PiClient, turn: int, label: str = "") -> None:
    """Turn ``turn`` of the replica and load script, before the request: a typed prompt each
    turn (``label`` before its text), a memory write at turn 2, a notification run that flips
    the ``todo`` extension section at turn 3, a memory deletion at turn 6."""
    if turn == 3:
        client.user(NOTIFICATION)
        client.system(removed("todo"))
        client.tool_round()
        client.user(f"{label}queued follow-up")
        client.system(updated("todo", "- [ ] ship"))
    else:
        client.user(f"{label}typed {turn}")
    if turn == 2:
        client.memory.append("Deploys frozen on Fridays")
    if turn == 6:
        client.memory.remove("Project uses uv")


def resume_session_requests():
    """The store tests' session, which a fresh process resumes from Redis: a pi session with a
    notification-run flip and a memory deletion; yields each turn's request."""
    client = PiClient(memory=["A fact", "B fact"], extensions={"todo": "- [ ] a"}, session="resume-me")
    for turn in range(8):
        if turn == 3:
            client.user(NOTIFICATION)
            client.system(removed("todo"))
        else:
            client.user(f"typed {turn}")
        if turn == 5:
            client.memory.remove("A fact")
        yield client.request()
        client.assistant()
