"""Qwen Code 0.24.4 (``@qwen-code/qwen-code``; explored at 0.15.10) and Gemini CLI 0.61.0 (``@google/gemini-cli``),
run headless against the proxy. Facts from running both through a LiteLLM proxy and from their
installed bundles (``cli.js``; ``bundle/chunk-*.js``); the wire details are in explore_gq.md.

Qwen Code (chat completions, ``/v1/chat/completions``):
- Auth ``openai`` (``--auth-type openai``, also ``security.auth.selectedType`` in
  ``~/.qwen/settings.json``) with ``OPENAI_BASE_URL`` = ``<proxy>/v1``, ``OPENAI_API_KEY``,
  ``OPENAI_MODEL``. A base URL that is not DashScope's gets the plain OpenAI-compatible provider:
  ``User-Agent: QwenCode/<version> (<platform>; <arch>)``, no session id in headers or body.
- ``-p PROMPT``: one prompt, exit; ``--yolo``: every tool call approved; ``--continue``: the
  project's most recent session (``~/.qwen/projects/<cwd-slug>/chats/<session>.jsonl``).
- Settings turn off usage statistics (``privacy.usageStatisticsEnabled``; they go to an Aliyun RUM
  endpoint), telemetry and auto-update. With them only the proxy is connected to (strace).
- Its read tool (``read_file``) takes absolute paths only; the cwd is in the first user message
  (``I'm currently working in the directory: <cwd>``), which is agent context, not the prompt.
- 0.24.4: that context is a ``<system-reminder>`` text part of the first user message (after a
  skills reminder; a "The current date is" reminder and the prompt follow), replayed as first sent
  on ``--continue``; the system prompt ends its context files with a "Git snapshot at conversation
  start" block that is taken again on ``--continue`` (the ``git-snapshot`` preset pins it).

Gemini CLI (Google-native, ``/v1beta/models/<group>:streamGenerateContent?alt=sse``):
- ``GOOGLE_GEMINI_BASE_URL`` = the proxy (no ``/v1``: the genai SDK appends ``/v1beta/models/...``)
  and ``GEMINI_API_KEY`` = the proxy key (sent as ``x-goog-api-key``, which LiteLLM accepts). The
  base URL alone makes the CLI pick auth type ``gateway``, which headless mode rejects ("Invalid auth
  method selected."): ``security.auth.selectedType: gemini-api-key`` in ``~/.gemini/settings.json``
  keeps the API-key auth and still uses the base URL. A model group with a slash works
  (``/v1beta/models/org/name:...``: LiteLLM's route takes ``{model_name:path}``).
- ``-p PROMPT``; ``--yolo``; ``--resume latest``: the project's most recent session
  (``~/.gemini/tmp/<project>/chats/session-*.jsonl``). ``--continue`` does not exist.
- An untrusted folder turns YOLO back to ``default`` approval: ``security.folderTrust.enabled: false``.
  Usage statistics (which also add an ``x-gemini-api-privileged-user-id`` header), telemetry and
  auto-update (and its notification) are turned off; only the proxy is connected to (strace).
- Quirk: a resumed session replays every tool result twice (0.61.0 ``convertSessionToClientHistory``
  rebuilds the responses from the recorded tool calls *and* keeps the recorded response message),
  so the upstream history changes at the first tool result on every resume, plugin or not.
"""
from __future__ import annotations

import json

from harness.real_agents.spec import AgentSpec, RunContext

QWEN_VERSION = "0.24.4"
GEMINI_VERSION = "0.61.0"


def _qwen_files(ctx: RunContext) -> dict[str, str]:
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False},
        **_mcp_servers(ctx),
    }
    return {"~/.qwen/settings.json": json.dumps(settings, indent=2)}


def _mcp_servers(ctx: RunContext) -> dict:
    """Qwen Code's and Gemini CLI's ``mcpServers`` setting: the MCP server the user added, if any."""
    if not ctx.mcp:
        return {}
    return {"mcpServers": {"codename": {"command": ctx.mcp[0], "args": list(ctx.mcp[1:]), "trust": True}}}


