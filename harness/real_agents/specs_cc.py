"""Claude Code 2.1.332, Codex 0.171.0 and opencode 1.18.33, run headless against the proxy.
(Claude Code was explored at 2.1.197; what 2.1.332 sends differently is at the end of explore_cc.md.)

Found by running each CLI through a real LiteLLM proxy in front of a recording scripted model
(facts and wire details: ``explore_cc.md`` beside this file):

- Claude Code (``@anthropic-ai/claude-code``, a Bun binary): ``ANTHROPIC_BASE_URL`` (no ``/v1``)
  + ``ANTHROPIC_AUTH_TOKEN`` (sent as ``Authorization: Bearer``); every model alias (sonnet, opus,
  haiku, subagent) is pointed at the proxy group, or the title/subagent calls ask for a
  ``claude-*`` name the proxy does not serve. ``-p`` prints one answer and exits; ``--continue``
  continues the workspace's last session (the same ``x-claude-code-session-id``);
  ``--dangerously-skip-permissions`` needs ``IS_SANDBOX=1`` when run as root. ``/compact`` as the
  ``-p`` prompt compacts the continued session. ``SHELL`` is set or the system prompt says
  ``Shell: unknown``. Route ``/v1/messages?beta=true``.
- Codex (``@openai/codex``, a Rust binary): a custom ``model_provider`` in ``~/.codex/config.toml``
  with ``wire_api = "responses"`` against ``<proxy>/v1`` and ``env_key``. ``codex exec
  --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check``; ``codex exec resume --last``
  continues the last session of the cwd. Subagents (``multi_agent`` is on by default in 0.171:
  the ``multi_agent_v1`` tool namespace, ``spawn_agent``) run asynchronously: ``codex exec`` exits
  when the main agent answers, so a script must keep the main agent busy until the subagent is
  done. Compaction is automatic: ``model_auto_compact_token_limit`` below the session's size makes
  the next turn compact first (``compact_argv``). The proxy deployment must bridge /v1/responses
  to chat completions (``use_chat_completions_api: true``) for a chat-only model.
- opencode (``opencode-ai``, a Bun binary): an ``@ai-sdk/openai-compatible`` provider in
  ``~/.config/opencode/opencode.json`` against ``<proxy>/v1``; ``opencode run --auto`` (approve
  every tool) and ``--continue``. ``run`` joins its message arguments with spaces and wraps any
  argument holding a space in double quotes, so the prompt goes as one argument per word after
  ``--`` (the model sees it byte for byte). A new session first sends a title request (its own
  system prompt, no tools). The ``task`` tool runs a subagent (``subagent_type`` ``general``).
"""
from __future__ import annotations

import json
import re

from harness.real_agents.spec import AgentSpec, RunContext

# -- Claude Code --------------------------------------------------------------------------


def _claude_files(ctx: RunContext) -> dict[str, str]:
    """A project MCP server (``.mcp.json``), approved for the project, where the user added one (and
    none in it once the user removed it)."""
    if not ctx.mcp:
        return {"./.mcp.json": json.dumps({"mcpServers": {}})} if (ctx.workspace / ".mcp.json").exists() else {}
    servers = {"mcpServers": {"codename": {"command": ctx.mcp[0], "args": list(ctx.mcp[1:])}}}
    return {"./.mcp.json": json.dumps(servers, indent=2),
            "~/.claude/settings.json": json.dumps({"enableAllProjectMcpServers": True}, indent=2)}


def _claude_env(ctx: RunContext) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": ctx.base_url,
        "ANTHROPIC_AUTH_TOKEN": ctx.api_key,
        "ANTHROPIC_MODEL": ctx.model,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": ctx.model,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": ctx.model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": ctx.model,
        "ANTHROPIC_SMALL_FAST_MODEL": ctx.model,
        "CLAUDE_CODE_SUBAGENT_MODEL": ctx.model,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no telemetry, error reports, update checks
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "IS_SANDBOX": "1",  # --dangerously-skip-permissions refuses root otherwise
        "SHELL": "/bin/bash",
    }


_CLAUDE_FLAGS = ["-p", "--dangerously-skip-permissions"]


def _claude_argv(ctx: RunContext, prompt: str, resume: bool) -> list[str]:
    return [*_CLAUDE_FLAGS, *(["--continue"] if resume else []), prompt]


def _claude_compact(ctx: RunContext) -> list[str]:
    return [*_CLAUDE_FLAGS, "--continue", "/compact"]


# -- Codex --------------------------------------------------------------------------------

CODEX_KEY_ENV = "LITELLM_PROXY_API_KEY"


def _codex_files(ctx: RunContext) -> dict[str, str]:
    config = "\n".join([
        f"model = {json.dumps(ctx.model)}",
        'model_provider = "litellm"',
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        "check_for_update_on_startup = false",
        "",
        "[model_providers.litellm]",
        'name = "LiteLLM"',
        f"base_url = {json.dumps(ctx.base_url + '/v1')}",
        f"env_key = {json.dumps(CODEX_KEY_ENV)}",
        'wire_api = "responses"',
        "",
        "[analytics]",
        "enabled = false",
        "",
    ])
    if ctx.mcp:  # an MCP server the user added
        config += "\n".join(["[mcp_servers.codename]", f"command = {json.dumps(ctx.mcp[0])}",
                              f"args = {json.dumps(list(ctx.mcp[1:]))}", ""])
    return {"~/.codex/config.toml": config}


