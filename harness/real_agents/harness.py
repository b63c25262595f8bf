"""Run real coding-agent CLIs through a LiteLLM proxy against the scripted model, and measure
what reached the model.

Scenarios, per agent and per mode (``plugin``: the group with the plugin; ``off``: the same
deployment with ``model_info.litellm_prefix.enabled: false``), each session in a fresh HOME and
a fresh git workspace, the agents' own continue flag for every later prompt:

- ``a`` continuation: three prompts; between the 1st and the 2nd a commit and a changed file
  (uncommitted); the 3rd on the next calendar day (TZ=Etc/GMT+12, then Etc/GMT-12: the same
  instant, the next local date).
- ``e`` compaction (``compaction`` feature): session a goes on: a compaction
  (``spec.compact_argv``), then a 4th prompt on what it left. Measured apart from a (a
  compaction re-sends a rewritten history: its cost is the client's, and would dilute a's
  ratio), as one session with a (merges, notes); its heads are counted over a's and its own.
- ``b`` second session: the same first prompt, another workspace and home, a day later.
- ``c`` reinstall (``reinstall`` feature): the 2nd prompt resumed from a second install at
  another path (``install.relocated``); it reads the docs the system prompt names.
- ``d`` subagent (``subagent`` feature): one prompt whose script spawns the agent's subagent twice,
  the same type with another task each time (Gemini CLI's end by calling ``complete_task``; Codex's
  main agent waits for each). ``h``: d with the spec's ``subagent_headers`` removed before the proxy
  (``harness.balancer --drop``: Claude Code's ``x-claude-code-agent-id``).
- ``g`` the same first prompt as a, a new session in a's workspace and home, a day later.
- ``f`` genuine changes: the workspace's instructions file (``spec.instructions``) holds a rule;
  between the 1st and the 2nd prompt the user edits the rule, writes the agent's memory file
  (``spec.memory``) where it has one, and adds a file and a skill (``spec.skills_dir``) to the
  workspace; the 2nd prompt reads an image (``logo.png``). Whatever the client sends of these
  must reach the model. Before a 3rd prompt the user removes the MCP server again: its tool must
  no longer be offered to the model.

Every prompt starts with ``(agent: <name>)``: a request belongs to the agent whose tag it
carries and to the run whose time window holds it (agents run two at a time; one agent's runs
one after another). Measurements, from the scripted model's record (the bodies the upstream
received) and the plugin's JSONL log (its ``call`` records carry the model's request ``seq`` in
``cached_tokens``, see model.py):

- ``ratio``: re-processed tokens over the append-only bound. Re-processed: each request's tokens
  (``litellm_prefix.offline.replay`` rendering, cl100k_base) minus its longest common token prefix with
  any earlier request of the agent's run. Bound: what an append-only client re-processes: each
  request's tokens minus those of its leading messages that an earlier request of the same
  stream already held (same first tagged prompt, same tools; the first two messages, where
  agents put volatile values and an append-only client keeps them, then every message equal
  up to the first that differs). A client that rewrites its own history is charged its rewrite
  (Gemini CLI's resume replays every earlier tool result twice: from the first replayed result
  on, everything is new to any gateway); see ``_ancestor_messages``.
- ``tool_errors``: tool results that start with an error (ENOENT, "No such file", "not found",
  "Error") or a tool's rejection of its arguments ("must be absolute", "is not a valid agent
  type", ...: ``ERROR``) for a tool call the script expected to succeed.
- ``lost``: the last request of every prompt holds every prompt of its session so far and every
  tool call the model made in it, each paired with its result (from a compaction on: only what
  came after it).
- ``merged``: the plugin's session key of a session's requests shared with another session's
  (another scenario, mode or agent; a session's first request aside: it runs on an empty journal,
  named by its own bytes); ``inherited``: what the requests of a new session's first prompt show of
  another session (``inherited_from_others``: a note of the plugin, "from the start of this
  session", or a head or first user message other than its own first request's); ``shared_streams``
  (d, h): the main stream and each subagent run (``SUBTASKS``) sharing a session key.
- ``detected``: the profiles the plugin's log names for the agent's requests.
- ``heads``: distinct system messages over session a's main stream (1: byte-identical).
- ``genuine`` (scenario f): which markers the last request of each prompt showed the model: the
  ``old``/``new`` rule, the ``memory``, the ``skill``, the ``file`` (its name), the ``image`` (its
  base64 bytes); ``offered``: the MCP tool among the request's tools (after its removal: never).
  With the plugin, every marker the client sent must be there: the run without
  the plugin says what it sent (``bench.real_agents``), the agent's spec what it sends
  (``features``: ``skills``, ``tree``, ``images``; ``memory``) for the test's run with it only.
"""
from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import threading
import time
from array import array
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.balancer import Balancer
from harness.procs import free_port, log_records, stop, wait_port
from harness.real_agents import install
from harness.real_agents.model import text_of
from harness.real_agents.spec import AgentSpec, RunContext
from litellm_prefix.request.drift import first_difference

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
GROUP_ON = "scripted-agents"
GROUP_OFF = "scripted-agents-off"
MODES = {"plugin": GROUP_ON, "off": GROUP_OFF}
DAY1, DAY2 = "Etc/GMT+12", "Etc/GMT-12"  # the same instant, the next local date
TAG = re.compile(r"\(agent: ([A-Za-z0-9_.-]+)\)")
# (Qwen Code's shell result always has an "Error: (none)" line: that one is no error.) Besides errors,
# the tools' own rejections of their arguments: Qwen Code's read_file ("File path must be absolute"),
# opencode's task ("... is not a valid agent type"), a Gemini CLI subagent that never finished.
ERROR = re.compile(r"ENOENT|No such file or directory|not found|^\s*Error\b(?!: \(none\))|\bError:(?! \(none\))"
                   r"|must be absolute|is not a valid|Unknown agent|ERROR_NO_COMPLETE_TASK_CALL|Permission denied"
                   r"|Invalid (?:argument|parameter|path|input)|not allowed|^\s*\{\s*\"error\"", re.I)
