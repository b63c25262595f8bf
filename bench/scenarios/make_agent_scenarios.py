"""Write the per-agent sessions that bench/agents.py replays (JSON Lines, with the agent's headers).

Each line is one request: the body, plus ``session_id`` (the replay's cache slot),
``route``, ``target`` and ``headers`` (what the agent sends; the plugin runs with no
setting changed, so it must find the agent and its session from these alone). Each
agent has a noisy variant (what the agent really sends) and a clean one (the same
session from a perfectly stable client, the oracle: it appends a user note where the
noisy one rewrote its head).

- agents-claude-code (/v1/messages to a self-hosted target): the billing block with a new
  ``cch`` every request, the last ``cache_control`` mark moving to the newest message, MCP
  tools in another order (turn 3), a git status change (5), a date rollover (7), and an
  Explore subagent interleaved under the same session id (its own cache slot).
- agents-opencode (chat): indented ``<env>`` lines with ``Today's date: Tue Dec 01 2026``
  rolling over (6), instructions in a second system message, ``x-session-affinity``.
- agents-codex (/v1/responses): ``originator: codex_cli_rs``, ``session_id`` header,
  ``prompt_cache_key``, ``<environment_context>`` items appended at the tail.
- agents-unknown (chat, no headers an agent profile knows): a system prompt with a
  seconds-resolution timestamp and a message counter that change on every request.

    python -m bench.scenarios.make_agent_scenarios
"""
from __future__ import annotations

import copy
import json
import random
from pathlib import Path

from bench.scenarios.make_scenarios import write_sessions
from harness.agent_requests import (
    MCP_TOOLS,
    claude_code_body,
    claude_code_env,
    claude_code_git_status,
    claude_code_headers,
    claude_code_prompt,
    claude_code_tools,
    codex_headers,
    opencode_env,
    opencode_headers,
)
from harness.realistic import TOOL_NAMES, openai_tools, paragraph, responses_tools, shuffled

HERE = Path(__file__).resolve().parent

TURNS = 12
SELF_HOSTED = {"provider": "hosted_vllm"}


def _cc_round(body: list, rng: random.Random, n: int) -> None:
    body.append({"role": "assistant", "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": f"toolu_{n:03d}", "name": "Read", "input": {"file_path": f"/home/alice/src/api/m{n}.py"}}]})
    body.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n:03d}",
                                              "content": paragraph(rng, 2)}]})


def claude_code(noisy: bool) -> list[dict]:
    rng = random.Random(21)
    prompt = claude_code_prompt(rng)
    sub_prompt = claude_code_prompt(random.Random(22), "Given the user's message, search the codebase and report.")
    date, status, mcp = "2026-12-01", "M src/app.py", list(MCP_TOOLS)
    body: list[dict] = []
    sub: list[dict] = []
    sub_pending: list[str] = []  # clean client: what the subagent has not been told yet
    lines = []
    headers = claude_code_headers()
    for turn in range(TURNS):
        body.append({"role": "user", "content": f"Task {turn}: {paragraph(rng, 1)}"})
        notes = []
        if turn == 3 and noisy:
            mcp = shuffled(MCP_TOOLS, 4)  # MCP servers answered in another order
        if turn == 5:
            status = "M src/app.py\nM src/db.py"
            notes.append("(note) " + claude_code_git_status(status))
        if turn == 7:
            date = "2026-12-02"
            notes.append("(note) Today's date: 2026-12-02")
        if not noisy:  # the stable client appends what changed instead of rewriting its head
            body += [{"role": "user", "content": note} for note in notes]
            sub_pending += notes
        shown_date, shown_status = (date, status) if noisy else ("2026-12-01", "M src/app.py")
        request = claude_code_body(turn, body, prompt=prompt, env=claude_code_env(shown_date),
                                   git=claude_code_git_status(shown_status), tools=claude_code_tools(mcp),
                                   billing=noisy)
        if not noisy:
            request = _without_marks(request)
        lines.append({**request, "session_id": "cc-main", "route": "messages", "target": SELF_HOSTED, "headers": headers})
        if turn in (2, 3, 4, 8, 9):  # an Explore subagent, same session id, its own head
            sub.append({"role": "user", "content": f"Find where m{turn} is defined."})
            if sub and sub_pending and not noisy:
                sub += [{"role": "user", "content": note} for note in sub_pending]
                sub_pending = []
            request = claude_code_body(100 + turn, sub, prompt=sub_prompt, env=claude_code_env(shown_date),
                                       git=claude_code_git_status(shown_status), tools=claude_code_tools(MCP_TOOLS)[:6],
                                       billing=noisy)
            if not noisy:
                request = _without_marks(request)
            lines.append({**request, "session_id": "cc-sub", "route": "messages", "target": SELF_HOSTED,
                          "headers": headers})
            sub.append({"role": "assistant", "content": [{"type": "text", "text": f"m{turn} is in src/m{turn}.py."}]})
        _cc_round(body, rng, turn)
        body.append({"role": "assistant", "content": [{"type": "text", "text": f"Finished task {turn}."}]})
    return lines