def _codex_env(ctx: RunContext) -> dict[str, str]:
    return {CODEX_KEY_ENV: ctx.api_key, "SHELL": "/bin/bash"}


_CODEX_FLAGS = ["--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check"]


def _codex_argv(ctx: RunContext, prompt: str, resume: bool) -> list[str]:
    return ["exec", *(["resume", "--last"] if resume else []), *_CODEX_FLAGS, prompt]


# The next turn compacts first when the session's last token count is over this limit (every
# Codex request is ~10k tokens by its own head alone). The turn itself must make no tool call:
# a tool call's follow-up re-checks the limit, compacts again and replays the script from its
# start (the compacted history no longer holds the calls), without end.
CODEX_COMPACT_LIMIT = 1000


def _codex_compact(ctx: RunContext) -> list[str]:
    return ["exec", "-c", f"model_auto_compact_token_limit={CODEX_COMPACT_LIMIT}", "resume", "--last", *_CODEX_FLAGS,
            "(agent: codex) Compact the history, then say so.\n@script: answer compacted"]


# -- opencode -----------------------------------------------------------------------------


def _opencode_files(ctx: RunContext) -> dict[str, str]:
    config = {
        "provider": {"litellm": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "LiteLLM",
            "options": {"baseURL": f"{ctx.base_url}/v1", "apiKey": ctx.api_key},
            # (attachment + modalities: the model takes images, so a read image goes to it)
            "models": {ctx.model: {"name": ctx.model, "tool_call": True, "attachment": True,
                                   "modalities": {"input": ["text", "image"], "output": ["text"]}}},
        }},
        **({"mcp": {"codename": {"type": "local", "command": list(ctx.mcp), "enabled": True}}} if ctx.mcp else {}),
        "model": f"litellm/{ctx.model}",
        "small_model": f"litellm/{ctx.model}",
        "autoupdate": False,
        "share": "disabled",
    }
    return {"~/.config/opencode/opencode.json": json.dumps(config, indent=2)}


def _opencode_env(ctx: RunContext) -> dict[str, str]:
    return {
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",  # no models.dev fetch
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "SHELL": "/bin/bash",
    }


def _opencode_argv(ctx: RunContext, prompt: str, resume: bool) -> list[str]:
    # One argument per space-separated word: `run` quotes an argument holding a space, and
    # " ".join(words) is the prompt again. After `--`, a word such as `-la` is no option.
    return ["run", "--auto", *(["--continue"] if resume else []), "--", *prompt.split(" ")]


def _claude_memory(ctx: RunContext) -> str:
    """Auto memory's index: ``~/.claude/projects/<cwd, every other character than [A-Za-z0-9-] as ->/memory/``."""
    return f"~/.claude/projects/{re.sub(r'[^A-Za-z0-9-]', '-', str(ctx.workspace))}/memory/MEMORY.md"


SPECS = [
    AgentSpec(
        name="claude-code", weight=1.0, package="@anthropic-ai/claude-code", version="2.1.332", bin="claude",
        route="messages", profile="claude-code", files=_claude_files, env=_claude_env, argv=_claude_argv,
        features=frozenset({"subagent", "compaction", "skills", "images", "mcp"}), compact_argv=_claude_compact, timeout_s=180.0,
        instructions="./CLAUDE.md", memory=_claude_memory, skills_dir="./.claude/skills",
        subagent_headers=("x-claude-code-agent-id",),
        notes="ANTHROPIC_BASE_URL + ANTHROPIC_AUTH_TOKEN, every model alias -> the group; -p "
              "--dangerously-skip-permissions (IS_SANDBOX=1 as root), --continue; /compact as the prompt"),
    AgentSpec(
        name="codex", weight=0.5, package="@openai/codex", version="0.171.0", bin="codex",
        route="responses", profile="codex", files=_codex_files, env=_codex_env, argv=_codex_argv,
        skills_dir="./.agents/skills",
        features=frozenset({"subagent", "compaction", "skills", "mcp"}), compact_argv=_codex_compact, timeout_s=180.0,
        notes="config.toml model_provider (wire_api responses, env_key); exec "
              "--dangerously-bypass-approvals-and-sandbox --skip-git-repo-check, exec resume --last; "
              "auto-compaction by model_auto_compact_token_limit; spawn_agent in the multi_agent_v1 namespace"),
    AgentSpec(
        name="opencode", weight=4.3, package="opencode-ai", version="1.18.33", bin="opencode",
        route="chat", profile="opencode", files=_opencode_files, env=_opencode_env, argv=_opencode_argv,
        skills_dir="./.opencode/skill",
        features=frozenset({"subagent", "skills", "images", "mcp"}), timeout_s=240.0,
        notes="opencode.json @ai-sdk/openai-compatible provider; run --auto [--continue] -- <words>; "
              "title request per new session; task tool subagents (x-parent-session-id)"),
]