NOTE = "from the start of this session"
SESSION = {"e": "a"}  # scenario -> the session it goes on with (the compaction continues session a)
NEEDS = {"e": "a", "g": "a"}  # scenario -> the scenario that must run before it (g: in a's workspace)
SUBTASKS = ("subtask one", "subtask two")  # d's and h's two subagent runs, one after each prompt
TARGET_RATIO = 1.02


def proxy_groups(model_url: str) -> list[dict]:
    """The scripted model's two proxy groups: with the plugin, and the same deployment without it.

    The plugin's group restores the default ``pathCheck`` (the test session's proxy declares
    install paths valid everywhere, ``trusted``; here the agents run on the gateway's own disk,
    as a new user's would)."""
    from litellm_prefix.settings import Settings

    overrides = {"pathCheck": Settings.model_fields["path_check"].default}
    params = {"model": "hosted_vllm/scripted", "api_base": f"{model_url}/v1", "api_key": "none",
              # hosted_vllm speaks /v1/responses natively: without this LiteLLM forwards Codex's
              # Responses requests as they are, and the chat-only scripted model cannot answer them.
              "use_chat_completions_api": True}
    return [{"model_name": GROUP_ON, "litellm_params": dict(params), "model_info": {"litellm_prefix": overrides}},
            {"model_name": GROUP_OFF, "litellm_params": dict(params),
             "model_info": {"litellm_prefix": {"enabled": False}}}]


def scripted_proxy_config(model_url: str, extra: tuple[dict, ...] = ()) -> dict:
    """A LiteLLM proxy config with the plugin as its callback and the scripted model's groups
    (``proxy_groups``, then ``extra``); the master key from ``LITELLM_MASTER_KEY`` (``Proxy``'s)."""
    return {"model_list": [*proxy_groups(model_url), *extra],
            "litellm_settings": {"callbacks": ["litellm_prefix.proxy_handler"]},
            "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"}}


# -- the scripted model process --------------------------------------------------------


