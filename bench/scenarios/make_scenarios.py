"""Write the bundled example sessions (JSON Lines) that `litellm-prefix replay` and `make bench` use.

Three agents, each in a noisy variant (what the agent really sends) and a clean one (the
same session from a perfectly stable client: the oracle):

- pi.*.jsonl (chat): sectioned head, 35 tools, tool calls, memory write (turn 2) and
  deletion (8), tool-order shuffle (3), a notification-run flip of an extension section (4),
  a date line that rolls over (6), a moved install path (7), a mid-conversation reminder (9)
  on a target that hoists system messages (LiteLLM's openai_system_messages_first).
- claude-code.*.jsonl (/v1/messages): system blocks with a gitStatus block that changes (5),
  MCP tools in discovery order (3), a "# Memory" block losing an entry (7).
- codex.*.jsonl (/v1/responses): instructions with a date line that rolls over (6), flat
  tools reshuffled (3), developer reminders mid-conversation (8) on a hoisting target.

The clean client carries the same information without moving the head: it appends a
user message where the noisy one rewrote its head (what a stable agent would do).

    python -m bench.scenarios.make_scenarios        # rewrites bench/scenarios/*.jsonl
"""
from __future__ import annotations

import copy
import json
import random
from pathlib import Path

from harness.realistic import (
    PI_SUFFIX,
    TOOL_NAMES,
    anthropic_tools,
    openai_tools,
    paragraph,
    pi_sections,
    render_pi,
    responses_tools,
    shuffled,
)
from harness.sessions import NOTIFICATION, removed, updated

HERE = Path(__file__).resolve().parent

TURNS = 12
HOISTING = {"provider": "openai", "system_messages_first": True}
ROOT_A = f"/home/alice/.nvm/versions/node/v22.11.0/lib/{PI_SUFFIX}"
ROOT_B = f"/home/alice/.nvm/versions/node/v23.3.0/lib/{PI_SUFFIX}"


def _tool_round(body: list, rng: random.Random, n: int, shape: str = "chat") -> None:
    cid = f"call_{n}"
    if shape == "chat":
        body.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "read", "arguments": json.dumps({"path": f"src/m{n}.py"})}}]})
        body.append({"role": "tool", "tool_call_id": cid, "content": paragraph(rng, 2)})
    elif shape == "messages":
        body.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "read",
                                                       "input": {"path": f"src/m{n}.py"}}]})
        body.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}",
                                                  "content": paragraph(rng, 2)}]})
    else:
        body.append({"type": "function_call", "call_id": cid, "name": "shell",
                     "arguments": json.dumps({"command": ["rg", "-n", f"m{n}"]})})
        body.append({"type": "function_call_output", "call_id": cid, "output": paragraph(rng, 2)})


def pi(noisy: bool) -> list[dict]:
    rng = random.Random(11)
    memory = ["User prefers tabs", "Project uses uv", "Run tests with pytest -x"]
    sections = pi_sections(root=ROOT_A, target_tokens=5000, seed=3)
    sections["cwd"] += "\nCurrent date: 2026-12-01"
    order = list(TOOL_NAMES)
    body: list[dict] = []
    lines = []
    for turn in range(TURNS):
        if turn == 4:
            body.append({"role": "user", "content": NOTIFICATION})
            if noisy:
                body.append({"role": "system", "content": removed("todo")})
            _tool_round(body, rng, 100 + turn)
            body.append({"role": "user", "content": "queued: also bump the version"})
            if noisy:
                body.append({"role": "system", "content": updated("todo", "- [ ] ship the release")})
        else:
            body.append({"role": "user", "content": f"Step {turn}: {paragraph(rng, 1)}"})
        if turn == 2:
            memory.append("Deploys are frozen on Fridays")  # the write is in the tool history either way
        if turn == 3 and noisy:
            order = shuffled(TOOL_NAMES, 3)
        if turn == 6:
            if noisy:
                sections["cwd"] = sections["cwd"].replace("2026-12-01", "2026-12-02")
            else:
                body.append({"role": "user", "content": "(note) Current date: 2026-12-02"})
        if turn == 7 and noisy:
            sections["docs"] = sections["docs"].replace(ROOT_A, ROOT_B)
        if turn == 8:
            memory.remove("Project uses uv")
            if not noisy:
                body.append({"role": "user", "content": "(note) Memory entry removed: Project uses uv"})
        if turn == 9:
            reminder = "Reminder: keep the todo list up to date."
            body.append({"role": "system" if noisy else "user", "content": reminder})
        head = dict(sections)
        head["todo"] = "- [ ] ship the release"
        shown_memory = memory if noisy else ["User prefers tabs", "Project uses uv", "Run tests with pytest -x"]
        head["memory"] = "\n".join(f"- {m}" for m in shown_memory)
        tools = openai_tools(order if noisy else TOOL_NAMES)
        request = {"model": "local", "max_tokens": 1, "messages": [{"role": "system", "content": render_pi(head)},
                                                                     *copy.deepcopy(body)], "tools": tools}
        lines.append({**request, "session_id": f"pi-{'noisy' if noisy else 'clean'}", "target": HOISTING})
        _tool_round(body, rng, turn)
        body.append({"role": "assistant", "content": f"Done with step {turn}."})
    return lines


