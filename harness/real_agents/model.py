"""The scripted model: an OpenAI-compatible chat-completions server that drives a real agent
through its own tools, following a script written in the prompt, and records every request.

    python -m harness.real_agents.model --port 18090 --record /tmp/model.jsonl

The proxy's deployment is ``hosted_vllm/scripted`` with ``api_base`` = this server; LiteLLM
translates the agents' other routes (/v1/messages, /v1/responses, Gemini) into chat completions
for it. Standard library only; listens on 127.0.0.1; a large listen backlog (a proxy opens many
connections at once).

The script (``docs/`` of the suite: /work/notes/real_agents_protocol.md): the LAST user message
holding a line ``@script: STEPS`` gives ``;``-separated steps (``,`` where the line has no ``;``,
as inside an ``agent`` step's prompt):

- ``shell CMD``: call the agent's shell tool with CMD
- ``read PATH``: call its file-read tool on PATH
- ``docs``: read the first absolute ``.md`` path the system prompt mentions (pi's docs)
- ``agent PROMPT``: call its subagent tool with PROMPT (Gemini CLI's ``invoke_agent``: agent
  ``generalist``)
- ``wait``: wait for the spawned subagents (Codex's ``wait_agent`` with the ``agent_id`` of the
  latest tool result naming one): ``codex exec`` ends a running subagent when the main agent
  answers. Where the request offers no such tool the step is left out (the step list is read
  without it: subagents there are synchronous).
- ``say TEXT``: the answer to a request without tools (aider, which edits by the answer's text;
  without it such a request is answered ``done``); ``say *``: a new answer every time, as a
  model's own words
- ``answer TEXT``: answer TEXT (default ``done``); where the request offers ``complete_task`` (a
  Gemini CLI subagent, which ends only by calling it) the answer is that call,
  ``{"result": {"response": TEXT}}``, once

Relative paths of ``read`` steps are made absolute where the tool's schema demands it, against the
cwd the request names: pi's ``Current working directory:`` and ``<cwd>``, Qwen Code's ``I'm
currently working in the directory:`` (or the first of ``... the following directories:``),
Gemini CLI's ``**Workspace Directories:**`` list.

Step index = the number of assistant messages with tool calls after that user message; steps
used up, no script, or no tools: a short text answer (titles, summaries, compaction prompts).
A step whose tool the request does not offer is answered with a text naming what is missing.

Faults (``SCRIPTED_MODEL_FAIL_EVERY=N``): every Nth chat request is answered HTTP 500 before any
work and is not recorded (``bench/real_agents.py --fail-every N``).

Every request is appended to the record file as one JSON line:
``{"seq", "time", "path", "headers", "body" (parsed), "reply": {"text"| "tool_calls"}}``.
``usage.prompt_tokens_details.cached_tokens`` is the request's ``seq`` (1, 2, ...): the plugin's
log copies it into its ``call`` record, which is how the harness pairs a log record with the
request it measured. ``prompt_tokens`` is the body's length / 4.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
import uuid
from http.server import ThreadingHTTPServer
from typing import Any

from harness.recording_upstream import JsonHandler, Server, run_server  # (tools/ on the path: run with -m, see above)

SHELL_TOOLS = ("bash", "shell", "exec_command", "run_shell_command", "shell_command", "local_shell")
READ_TOOLS = ("read", "read_file", "view", "readfile", "read_many_files")
AGENT_TOOLS = ("task", "agent", "spawn_agent", "invoke_agent")
# Subagent names, first match wins: Claude Code and Qwen Code, Gemini CLI, opencode.
AGENT_NAMES = ("general-purpose", "generalist", "general")
FINISH_TOOLS = ("complete_task",)  # a subagent that must end by calling it (Gemini CLI)
VERBS = ("shell", "read", "docs", "agent", "wait", "answer", "say")
WAIT_TOOLS = ("wait_agent",)
AGENT_ID = re.compile(r'"agent_id"\s*:\s*"(?P<id>[^"]+)"')
# The first ``@script:`` of a line (a subagent's script may sit inside an ``agent`` step's prompt).
SCRIPT_LINE = re.compile(r"(?m)^[^\r\n@]*?@script:[ \t]*(?P<steps>[^\r\n]*)")
MD_PATH = re.compile(r"(/[^\s'\"`()<>\[\]{},;]+\.md)\b")
CWD_PATTERNS = (
    re.compile(r"(?mi)current working directory:?\s*(?P<p>/[^\s`'\"<>]+)"),
    re.compile(r"(?mi)working directory:?\s*(?P<p>/[^\s`'\"<>]+)"),
    re.compile(r"(?i)<cwd>\s*(?P<p>/[^\s<]+)\s*</cwd>"),
    re.compile(r"(?mi)^\s*cwd:\s*(?P<p>/\S+)"),
    re.compile(r"(?mi)working in the directory:[ \t]*(?P<p>/[^\s`'\"<>]+)"),  # Qwen Code
    re.compile(r"(?mi)working in the following directories:\s*\n\s*-\s*(?P<p>/[^\s`'\"<>]+)"),  # Qwen Code
    re.compile(r"(?mi)\*\*Workspace Directories:\*\*\s*\n\s*-\s*(?P<p>/[^\s`'\"<>]+)"),  # Gemini CLI
)


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def parse_steps(line: str) -> list[tuple[str, str]]:
    sep = ";" if ";" in line else ","
    parts = line.split(";") if sep == ";" else re.split(rf",\s*(?=(?:{'|'.join(VERBS)})\b)", line)
    steps = []
    for part in parts:
        part = part.strip()
        if not part:
            continue
        verb, _, arg = part.partition(" ")
        steps.append((verb.lower(), arg.strip()))
    return steps


def find_script(messages: list[dict]) -> tuple[list[tuple[str, str]], int] | None:
    """(steps, index of the user message holding them), newest user message first."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        found = SCRIPT_LINE.findall(text_of(message.get("content")))
        if found:
            return parse_steps(found[-1]), index
    return None