class ScriptedModel:
    """model.py in its own process group on 127.0.0.1, recording to ``record``; stopped by pid."""

    def __init__(self, workdir: Path, fail_every: int = 0) -> None:
        """``fail_every``: every Nth chat request answered HTTP 500 (model.py's faults; 0: none)."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.record = workdir / "scripted-model.jsonl"
        self.record.touch()
        log = workdir / "scripted-model.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.real_agents.model", "--port", str(self.port), "--record", str(self.record)],
            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "SCRIPTED_MODEL_FAIL_EVERY": str(fail_every),
                 "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent.parent), os.environ.get("PYTHONPATH")]))})
        wait_port(self.port, self.proc, 30, log, "scripted model")

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.record.read_text(encoding="utf-8").splitlines() if line.strip()]

    def stop(self) -> None:
        stop(self.proc)


# -- running one agent -----------------------------------------------------------------


@dataclass
class Run:
    agent: str
    mode: str
    scenario: str
    prompt: int  # 1, 2, 3 (0: a compaction)
    text: str
    start: float
    end: float = 0.0
    rc: int | None = None
    output: str = ""
    after_compaction: bool = False


@dataclass
class Env:
    proxy_url: str
    api_key: str
    workdir: Path
    lock: threading.Lock = field(default_factory=threading.Lock)
    proxy: Any = None  # the proxy (``harness.procs.Proxy``), or a list of replicas: a run checks they are up first
    # mode -> the proxy's model group the agents ask for in that mode (another bench points the same
    # scenarios at other groups: a provider emulator behind each, with and without the plugin)
    groups: Mapping[str, str] = field(default_factory=lambda: dict(MODES))

    def check_proxy(self) -> None:
        """Fail at once where a proxy process has exited (every later run would only time out)."""
        for proxy in self.proxy if isinstance(self.proxy, (list, tuple)) else (self.proxy,):
            proc = getattr(proxy, "proc", None)
            if proc is not None and proc.poll() is not None:
                log = getattr(proxy, "log", None)
                tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
                raise RuntimeError(f"the LiteLLM proxy exited (rc {proc.returncode}); the end of its log:\n{tail}")


def _git(workspace: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=Real Agents", "-c", "user.email=agents@example.invalid", *args],
                   cwd=workspace, check=True, capture_output=True)


def make_workspace(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text("# demo\n\nA small project the agents look at.\n")
    (path / "app.py").write_text("def add(a, b):\n    return a + b\n")
    _git(path, "init", "-q", "-b", "main")
    _git(path, "add", ".")
    _git(path, "commit", "-q", "-m", "initial commit")
    return path


NEW_FILE = "notes.md"  # the file the user adds to session a's workspace between its first two prompts


def change_workspace(path: Path) -> None:
    """A commit, then a changed file left uncommitted and a new file (an agent that sends the
    workspace's folder tree sends another one)."""
    (path / "app.py").write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    _git(path, "commit", "-q", "-am", "add sub")
    (path / "README.md").write_text("# demo\n\nA small project the agents look at.\nNow with sub().\n")
    (path / NEW_FILE).write_text("# Notes\n\nTo do: mul().\n")


RULE = "Project rule: end every answer with the word {}."
MARKERS = {"old": "rule-one-{}", "new": "rule-two-{}", "memory": "memory-two-{}", "skill": "skill-two-{}",
           "file": "file-two-{}", "mcp": "mcp-two-{}"}


def tiny_png(size: int = 8) -> bytes:
    """A ``size`` x ``size`` grey PNG (scenario f's image: an agent reads it, and its bytes must reach the model)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes([0x80]) * size for _ in range(size))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


IMAGE_MARKER = base64.b64encode(tiny_png()).decode()  # the image's bytes, as a data URL or an image block holds them


def _marker(kind: str, spec: AgentSpec) -> str:
    return MARKERS[kind].format(spec.name)


def _local(spec: AgentSpec, ctx: RunContext, rel: str) -> Path:
    if rel.startswith("~/"):
        return ctx.home / rel[2:]
    if rel.startswith("./"):
        return ctx.workspace / rel[2:]
    raise ValueError(f"{spec.name}: file {rel!r} must start with ~/ or ./")


def sends(spec: AgentSpec) -> dict[str, set[str]]:
    """Scenario f's markers the agent's client sends the model, by prompt (its spec's data): the rule,
    then the edited rule, its memory, the new skill, the new file in its folder tree, the image."""
    return {"1": {"old"}, "2": {"new"} | ({"memory"} if spec.memory else set())
            | ({"skill"} if "skills" in spec.features else set())
            | ({"file"} if "tree" in spec.features else set())
            | ({"image"} if "images" in spec.features else set())
            | ({"mcp"} if "mcp" in spec.features else set())}


def offered_after_removal(row: dict) -> bool:
    """Scenario f: the removed MCP server's tool was still among the tools of the 3rd prompt's last request."""
    return bool((row.get("genuine") or {}).get("3", {}).get("offered"))


def shown(row: dict) -> dict[str, set[str]]:
    """Scenario f's markers a row's model saw, by prompt (``offered``, the MCP tool among the
    request's tools, aside)."""
    return {p: {k for k, v in kinds.items() if v and k != "offered"} for p, kinds in (row.get("genuine") or {}).items()}


def write_rules(spec: AgentSpec, ctx: RunContext, edited: bool) -> None:
    """Scenario f's instructions file (the rule before or after the user's edit); after the edit also
    the agent's memory file (as another session of the agent would leave it), a new file and a new
    skill (in ``spec.skills_dir``)."""
    _write(spec, ctx, spec.instructions, "# Project\n\n" + RULE.format(_marker("new" if edited else "old", spec)) + "\n")
    if not edited:
        return
    if spec.memory is not None:
        _write(spec, ctx, spec.memory(ctx), f"- The user's project codename is {_marker('memory', spec)}.\n")
    _write(spec, ctx, f"./{_marker('file', spec)}.md", "# Notes\n")  # (an agent that sends the folder tree shows it)
    if spec.skills_dir:
        skill = _marker("skill", spec)
        _write(spec, ctx, f"{spec.skills_dir}/{skill}/SKILL.md",
               f"---\nname: {skill}\ndescription: Use when the user asks for the project's codename.\n"
               f"---\n\nAnswer with the codename {skill}.\n")


def _write(spec: AgentSpec, ctx: RunContext, rel: str, text: str) -> None:
    path = _local(spec, ctx, rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _write_files(spec: AgentSpec, ctx: RunContext) -> None:
    for rel, text in spec.files(ctx).items():
        _write(spec, ctx, rel, text)


def run_cli(spec: AgentSpec, ctx: RunContext, argv: list[str], run: Run) -> Run:
    _write_files(spec, ctx)
    env = {"PATH": f"{ctx.node_bin}{os.pathsep}/usr/local/bin:/usr/bin:/bin", "HOME": str(ctx.home), "TZ": ctx.tz,
           "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1", "CI": "1", **spec.env(ctx)}
    exe = spec.executable(ctx)
    if not exe.exists():
        raise RuntimeError(f"{spec.name}: {exe} is missing; install it with "
                           f"`.venv/bin/python -m harness.real_agents.install {spec.name}`")
    run.start = time.time()
    try:
        done = subprocess.run([str(exe), *argv], cwd=ctx.workspace, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=spec.timeout_s, start_new_session=True)
        run.rc, run.output = done.returncode, (done.stdout + done.stderr)[-2000:]
    except subprocess.TimeoutExpired as exc:
        run.rc, run.output = -1, f"timed out after {spec.timeout_s} s: {str(exc.stdout or '')[-1000:]}"
    run.end = time.time()
    return run


def prompt(spec: AgentSpec, text: str, script: str) -> str:
    return f"(agent: {spec.name}) {text}\n@script: {script}"


def scenario_prompts(spec: AgentSpec) -> dict[str, list[str]]:
    docs = "; docs" if "docs" in spec.features else ""
    first = prompt(spec, "Please look at this project.", f"shell git status --short; read README.md{docs}; answer looked")
    out = {
        "a": [first,
              prompt(spec, "What changed since then?", "shell git log --oneline -3; read README.md; answer changed"),
              prompt(spec, "A new day: list the files.", "shell ls; answer listed")],
        "b": [first],
    }
    if "reinstall" in spec.features:
        out["c"] = [prompt(spec, "Check where you run.", "shell pwd; answer checked"),
                    prompt(spec, "Read your documentation again.", "docs; answer read")]
    if "subagent" in spec.features:  # (``wait``: Codex's subagents end when its main agent answers)
        # the same subagent type twice in one session, with another task each time (one prompt: cheap);
        # h: the same without the subagent header
        out["d"] = [prompt(spec, "Delegate two looks around.",
                           f"agent (agent: {spec.name}) {SUBTASKS[0]} @script: shell pwd, answer subdone; wait; "
                           f"agent (agent: {spec.name}) {SUBTASKS[1]} @script: shell ls, answer subdone; wait; "
                           "answer delegated")]
        if spec.subagent_headers:
            out["h"] = list(out["d"])
    if "compaction" in spec.features and spec.compact_argv is not None:
        out["e"] = [prompt(spec, "After the compaction.", "answer compacted")]
    out["f"] = [prompt(spec, "Follow the project rules.", "shell ls; answer ruled"),
                prompt(spec, "I edited the rules; look at the logo.", "read logo.png; answer edited"),
                prompt(spec, "I removed the codename server.", "answer removed")]
    out["g"] = [first]  # a new session in a's workspace, a day later: the same prompt gets the same answer
    return out


def selected(prompts: dict[str, list[str]], scenarios: Collection[str] | None) -> dict[str, list[str]]:
    """``prompts`` of the ``scenarios`` asked for (all where None), with the ones they need
    (``NEEDS``: e goes on with a, g starts in a's workspace)."""
    if scenarios is None:
        return prompts
    wanted = set(scenarios) | {NEEDS[s] for s in scenarios if s in NEEDS}
    return {s: p for s, p in prompts.items() if s in wanted}


def run_agent(spec: AgentSpec, env: Env, mode: str, scenarios: Collection[str] | None = None) -> list[Run]:
    """Every scenario of one agent in one mode, one run after another (``scenarios``: only those,
    of the agent's ``scenario_prompts``; e, the compaction, goes on with a, which then runs too)."""
    root = env.workdir / spec.name / mode
    install_root = install.install(spec)
    node_bin = install.node_bin()
    base = dict(base_url=env.proxy_url, api_key=env.api_key, model=env.groups[mode], node_bin=node_bin,
                install_root=install_root)
    runs: list[Run] = []
    prompts = selected(scenario_prompts(spec), scenarios)

    def go(ctx: RunContext, scenario: str, n: int, text: str, resume: bool) -> None:
        env.check_proxy()
        run = Run(spec.name, mode, scenario, n, text, 0.0)
        runs.append(run_cli(spec, ctx, spec.argv(ctx, text, resume), run))

    if "a" in prompts:  # a: continuation, a commit and a changed file, the next day (and a compaction)
        ctx = RunContext(home=(root / "home-a"), workspace=make_workspace(root / "ws-a"), tz=DAY1, **base)
        ctx.home.mkdir(parents=True)
        go(ctx, "a", 1, prompts["a"][0], False)
        change_workspace(ctx.workspace)
        go(ctx, "a", 2, prompts["a"][1], True)
        ctx = replace(ctx, tz=DAY2)
        go(ctx, "a", 3, prompts["a"][2], True)
    if "e" in prompts:  # e: session a compacted after the next-day resume, then a 4th prompt on what it left
        env.check_proxy()
        run = Run(spec.name, mode, "e", 0, "", 0.0)
        runs.append(run_cli(spec, ctx, spec.compact_argv(ctx), run))
        go(ctx, "e", 4, prompts["e"][0], True)
        runs[-1].after_compaction = True
    if "g" in prompts:  # g: a new session with a's first prompt, in a's workspace and home, a day later
        ctx = RunContext(home=(root / "home-a"), workspace=root / "ws-a", tz=DAY2, **base)
        go(ctx, "g", 1, prompts["g"][0], False)
    if "b" in prompts:  # b: the same first prompt, another workspace and home, a day later
        ctx = RunContext(home=(root / "home-b"), workspace=make_workspace(root / "ws-b"), tz=DAY2, **base)
        ctx.home.mkdir(parents=True)
        go(ctx, "b", 1, prompts["b"][0], False)
    if "c" in prompts:  # c: resumed from a reinstall at another path
        ctx = RunContext(home=(root / "home-c"), workspace=make_workspace(root / "ws-c"), tz=DAY1, **base)
        ctx.home.mkdir(parents=True)
        go(ctx, "c", 1, prompts["c"][0], False)
        go(replace(ctx, install_root=install.relocated(spec)), "c", 2, prompts["c"][1], True)
    for scenario in ("d", "h"):  # d: two subagent runs of one type; h: the same without the subagent header
        if scenario not in prompts:
            continue
        stripping = Balancer(root, [env.proxy_url], drop=spec.subagent_headers, name="strip") if scenario == "h" else None
        try:
            ctx = RunContext(home=(root / f"home-{scenario}"), workspace=make_workspace(root / f"ws-{scenario}"), tz=DAY1,
                             **{**base, "base_url": stripping.url if stripping else env.proxy_url})
            ctx.home.mkdir(parents=True)
            go(ctx, scenario, 1, prompts[scenario][0], False)
        finally:
            if stripping is not None:
                stripping.stop()
    if "f" in prompts:  # f: the user edits the project's rules, memory, files and skills between two prompts
        ctx = RunContext(home=(root / "home-f"), workspace=make_workspace(root / "ws-f"), tz=DAY1, **base)
        ctx.home.mkdir(parents=True)
        (ctx.workspace / "logo.png").write_bytes(tiny_png())
        write_rules(spec, ctx, edited=False)
        go(ctx, "f", 1, prompts["f"][0], False)
        write_rules(spec, ctx, edited=True)
        ctx = replace(ctx, mcp=(sys.executable, str(HERE / "mcp_server.py"), _marker("mcp", spec)))  # and an MCP server
        go(ctx, "f", 2, prompts["f"][1], True)
        ctx = replace(ctx, mcp=())  # then removes the MCP server again: its tool must no longer be offered
        go(ctx, "f", 3, prompts["f"][2], True)
    return runs


# -- measuring -------------------------------------------------------------------------


def _system_text(body: dict) -> str:
    first = (body.get("messages") or [{}])[0]
    return text_of(first.get("content")) if first.get("role") in ("system", "developer") else ""


def _first_user(body: dict) -> str:
    return next((text_of(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "user"), "")


def _tool_names(body: dict) -> tuple[str, ...]:
    return tuple(sorted(str((t.get("function") or {}).get("name", t.get("name", ""))) for t in body.get("tools") or []))


def _ids(body: dict) -> list[int]:
    from litellm_prefix.offline.replay import Turn, render, tokens

    return tokens(render(Turn("", "chat", {k: body[k] for k in ("messages", "tools") if k in body})))


def _lcp(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n // 4
    lo, hi = 0, n // 4
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[: mid * 4] == b[: mid * 4]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _opening(body: dict) -> str:
    """The stream's first prompt: the first line of a user message carrying an ``(agent: ...)`` tag
    (agents put their own context before it, in the same message or one of its own, and rebuild
    that context on a resume), else the first user message."""
    for m in body.get("messages") or []:
        if m.get("role") == "user":
            for line in text_of(m.get("content")).splitlines():
                if TAG.search(line):
                    return line
    return _first_user(body)


def _ancestor_messages(body: dict, earlier: list[dict]) -> int:
    """How many leading messages of ``body`` an earlier request of the same stream already held.

    Same stream: the same first prompt (``_opening``) and the same tools. Held: the first two
    messages (where agents put volatile values: an append-only client keeps them), then every
    message equal to the earlier request's, up to the first that differs. A client that rewrites
    its own history (Gemini CLI's resume replays every earlier tool result twice, a compaction
    replaces it) is charged its own rewrite: from the first message it changed, everything is new,
    which is what any gateway, append-only or not, has to send again. The bound never counts the
    rewrite as held: the plugin passes the client's messages through, and must."""
    messages = body.get("messages") or []
    best = 0
    for other in earlier:
        held = other.get("messages") or []
        if not (held and _opening(other) == _opening(body) and _tool_names(other) == _tool_names(body)
                and [m.get("role") for m in held[:2]] == [m.get("role") for m in messages[:2]]):
            continue
        n = min(2, len(held), len(messages))
        while n < len(held) and n < len(messages) and held[n] == messages[n]:
            n += 1
        best = max(best, n)
    return best


def reprocessed(records: list[dict], sessions: list[Any]) -> list[tuple[int, int, int]]:
    """Per request, in order: (tokens, re-processed by the longest prefix with any earlier one, append-only
    bound). ``sessions``: each request's session (the bound looks for ancestors inside it only)."""
    out = []
    seen: list[bytes] = []
    bodies: dict[Any, list[dict]] = defaultdict(list)
    for record, session in zip(records, sessions):
        body = record["body"]
        ids = _ids(body)
        raw = array("I", ids).tobytes()
        reused = max((_lcp(raw, other) for other in seen), default=0)
        held = _ancestor_messages(body, bodies[session])
        bound = len(ids) - (len(_ids({**body, "messages": body["messages"][:held]})) if held else 0)
        out.append((len(ids), len(ids) - reused, max(bound, 0)))
        seen.append(raw)
        bodies[session].append(body)
    return out


def head_changes(bodies: list[dict], window: int = 60) -> list[dict]:
    """Where each new head (``messages[0]``, system or developer) of a session differs from the
    one before it, in the order they reached the model: the request's place, the JSON lengths,
    the first differing character and ``window`` characters either side of it in both. A
    diagnostic for a test failure that names more than one head (the run's files do not outlive
    CI): the agents' own prompts and the harness's workspace paths, no user's text."""
    out: list[dict] = []
    last: str | None = None
    for index, body in enumerate(bodies):
        head = (body.get("messages") or [{}])[0]
        if head.get("role") not in ("system", "developer"):
            continue
        text = json.dumps(head)
        if last is not None and text != last:
            at = first_difference(last, text)
            out.append({"request": index, "lengths": [len(last), len(text)], "offset": at,
                        "before": last[max(0, at - window):at + window],
                        "after": text[max(0, at - window):at + window]})
        last = text
    return out


def _tool_calls(body: dict) -> list[str]:
    return [c.get("id") for m in body.get("messages") or [] if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []]


def _call_key(name: str, arguments: Any) -> str:
    """A tool call by name and arguments (ids do not survive every route: Gemini's has none)."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        args = arguments
    return f"{name}({json.dumps(args, sort_keys=True)})"


def _call_keys(body: dict) -> list[str]:
    return [_call_key((c.get("function") or {}).get("name", ""), (c.get("function") or {}).get("arguments"))
            for m in body.get("messages") or [] if m.get("role") == "assistant" for c in m.get("tool_calls") or []]


def _user_text(body: dict) -> str:
    return "\n".join(text_of(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "user")


def _tool_results(body: dict) -> dict[str, str]:
    return {m.get("tool_call_id"): text_of(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "tool"}


def attribute(records: list[dict], runs: list[Run]) -> dict[int, Run]:
    """seq -> the run a request belongs to: its agent's tag and that agent's run whose window holds it."""
    by_agent: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_agent[run.agent].append(run)
    out = {}
    for record in records:
        texts = [text_of(m.get("content")) for m in record["body"].get("messages") or []]
        tags = {t for text in texts for t in TAG.findall(text)}
        candidates = [r for agent in (tags or by_agent) for r in by_agent.get(agent, [])
                      if r.start <= record["time"] <= r.end]
        if len(candidates) == 1:
            out[record["seq"]] = candidates[0]
    return out


def plugin_calls(log: Path | list[Path] | None, groups: Collection[str] = tuple(MODES.values())) -> dict[int, dict]:
    """seq -> the plugin's ``call`` record for that upstream request (``groups`` only, the scripted
    model's by default); ``log``: the proxy's JSONL log, or each replica's."""
    out: dict[int, dict] = {}
    logs = [] if log is None else log if isinstance(log, list) else [log]
    for record in (r for path in logs for r in log_records(path)):  # once each log writer has caught up
        if record.get("event") == "call" and record.get("model") in groups:
            out[int(record.get("cached_tokens") or 0)] = record
    return out


def measure(spec: AgentSpec, mode: str, runs: list[Run], records: list[dict], owner: dict[int, Run],
            calls: dict[int, dict]) -> list[dict]:
    """One row per scenario of one agent in one mode."""
    mine = [r for r in records if r["seq"] in owner and owner[r["seq"]].agent == spec.name
            and owner[r["seq"]].mode == mode]
    sessions = [SESSION.get(owner[r["seq"]].scenario, owner[r["seq"]].scenario) for r in mine]
    costs = dict(zip((r["seq"] for r in mine), reprocessed(mine, sessions)))
    keys: dict[str, set] = defaultdict(set)
    mains: dict[str, list[dict]] = {}
    rows = []
    for scenario in sorted({r.scenario for r in runs}):
        session = SESSION.get(scenario, scenario)
        s_runs = [r for r in runs if r.scenario == scenario]
        s_recs = [r for r in mine if owner[r["seq"]].scenario == scenario]
        # the main stream: requests with tools that hold one of the session's prompt lines (agents may
        # wrap a prompt or put context first; a compacted history holds only the prompts after it)
        openings = [r.text.splitlines()[0] for r in runs if r.prompt and SESSION.get(r.scenario, r.scenario) == session]
        main = [r for r in s_recs if r["body"].get("tools") and any(o in _user_text(r["body"]) for o in openings)
                and not any(re.match(h, _system_text(r["body"])) for h in spec.aux_heads)]
        mains[scenario] = main
        tokens = sum(costs[r["seq"]][0] for r in s_recs)
        actual = sum(costs[r["seq"]][1] for r in s_recs)
        bound = sum(costs[r["seq"]][2] for r in s_recs)
        errors = []
        for r in s_recs:
            for call_id, text in _tool_results(r["body"]).items():
                if ERROR.search(text[:300]) and call_id not in [e[0] for e in errors]:
                    errors.append((call_id, text[:200]))
        genuine: dict[str, dict[str, bool]] = {}
        lost = []
        issued: list[str] = []
        prompts_so_far: list[str] = []
        for run in s_runs:
            if run.prompt == 0:
                issued, prompts_so_far = [], []
                continue
            prompts_so_far.append(run.text.splitlines()[0])
            in_run = [r for r in main if owner[r["seq"]] is run]
            issued += [_call_key(c["name"], c["arguments"]) for r in in_run for c in r["reply"].get("tool_calls") or []]
            if not in_run:
                lost.append(f"prompt {run.prompt}: no request reached the model (rc {run.rc}: {run.output[-300:]!r})")
                continue
            last = in_run[-1]["body"]
            if scenario == "f":
                shown = json.dumps(last, ensure_ascii=False)
                genuine[str(run.prompt)] = {**{kind: _marker(kind, spec) in shown for kind in MARKERS},
                                            "image": IMAGE_MARKER in shown,
                                            # (tool names: Codex and Qwen Code spell its "-" as "_")
                                            "offered": any(_marker("mcp", spec).replace("-", "_") in name.replace("-", "_")
                                                           for name in _tool_names(last))}
            users = "\n".join(text_of(m.get("content")) for m in last.get("messages") or [] if m.get("role") == "user")
            lost += [f"prompt {run.prompt}: prompt {p!r} missing" for p in prompts_so_far if p not in users]
            calls_in, results = _call_keys(last), _tool_results(last)
            answered_last = {_call_key(c["name"], c["arguments"]) for c in in_run[-1]["reply"].get("tool_calls") or []}
            lost += [f"prompt {run.prompt}: tool call {c} missing" for c in issued
                     if c not in calls_in and c not in answered_last]
            lost += [f"prompt {run.prompt}: tool call {c} without its result" for c in _tool_calls(last)
                     if c not in results]
        session_keys = {calls[r["seq"]]["session"] for r in s_recs if r["seq"] in calls}
        # (a new session's first request runs on an empty journal under a name of its own bytes: two
        # byte-identical first requests share that name, and nothing else; it is no merge)
        first = main[0] if main and session == scenario and owner[main[0]["seq"]].prompt == 1 else None
        main_keys = {calls[r["seq"]]["session"] for r in main if r["seq"] in calls and r is not first}
        keys[scenario] = main_keys
        detected = Counter(calls[r["seq"]].get("agent") or "none" for r in s_recs if r["seq"] in calls)
        # what a new session shows of another one (e goes on with session a: its notes are a's own)
        inherited = inherited_from_others([r["body"] for r in main if owner[r["seq"]].prompt == 1]) \
            if session == scenario else []
        subagents = {task: [r for r in s_recs if r not in main and _opening(r["body"]).startswith(
            f"(agent: {spec.name}) {task}")] for task in SUBTASKS} if scenario in ("d", "h") else {}
        streams = {"main": main_keys, **{task: {calls[r["seq"]]["session"] for r in recs if r["seq"] in calls}
                                         for task, recs in subagents.items()}}
        over = main if session == scenario else mains.get(session, []) + main  # e: a's heads and its own
        heads = {json.dumps(r["body"]["messages"][0]) for r in over
                 if r["body"]["messages"][0].get("role") in ("system", "developer")}
        rows.append({
            "agent": spec.name, "package": spec.package, "version": spec.version, "route": spec.route,
            "profile": spec.profile, "mode": mode, "scenario": scenario,
            "prompts": sum(1 for r in s_runs if r.prompt), "failed_runs": [f"{r.prompt}: rc {r.rc}: {r.output[-300:]}"
                                                                          for r in s_runs if r.rc != 0],
            "seconds": round(sum(r.end - r.start for r in s_runs), 1), "requests": len(s_recs), "main_requests": len(main),
            "tokens": tokens, "reprocessed": actual,
            "bound": bound, "ratio": round(actual / bound, 4) if bound else None,
            "tool_errors": errors, "lost": lost, "session_keys": sorted(session_keys),
            "main_keys": sorted(main_keys), "detected": dict(detected), "inherited_note": bool(inherited),
            "inherited": inherited, "subagent_requests": {task: len(recs) for task, recs in subagents.items()},
            "shared_streams": shared_streams(streams),
            "heads": len(heads), "merged": [], "genuine": genuine,
            "head_changes": head_changes([r["body"] for r in over]) if len(heads) > 1 else [],
        })
    return rows


def inherited_from_others(bodies: list[dict]) -> list[str]:
    """What the requests of a new session's first prompt (one process: its own context throughout)
    show of another session: a note of the plugin, or a head or first user message other than the
    first request's, which ran on an empty journal (its own values); marks ignored."""
    from litellm_prefix.request.journal import unmarked

    def first_user(body: dict) -> Any:
        return unmarked(next((m for m in body.get("messages") or [] if m.get("role") == "user"), None))

    out = []
    for index, body in enumerate(bodies):
        if NOTE in json.dumps(body.get("messages") or []):
            out.append(f"request {index}: a note of the plugin")
        if index and unmarked((body.get("messages") or [None])[0]) != unmarked((bodies[0].get("messages") or [None])[0]):
            out.append(f"request {index}: another head than the session's first request")
        if index and first_user(body) != first_user(bodies[0]):
            out.append(f"request {index}: another first user message than the session's first request")
    return out


def shared_streams(streams: dict[str, set]) -> list[str]:
    """Streams (the main one, each subagent run) whose requests share a session key of the plugin."""
    names = list(streams)
    return [f"{a} and {b}" for i, a in enumerate(names) for b in names[i + 1:] if streams[a] & streams[b]]


def mark_merged(rows: list[dict]) -> None:
    """A session key shared by two sessions (scenario, mode or agent) is a merge, on both rows (the
    compaction, e, goes on with session a: one session)."""
    owners: dict[str, set] = defaultdict(set)
    for row in rows:
        for key in row["main_keys"]:
            owners[key].add((row["agent"], row["mode"], SESSION.get(row["scenario"], row["scenario"])))
    for row in rows:
        me = (row["agent"], row["mode"], SESSION.get(row["scenario"], row["scenario"]))
        row["merged"] = sorted(f"{a}/{m}/{s}" for key in row["main_keys"] for (a, m, s) in owners[key] if (a, m, s) != me)


def run_specs(specs: list[AgentSpec], proxy_url: str, api_key: str, model: ScriptedModel, prefix_log: Path | None,
              workdir: Path, modes: tuple[str, ...] = ("plugin",), parallel: int = 2, proxy: Any = None,
              groups: Mapping[str, str] | None = None, scenarios: Collection[str] | None = None) -> list[dict]:
    """Every spec through every scenario in every mode (``parallel`` agents at a time): one row per
    (agent, mode, scenario). The model and the proxy are the caller's (``proxy``: its process, to
    stop at once with its log where it dies). ``groups``: mode -> the proxy's model group (default
    ``MODES``: the scripted model with and without the plugin; ``model`` is whatever records what
    those groups' upstream received); ``scenarios``: only these (default: all of each agent's)."""
    install.install_all(specs)
    env = Env(proxy_url, api_key, workdir, proxy=proxy, groups=dict(groups or MODES))
    jobs = [(spec, mode) for spec in specs for mode in modes]
    # one agent's modes one after another (its requests are told apart by time), agents side by side
    by_agent: dict[str, list] = defaultdict(list)
    for spec, mode in jobs:
        by_agent[spec.name].append((spec, mode))

    def agent_job(items):
        return [(spec, mode, run_agent(spec, env, mode, scenarios)) for spec, mode in items]

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        longest_first = sorted(by_agent.values(), key=lambda items: -items[0][0].weight)
        done = [x for group in pool.map(agent_job, longest_first) for x in group]
    time.sleep(1.0)  # the proxy's success callbacks (the log's call records) trail the last answers
    records = model.records()
    all_runs = [r for _, _, runs in done for r in runs]
    owner = attribute(records, all_runs)
    calls = plugin_calls(prefix_log, tuple(env.groups.values()))
    rows = [row for spec, mode, runs in done for row in measure(spec, mode, runs, records, owner, calls)]
    mark_merged(rows)
    unattributed = [r["seq"] for r in records
                    if r["seq"] not in owner and r["time"] >= min((x.start for x in all_runs), default=0)]
    for row in rows:
        row["unattributed"] = len(unattributed)
    (workdir / "rows.json").write_text(json.dumps(rows, indent=1) + "\n")  # beside the runs, for a look afterwards
    return rows
