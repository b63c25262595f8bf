"""Builders for realistic agent traffic: a pi >= 0.86 sectioned system prompt, long tool
lists with schemas, tool calls and results, image parts. Deterministic (seeded)."""
from __future__ import annotations

import copy
import json
import random

PI_SUFFIX = "node_modules/@earendil-works/pi-coding-agent"

_WORDS = (
    "the agent reads files before editing them and keeps changes small so that reviews stay easy "
    "prefer ripgrep over grep when searching a repository and never print secrets from the environment "
    "run the test suite after each change report failures with the command that reproduces them "
    "commit messages say why a change was made tools return structured output that the model parses "
    "long outputs are truncated with a note sessions resume from the journal compaction summarises history"
).split()

TOOL_NAMES = [
    "read", "write", "edit", "bash", "grep", "find", "ls", "glob", "web_fetch", "web_search",
    "todo_write", "todo_read", "task", "notebook_edit", "notebook_read", "git_status", "git_diff",
    "git_log", "git_commit", "lsp_definition", "lsp_references", "lsp_hover", "lsp_symbols",
    "mcp__github__create_issue", "mcp__github__list_prs", "mcp__github__get_pr", "mcp__slack__post",
    "mcp__linear__create", "ask_user", "plan_update", "memory_write", "memory_read", "subagent",
    "screenshot", "browser_open",
]


def sentence(rng: random.Random, n: int = 14) -> str:
    words = [rng.choice(_WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def paragraph(rng: random.Random, sentences: int = 6) -> str:
    return " ".join(sentence(rng, rng.randint(8, 20)) for _ in range(sentences))


def install_root(variant: str = "a") -> str:
    return {
        "a": f"/home/alice/.nvm/versions/node/v22.11.0/lib/{PI_SUFFIX}",
        "b": f"/home/alice/.nvm/versions/node/v23.3.0/lib/{PI_SUFFIX}",
        "c": f"/opt/homebrew/lib/{PI_SUFFIX}",
    }[variant]


def tool_lines(names: list[str], seed: int) -> str:
    # A tool's description depends on its name only, so any order lists the same tools.
    return "\n".join(f"- {name}: {sentence(random.Random(f'{seed}-{name}'), 10)}" for name in names)


def pi_sections(
    *,
    root: str | None = None,
    tool_order: list[str] | None = None,
    seed: int = 7,
    target_tokens: int = 21000,
    extra_sections: dict[str, str] | None = None,
) -> dict[str, str]:
    """pi's sections in order: preamble (untagged), tools, rules, docs, addendum, project_context, skills, cwd."""
    rng = random.Random(seed)
    root = root or install_root("a")
    names = tool_order or TOOL_NAMES
    sections = {
        "preamble": "You are pi, an expert coding assistant operating inside a terminal. " + paragraph(rng, 4),
        "tools": "Available tools:\n" + tool_lines(names, seed) + "\n\nUse tools instead of guessing.",
        "rules": "\n".join(f"- {sentence(rng)}" for _ in range(25)),
        "docs": (
            f"Main documentation: {root}/README.md\n"
            f"Additional docs: {root}/docs\n"
            f"Examples: {root}/examples (extensions, custom tools, SDK)\n"
            f"When asked about pi itself, read ({root}/docs/extensions.md) first."
        ),
        "addendum": paragraph(rng, 5),
        "project_context": "# AGENTS.md",
        "skills": "\n".join(f"- skill-{i}: {sentence(rng, 9)} (~/.pi/agent/skills/skill-{i}/SKILL.md)" for i in range(12)),
        "cwd": "Current working directory: /home/alice/src/webshop",
    }
    # Grow the project context (an AGENTS.md) until the prompt reaches ~target_tokens (4 chars/token).
    # (sized without the docs section, so the install root's length never changes the content)
    size = sum(len(v) for k, v in sections.items() if k != "docs") + 400
    paragraphs = []
    while size < target_tokens * 4:
        paragraphs.append(paragraph(rng, 6))
        size += len(paragraphs[-1]) + 2
    sections["project_context"] += "\n\n" + "\n\n".join(paragraphs)
    if extra_sections:
        sections.update(extra_sections)
    return sections


def render_pi(sections: dict[str, str]) -> str:
    parts = []
    for name, text in sections.items():
        parts.append(text if name == "preamble" else f"<{name}>\n{text}\n</{name}>")
    return "\n\n".join(parts)


def pi_system_prompt(**kwargs) -> str:
    return render_pi(pi_sections(**kwargs))


def openai_tools(order: list[str] | None = None, seed: int = 3) -> list[dict]:
    tools = []
    for name in order or TOOL_NAMES:
        rng = random.Random(f"{seed}-{name}")
        tools.append({
            "type": "function",
            "function": {
                "name": name,
                "description": sentence(rng, 16),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": sentence(rng, 6)},
                        "limit": {"type": "integer", "minimum": 1, "description": sentence(rng, 5)},
                        "options": {"type": "object", "properties": {"recursive": {"type": "boolean"}}},
                    },
                    "required": ["path"],
                },
            },
        })
    return tools


def anthropic_tools(order: list[str] | None = None, seed: int = 3) -> list[dict]:
    return [
        {"name": t["function"]["name"], "description": t["function"]["description"], "input_schema": t["function"]["parameters"]}
        for t in openai_tools(order, seed)
    ]


def responses_tools(order: list[str] | None = None, seed: int = 3) -> list[dict]:
    return [
        {"type": "function", "name": t["function"]["name"], "description": t["function"]["description"],
         "parameters": t["function"]["parameters"]}
        for t in openai_tools(order, seed)
    ]


def shuffled(names: list[str], seed: int) -> list[str]:
    out = list(names)
    random.Random(seed).shuffle(out)
    return out


TINY_PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def conversation(turns: int, seed: int = 11) -> list[dict]:
    """User/assistant turns with tool calls, tool results and an image part."""
    rng = random.Random(seed)
    messages: list[dict] = []
    for i in range(turns):
        if i == 1:
            messages.append({"role": "user", "content": [
                {"type": "text", "text": "What is wrong with this screenshot?"},
                {"type": "image_url", "image_url": {"url": TINY_PNG}},
            ]})
        else:
            messages.append({"role": "user", "content": f"Turn {i}: {sentence(rng)}"})
        call_id = f"call_{seed}_{i}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "read", "arguments": json.dumps({"path": f"src/f{i}.py"})}}
        ]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": paragraph(rng, 3)})
        messages.append({"role": "assistant", "content": paragraph(rng, 1)})
    return messages


def chat_request(system: str, messages: list[dict], tools: list[dict] | None = None, **extra) -> dict:
    data = {"model": "chat-model", "messages": [{"role": "system", "content": system}, *copy.deepcopy(messages)]}
    if tools is not None:
        data["tools"] = copy.deepcopy(tools)
    data.update(extra)
    return data