def _tools(body: dict) -> dict[str, dict]:
    out = {}
    for tool in body.get("tools") or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out[fn["name"].lower()] = fn
            out.setdefault(fn["name"].lower().rsplit("__", 1)[-1], fn)  # Codex: multi_agent_v1__spawn_agent
    return out


def _pick(tools: dict[str, dict], names: tuple[str, ...]) -> dict | None:
    return next((tools[n] for n in names if n in tools), None)


def system_text(body: dict) -> str:
    return "\n".join(text_of(m.get("content")) for m in body.get("messages") or []
                     if m.get("role") in ("system", "developer"))


def cwd_of(body: dict) -> str | None:
    texts = [system_text(body)] + [text_of(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "user"]
    for text in texts:
        for pattern in CWD_PATTERNS:
            found = pattern.search(text)
            if found:
                return found.group("p").rstrip(".,;:")
    return None


def _props(fn: dict) -> dict:
    params = fn.get("parameters") or {}
    return params.get("properties") or {}


def shell_args(fn: dict, cmd: str) -> dict:
    props = _props(fn)
    for name in ("command", "cmd"):
        if name in props:
            kind = props[name].get("type")
            return {name: ["bash", "-lc", cmd] if kind == "array" else cmd}
    return {"command": cmd}


def read_args(fn: dict, path: str, body: dict) -> dict:
    props = _props(fn)
    for name in ("file_path", "absolute_path", "path", "filePath", "paths"):
        if name in props:
            wants_absolute = name == "absolute_path" or "absolute" in str(props[name].get("description", "")).lower()
            if wants_absolute and not path.startswith("/"):
                base = cwd_of(body)
                if base:
                    path = f"{base.rstrip('/')}/{path}"
            return {name: [path] if props[name].get("type") == "array" else path}
    return {"path": path}


def agent_args(fn: dict, prompt: str) -> dict:
    props = _props(fn)
    required = (fn.get("parameters") or {}).get("required") or []
    args: dict[str, Any] = {}
    key = next((k for k in ("prompt", "message", "task", "instructions", "input") if k in props), "prompt")
    args[key] = prompt
    if "description" in props:
        args["description"] = "scripted subagent"
    if "subagent_type" in props:
        enum = props["subagent_type"].get("enum") or []
        # opencode's task tool knows "general" only (its description lists it); Claude Code's "general-purpose"
        args["subagent_type"] = enum[0] if enum else ("general-purpose" if "general-purpose" in json.dumps(fn) else "general")
    if "agent_name" in props:  # Gemini CLI's invoke_agent: its head lists generalist, codebase_investigator, cli_help
        enum = props["agent_name"].get("enum") or []
        args["agent_name"] = next((n for n in AGENT_NAMES if n in enum), enum[0] if enum else "generalist")
    for name in required:
        if name not in args and props.get(name, {}).get("type") == "string":
            args[name] = props[name].get("enum", ["scripted"])[0]
    return args


def finish_args(fn: dict, text: str) -> dict:
    """A finishing tool's arguments: ``{"result": {"response": TEXT}}`` (Gemini CLI's complete_task), or
    the text in its first string property."""
    props = _props(fn)
    for name, prop in props.items():
        inner = prop.get("properties") or {}
        if prop.get("type") == "object" and inner:
            key = next((k for k in ("response", "result", "text") if k in inner), next(iter(inner)))
            return {name: {key: text}}
        if prop.get("type") == "string":
            return {name: text}
    return {"result": {"response": text}}


def _answer(messages: list[dict], at: int, tools: dict[str, dict], text: str, seed: str) -> dict:
    """The text answer, or, where the request offers a finishing tool not yet called since the
    prompt, that tool's call with the text."""
    fn = _pick(tools, FINISH_TOOLS)
    called = {str((c.get("function") or {}).get("name", "")).lower() for m in messages[at + 1:]
              if m.get("role") == "assistant" for c in m.get("tool_calls") or []}
    if fn is None or fn["name"].lower() in called:
        return {"text": text}
    return _call(fn, finish_args(fn, text), seed)


def _call(fn: dict, args: dict, seed: str) -> dict:
    """One tool call. Its id looks like a model's (24 hex characters) but is a hash of the script and
    the step (``seed``): the same prompt gets the same answer, ids included, in every session, as a
    short prompt often does from a hosted model (and always on Gemini's routes, whose calls carry no
    id): the hardest case for telling sessions apart without an id."""
    call_id = "call_" + hashlib.sha256(f"{seed}\x00{fn['name']}".encode()).hexdigest()[:24]
    return {"tool_calls": [{"id": call_id, "name": fn["name"], "arguments": json.dumps(args)}]}


def decide(body: dict) -> dict:
    """The reply to one chat request: ``{"text": ...}`` or ``{"tool_calls": [{"id", "name", "arguments"}]}``."""
    messages = body.get("messages") or []
    tools = _tools(body)
    script = find_script(messages)
    if not tools or script is None:
        said = next((arg for verb, arg in script[0] if verb == "say" and arg), None) if script else None
        if said == "*":  # a model's own words: another answer to the same prompt every time
            said = f"Answer {uuid.uuid4().hex[:12]}."
        return {"text": said or "done"}
    steps, at = script
    if _pick(tools, WAIT_TOOLS) is None:
        steps = [step for step in steps if step[0] != "wait"]
    index = sum(1 for m in messages[at + 1:] if m.get("role") == "assistant" and m.get("tool_calls"))
    seed = f"{json.dumps(steps)}\x00{index}"
    if index >= len(steps):
        return _answer(messages, at, tools, "done", seed)
    verb, arg = steps[index]
    if verb == "answer":
        return _answer(messages, at, tools, arg or "done", seed)
    if verb == "shell":
        fn, args = _pick(tools, SHELL_TOOLS), None
        if fn:
            args = shell_args(fn, arg)
    elif verb in ("read", "docs"):
        fn, args = _pick(tools, READ_TOOLS), None
        if verb == "docs":
            found = MD_PATH.search(system_text(body))
            if not found:
                return {"text": "no docs path in the system prompt"}
            arg = found.group(1)
        if fn:
            args = read_args(fn, arg, body)
        elif _pick(tools, SHELL_TOOLS):  # no read tool (Codex): the shell reads the file
            fn = _pick(tools, SHELL_TOOLS)
            args = shell_args(fn, f"cat {arg}")
    elif verb == "agent":
        fn, args = _pick(tools, AGENT_TOOLS), None
        if fn:
            args = agent_args(fn, arg)
    elif verb == "wait":
        fn = _pick(tools, WAIT_TOOLS)
        ids = [found.group("id") for m in messages[at + 1:] if m.get("role") == "tool"
               for found in AGENT_ID.finditer(text_of(m.get("content")))]
        if not ids:
            return {"text": "no subagent to wait for"}
        args = {"targets": ids[-1:], "timeout_ms": 600000}
    else:
        return {"text": f"unknown step {verb}"}
    if fn is None:
        return {"text": f"no tool for step {verb}"}
    return _call(fn, args, seed)


def _usage(prompt_chars: int, seq: int) -> dict:
    prompt = max(seq + 1, prompt_chars // 4)
    return {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5,
            "prompt_tokens_details": {"cached_tokens": seq}}


def chat_response(model: str, reply: dict, usage: dict) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("text")}
    finish = "stop"
    if "tool_calls" in reply:
        message["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["name"], "arguments": c["arguments"]}}
                                 for c in reply["tool_calls"]]
        finish = "tool_calls"
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}