def _qwen_env(ctx: RunContext) -> dict[str, str]:
    # QWEN_CODE_NO_RELAUNCH: no second node process (the CLI relaunches itself with a larger heap;
    # one start of its 26 MB bundle fewer per run, nothing on the wire changes)
    return {"OPENAI_BASE_URL": f"{ctx.base_url}/v1", "OPENAI_API_KEY": ctx.api_key, "OPENAI_MODEL": ctx.model,
            "QWEN_CODE_NO_RELAUNCH": "true"}


def _qwen_argv(ctx: RunContext, prompt: str, resume: bool) -> list[str]:
    return ["--yolo", "--auth-type", "openai", "--model", ctx.model, *(["--continue"] if resume else []),
            "-p", prompt]


def _gemini_files(ctx: RunContext) -> dict[str, str]:
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        **_mcp_servers(ctx),
    }
    return {"~/.gemini/settings.json": json.dumps(settings, indent=2)}


def _gemini_env(ctx: RunContext) -> dict[str, str]:
    # GEMINI_CLI_NO_RELAUNCH: as Qwen Code's (the relaunch only adds heap flags)
    return {"GOOGLE_GEMINI_BASE_URL": ctx.base_url, "GEMINI_API_KEY": ctx.api_key, "GEMINI_CLI_NO_RELAUNCH": "true"}


def _qwen_compact(ctx: RunContext) -> list[str]:
    return _qwen_argv(ctx, "/compress", True)


def _gemini_argv(ctx: RunContext, prompt: str, resume: bool) -> list[str]:
    return ["--yolo", "--model", ctx.model, *(["--resume", "latest"] if resume else []), "-p", prompt]


SPECS = [
    AgentSpec(
        name="qwen-code", weight=2.4, package="@qwen-code/qwen-code", version=QWEN_VERSION, bin="qwen", route="chat",
        profile="qwen-code", files=_qwen_files, env=_qwen_env, argv=_qwen_argv,
        features=frozenset({"subagent", "compaction", "skills", "tree", "mcp"}), compact_argv=_qwen_compact, timeout_s=120.0,
        aux_heads=(r"You are now acting as the managed memory extraction subagent",),
        instructions="./QWEN.md", memory=lambda ctx: "~/.qwen/QWEN.md", skills_dir="./.qwen/skills",
        notes="OPENAI_BASE_URL/OPENAI_API_KEY/OPENAI_MODEL, --auth-type openai; -p, --yolo, --continue; "
        "UA QwenCode/<v>, no session id; date, cwd and folder tree in the first user message; a git snapshot in "
        "the system prompt (taken again on --continue); "
        "subagents: `agent` tool, own system prompt, same headers; -p /compress --continue compacts (0.24: the "
        "summary then goes on as the first prompt)",
    ),
    AgentSpec(
        name="gemini-cli", weight=1.5, package="@google/gemini-cli", version=GEMINI_VERSION, bin="gemini", route="gemini",
        profile="gemini-cli", files=_gemini_files, env=_gemini_env, argv=_gemini_argv,
        features=frozenset({"subagent", "skills", "tree", "mcp"}), timeout_s=120.0,
        instructions="./GEMINI.md", memory=lambda ctx: "~/.gemini/GEMINI.md", skills_dir="./.gemini/skills",
        notes="GOOGLE_GEMINI_BASE_URL + GEMINI_API_KEY, selectedType gemini-api-key, folder trust off; "
        "-p, --yolo, --resume latest; UA GeminiCLI-tui/<v>/<model>, no session id; <session_context> "
        "(date, folder tree) as the first part of the first user message (rebuilt on resume); "
        "resume replays each tool result twice; subagents: invoke_agent (generalist), ended by complete_task",
    ),
]