def _without_marks(request: dict) -> dict:
    out = copy.deepcopy(request)
    for block in out["system"]:
        block.pop("cache_control", None)
    for message in out["messages"]:
        content = message["content"]
        if isinstance(content, list):
            for part in content:
                part.pop("cache_control", None)
    return out


def opencode(noisy: bool) -> list[dict]:
    rng = random.Random(31)
    base = ("You are opencode, an interactive CLI tool that helps users with software engineering tasks.\n\n"
            + "\n\n".join(paragraph(rng, 5) for _ in range(18)))
    instructions = "Instructions from: /home/alice/src/web/AGENTS.md\n" + paragraph(rng, 4)
    date = "Tue Dec 01 2026"
    order = list(TOOL_NAMES[:16])
    body: list[dict] = []
    lines = []
    for turn in range(TURNS):
        body.append({"role": "user", "content": f"Step {turn}: {paragraph(rng, 1)}"})
        if turn == 6:
            if noisy:
                date = "Wed Dec 02 2026"
            else:
                body.append({"role": "user", "content": "(note) Today's date: Wed Dec 02 2026"})
        messages = [{"role": "system", "content": base + "\n\n" + opencode_env(date)},
                    {"role": "system", "content": instructions}, *copy.deepcopy(body)]
        lines.append({"model": "local", "max_tokens": 16, "messages": messages, "tools": openai_tools(order),
                      "session_id": "opencode", "target": SELF_HOSTED, "headers": opencode_headers()})
        cid = f"call_{turn}"
        body.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "read", "arguments": json.dumps({"path": f"src/p{turn}.ts"})}}]})
        body.append({"role": "tool", "tool_call_id": cid, "content": paragraph(rng, 2)})
        body.append({"role": "assistant", "content": f"Updated src/p{turn}.ts."})
    return lines


def codex(noisy: bool) -> list[dict]:
    rng = random.Random(41)
    instructions = ("You are Codex, a coding agent based on GPT-5. You and the user share the same workspace.\n\n"
                    + "\n\n".join(paragraph(rng, 5) for _ in range(16)))
    session = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    items: list[dict] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text":
                          "<environment_context>\n  <cwd>/home/alice/src/api</cwd>\n  <shell>bash</shell>\n"
                          "</environment_context>"}]}]
    lines = []
    for turn in range(TURNS):
        items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text":
                      f"Request {turn}: {paragraph(rng, 1)}"}]})
        if turn == 6:  # the date arrives as a new item at the tail: already stable
            items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text":
                          "<environment_context>\n  <current_date>2026-12-02</current_date>\n</environment_context>"}]})
        request = {"model": "local", "max_output_tokens": 16, "instructions": instructions, "input": copy.deepcopy(items),
                   "tools": responses_tools(TOOL_NAMES[:20]), "prompt_cache_key": session, "store": False}
        lines.append({**request, "session_id": "codex", "route": "responses", "target": SELF_HOSTED,
                      "headers": codex_headers(session)})
        cid = f"call_{turn}"
        items.append({"type": "function_call", "call_id": cid, "name": "shell",
                      "arguments": json.dumps({"command": ["rg", "-n", f"m{turn}"]})})
        items.append({"type": "function_call_output", "call_id": cid, "output": paragraph(rng, 2)})
        items.append({"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": f"Handled request {turn}."}]})
    return lines


def unknown(noisy: bool) -> list[dict]:
    rng = random.Random(51)
    base = "You are Atlas, a helpful coding companion.\n\n" + "\n\n".join(paragraph(rng, 5) for _ in range(28))
    body: list[dict] = []
    lines = []
    for turn in range(TURNS):
        body.append({"role": "user", "content": f"Question {turn}: {paragraph(rng, 1)}"})
        seconds = 7 + turn * 37
        clock = f"2026-12-01 10:{seconds // 60:02d}:{seconds % 60:02d}"
        if noisy:
            shown_clock, count = clock, len(body)
        else:  # the stable client keeps its head and tells the model once, when the values first change
            shown_clock, count = "2026-12-01 10:00:07", 1
            if turn == 1:
                body.append({"role": "user", "content": f"(note) System prompt last recompiled: {clock}\n"
                                                        f"Messages in this conversation: {len(body) - 1}"})
        system = (f"{base}\n\nSystem prompt last recompiled: {shown_clock}\nMessages in this conversation: {count}\n"
                  "Memory usage: 412 MB")
        lines.append({"model": "local", "max_tokens": 16, "messages": [{"role": "system", "content": system},
                                                                        *copy.deepcopy(body)],
                      "tools": openai_tools(TOOL_NAMES[:8]), "session_id": "unknown", "target": SELF_HOSTED,
                      "headers": {"user-agent": "OpenAI/Python 1.99.1"}})
        body.append({"role": "assistant", "content": f"Answer {turn}: {paragraph(rng, 1)}"})
    return lines


AGENTS = {"claude-code": claude_code, "opencode": opencode, "codex": codex, "unknown": unknown}


def main() -> None:
    write_sessions(AGENTS, prefix="agents-")


if __name__ == "__main__":
    main()