def chat_stream(model: str, reply: dict, usage: dict) -> list[bytes]:
    base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    if "tool_calls" in reply:
        for n, call in enumerate(reply["tool_calls"]):
            chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": n, "id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": ""}}]},
                "finish_reason": None}]})
            chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": n, "function": {"arguments": call["arguments"]}}]}, "finish_reason": None}]})
        finish = "tool_calls"
    else:
        chunks.append({**base, "choices": [{"index": 0, "delta": {"content": reply["text"]}, "finish_reason": None}]})
        finish = "stop"
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({**base, "choices": [], "usage": usage})
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


class _State:
    def __init__(self, record_path: str | None, fail_every: int = 0) -> None:
        self.lock = threading.Lock()
        self.seq = 0
        self.record_path = record_path
        self.fail_every = fail_every
        self.arrived = 0  # chat requests, failed ones included

    def fails(self) -> bool:
        """Whether this chat request is one of the faults (``fail_every``: every Nth, 0 none)."""
        with self.lock:
            self.arrived += 1
            return bool(self.fail_every) and self.arrived % self.fail_every == 0

    def record(self, path: str, headers: dict, body: Any, reply: dict) -> int:
        with self.lock:
            self.seq += 1
            if self.record_path:
                entry = {"seq": self.seq, "time": time.time(), "path": path, "headers": headers,
                         "body": body, "reply": reply}
                with open(self.record_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")
            return self.seq


def make_handler(state: _State):
    class Handler(JsonHandler):

        def do_GET(self):
            if self.path.startswith("/health") or self.path.startswith("/v1/models"):
                self._send_json({"status": "ok", "object": "list", "data": [{"id": "scripted", "object": "model"}]})
            else:
                self._send_json({"error": "not found"}, 404)

        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length).decode("utf-8", errors="replace")
            headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in ("authorization", "x-api-key")}
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            if not self.path.endswith("/chat/completions"):
                state.record(self.path, headers, body, {"error": "unsupported route"})
                self._send_json({"error": {"message": f"the scripted model serves chat completions only, not {self.path}"}}, 404)
                return
            if state.fails():  # a server fault before any work: not recorded, nothing prefilled
                self._send_json({"error": {"message": "scripted fault", "type": "server_error"}}, 500)
                return
            try:
                reply = decide(body)
            except Exception as exc:  # a malformed request must not take the model down
                reply = {"text": f"scripted model error: {type(exc).__name__}"}
            seq = state.record(self.path, headers, body, reply)
            usage = _usage(len(raw), seq)
            model = str(body.get("model", "scripted"))
            if body.get("stream"):
                self._send_stream(chat_stream(model, reply, usage), flush_each=False)
            else:
                self._send_json(chat_response(model, reply, usage))

    return Handler


def serve(host: str, port: int, record_path: str | None) -> ThreadingHTTPServer:
    fail_every = int(os.environ.get("SCRIPTED_MODEL_FAIL_EVERY") or 0)
    return Server((host, port), make_handler(_State(record_path, fail_every)))  # (its listen backlog: 1024)


def main() -> None:
    run_server(serve, "scripted model", __doc__.splitlines()[0], 18090)


if __name__ == "__main__":
    main()