def claude_code(noisy: bool) -> list[dict]:
    rng = random.Random(12)
    base = ("You are Claude Code, an interactive CLI tool that helps users with software engineering tasks.\n\n"
            + "\n\n".join(paragraph(rng, 6) for _ in range(20)))
    git = ("gitStatus: This is the git status at the start of the conversation.\nCurrent branch: main\n\n"
           "Status:\nM src/app.py\n\nRecent commits:\na1b2c3d fix login\nd4e5f6a add tests")
    memory = ["Use ruff for linting", "Never commit .env files", "Prefer small PRs"]
    names = [n for n in TOOL_NAMES]
    order = list(names)
    body: list[dict] = []
    lines = []
    for turn in range(TURNS):
        body.append({"role": "user", "content": f"Task {turn}: {paragraph(rng, 1)}"})
        if turn == 3 and noisy:
            order = shuffled(names, 8)  # MCP servers answered in another order
        if turn == 5:
            if noisy:
                git = git.replace("M src/app.py", "M src/app.py\nM src/db.py")
            else:
                body.append({"role": "user", "content": "(note) git status: M src/app.py, M src/db.py"})
        if turn == 7:
            memory.remove("Prefer small PRs")
            if not noisy:
                body.append({"role": "user", "content": "(note) Memory entry removed: Prefer small PRs"})
        shown = memory if noisy else ["Use ruff for linting", "Never commit .env files", "Prefer small PRs"]
        system = [{"type": "text", "text": base},
                  {"type": "text", "text": "# Memory\n" + "\n".join(f"- {m}" for m in shown) + "\n\n" + git}]
        tools = anthropic_tools(order)
        tools[-1]["cache_control"] = {"type": "ephemeral"}
        request = {"model": "local", "max_tokens": 1, "system": system, "messages": copy.deepcopy(body), "tools": tools}
        lines.append({**request, "session_id": f"claude-{'noisy' if noisy else 'clean'}", "route": "messages",
                      "target": {"provider": "anthropic"}})
        _tool_round(body, rng, turn, "messages")
        body.append({"role": "assistant", "content": [{"type": "text", "text": f"Finished task {turn}."}]})
        body.append({"role": "user", "content": "ok"})
    return lines


def codex(noisy: bool) -> list[dict]:
    rng = random.Random(13)
    instructions = ("You are Codex, a coding agent running in a terminal.\n\n"
                    + "\n\n".join(paragraph(rng, 5) for _ in range(16)) + "\n\nCurrent date: 2026-12-01")
    names = [n for n in TOOL_NAMES[:20]]
    order = list(names)
    items: list[dict] = [{"type": "message", "role": "developer",
                          "content": "<environment_context>cwd: /home/alice/src/api</environment_context>"}]
    lines = []
    for turn in range(TURNS):
        items.append({"type": "message", "role": "user", "content": f"Request {turn}: {paragraph(rng, 1)}"})
        if turn == 3 and noisy:
            order = shuffled(names, 9)
        if turn == 6:
            if noisy:
                instructions = instructions.replace("2026-12-01", "2026-12-02")
            else:
                items.append({"type": "message", "role": "user", "content": "(note) Current date: 2026-12-02"})
        if turn == 8:
            items.append({"type": "message", "role": "developer" if noisy else "user",
                          "content": "Reminder: approvals are required for writes."})
        request = {"model": "local", "max_output_tokens": 16, "instructions": instructions,
                   "input": copy.deepcopy(items), "tools": responses_tools(order)}
        lines.append({**request, "session_id": f"codex-{'noisy' if noisy else 'clean'}", "route": "responses",
                      "target": HOISTING})
        _tool_round(items, rng, turn, "responses")
        items.append({"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": f"Handled request {turn}."}]})
    return lines


def write_sessions(builders, prefix: str = "") -> None:
    """Write ``<prefix><name>.noisy.jsonl`` and ``.clean.jsonl`` for each ``name: build(noisy)``."""
    for name, build in builders.items():
        for variant in ("noisy", "clean"):
            path = HERE / f"{prefix}{name}.{variant}.jsonl"
            with path.open("w", encoding="utf-8") as fh:
                for line in build(variant == "noisy"):
                    fh.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
            print(path)


def main() -> None:
    write_sessions({"pi": pi, "claude-code": claude_code, "codex": codex})


if __name__ == "__main__":
    main()
