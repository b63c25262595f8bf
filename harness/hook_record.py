"""The requests the plugin's hooks really see: real agent CLIs through a proxy, every hook's input recorded.

``bench/hooks_cpu.py`` replays real agent traffic through the plugin's hooks in one process. The
scripted model's record (``harness/real_agents``) holds what the *upstream* received, after the
plugin and after LiteLLM's translation (``/v1/messages``, ``/v1/responses`` and Gemini's routes
reach a ``hosted_vllm`` deployment as chat completions): not what the hooks see. So a second
callback, ``handler`` below, sits before the plugin in the proxy's callback list and writes each
hook's input to ``$HOOK_RECORD`` (JSONL) as it came: the pre-call hook's ``data`` (the client's
request, before the plugin rewrites it), the deployment hook's ``kwargs`` (the plugin's pre-call
output, as LiteLLM hands it on, translated where the route is), and the success callback's usage.
Only JSON fields the plugin reads are kept; secrets and LiteLLM's own objects never are.

``record`` runs every agent of ``harness/real_agents`` (every scenario, the plugin's group) one
agent after another, so that each call belongs to the agent whose time window holds it, and
writes the compact fixture ``tests/fixtures/real_traffic/calls.json.gz`` (``compact``): per
agent, its calls in order, each a hook input whose strings, messages and tools are stored once
for the whole file (an appended turn repeats its earlier messages: they cost a reference each).
aider's requests come from ``tests/fixtures/agents_aider/aider.json`` (recorded with the plugin off
on the chat route, where the upstream body is the client's request; its CLI is not run here).

    .venv/bin/python -m harness.hook_record record [--out tests/fixtures/real_traffic/calls.json.gz]
    .venv/bin/python -m harness.hook_record compact RAW.jsonl [--out F] "VERSIONS"   # again from a raw record
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "real_traffic" / "calls.json.gz"
AIDER = ROOT / "tests" / "fixtures" / "agents_aider" / "aider.json"

# The request's own fields the hooks read (wire adapters, session, profiles, hints); everything
# else LiteLLM puts in ``data`` (its logging object, secrets, the raw body) is left out.
FIELDS = ("model", "messages", "tools", "system", "input", "instructions", "metadata", "litellm_metadata",
          "litellm_session_id", "prompt_cache_key", "max_tokens", "max_completion_tokens", "max_output_tokens",
          "stream", "tool_choice", "temperature", "user", "previous_response_id", "store", "reasoning",
          "contents", "systemInstruction", "system_instruction", "generationConfig", "config")
DEPLOYMENT_FIELDS = (*FIELDS, "custom_llm_provider", "api_base", "model_info")
HIDDEN_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "proxy-authorization")
# metadata keys kept: the ones the plugin reads (the headers, the client's own ids)
META_KEYS = ("headers", "session_id", "user_id", "model_group")


def _headers(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k).lower(): str(v) for k, v in value.items() if str(k).lower() not in HIDDEN_HEADERS}


def _plain(value: Any) -> Any:
    """``value`` as JSON (a pydantic model dumped), or a ``ValueError``."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(exclude_none=True)
    return json.loads(json.dumps(value, default=_refuse))


def _refuse(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    raise ValueError(type(value).__name__)


# Never kept: LiteLLM's own objects and anything that may hold a secret.
SKIPPED = ("proxy_server_request", "secret_fields", "litellm_logging_obj", "api_key", "litellm_params",
           "standard_logging_object", "user_api_key_dict", "litellm_call_id", "litellm_trace_id")


def kept_fields(data: Mapping[str, Any], names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``names`` of ``data`` (None: every key but ``SKIPPED`` ones and those LiteLLM adds about
    the key, ``user_api_key*``), each as JSON; a field that is not JSON is left out."""
    out: dict[str, Any] = {}
    if names is None:
        names = tuple(k for k in data if isinstance(k, str) and k not in SKIPPED and not k.startswith("user_api_key"))
    for name in names:
        if name not in data:
            continue
        value = data[name]
        if name in ("metadata", "litellm_metadata") and isinstance(value, Mapping):
            value = {k: (_headers(v) if k == "headers" else v) for k, v in value.items() if k in META_KEYS}
        elif name == "model_info" and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if k in ("id", "litellm_prefix", "supports_mid_conversation_system")}
        try:
            out[name] = _plain(value)
        except (ValueError, TypeError):
            continue
    return out


def _params(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    params = kwargs.get("litellm_params")
    if not isinstance(params, Mapping):
        return {}
    return {k: params[k] for k in ("model", "custom_llm_provider", "api_base") if isinstance(params.get(k), str)}


class Recorder:
    """Appends one JSON line per hook call to ``path`` (a lock: the proxy's threads)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)


def _make_handler():
    from litellm.integrations.custom_logger import CustomLogger

    class HookRecorder(CustomLogger):
        """Before the plugin in the callback list: sees each hook's input as the plugin does."""

        def __init__(self) -> None:
            super().__init__()
            path = os.environ.get("HOOK_RECORD")
            self.recorder = Recorder(path) if path else None

        def _write(self, hook: str, call_type: Any, source: Mapping[str, Any], **extra: Any) -> None:
            if self.recorder is None:
                return
            try:
                call_id = source.get("litellm_call_id")
                record = {"hook": hook, "time": time.time(), "call_id": call_id if isinstance(call_id, str) else None,
                          "call_type": str(getattr(call_type, "value", call_type)), **extra}
                self.recorder.write(record)
            except Exception as exc:  # recording must never fail a call
                print(f"hook_record: not recorded ({type(exc).__name__}: {exc})", file=sys.stderr)

        async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any) -> dict:
            request = data.get("proxy_server_request")
            headers = _headers(request.get("headers")) if isinstance(request, Mapping) else {}
            self._write("pre_call", call_type, data, data=kept_fields(data), headers=headers,
                        route=str(request.get("url", "")) if isinstance(request, Mapping) else "")
            return data

        async def async_pre_call_deployment_hook(self, kwargs: dict, call_type: Any) -> dict:
            self._write("deployment", call_type, kwargs, data=kept_fields(kwargs, DEPLOYMENT_FIELDS),
                        litellm_params=_params(kwargs))
            return kwargs

        async def async_log_success_event(self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any) -> None:
            slo = kwargs.get("standard_logging_object")
            slo = slo if isinstance(slo, Mapping) else {}
            meta = slo.get("metadata") if isinstance(slo.get("metadata"), Mapping) else {}
            usage = meta.get("usage_object")
            try:
                usage = _plain(usage) if usage else None
            except (ValueError, TypeError):
                usage = None
            self._write("success", kwargs.get("call_type"), {"litellm_call_id": kwargs.get("litellm_call_id")
                                                             or slo.get("litellm_call_id")},
                        usage=usage, slo={k: slo.get(k) for k in ("model_id", "model_group", "custom_llm_provider",
                                                                   "model", "api_base") if isinstance(slo.get(k), str)})

    return HookRecorder()


def __getattr__(name: str) -> Any:
    if name == "handler":  # built when the proxy loads its callbacks (LiteLLM imported by then)
        handler = _make_handler()
        globals()["handler"] = handler
        return handler
    raise AttributeError(name)


# -- the fixture ---------------------------------------------------------------------


class Interner:
    """Every string of at least ``MIN`` characters and every dict or list whose JSON is at least
    ``MIN`` bytes, stored once (``{"$": n}`` in its place): an appended turn's earlier messages,
    an agent's system prompt and tools cost a reference each."""

    MIN = 64

    def __init__(self) -> None:
        self.table: list[Any] = []
        self._index: dict[str, int] = {}

    def intern(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._ref(value, value) if len(value) >= self.MIN else value
        if isinstance(value, dict):
            inner = {k: self.intern(v) for k, v in value.items()}
        elif isinstance(value, list):
            inner = [self.intern(v) for v in value]
        else:
            return value
        encoded = json.dumps(inner, ensure_ascii=False, sort_keys=False)
        return self._ref(encoded, inner) if len(encoded) >= self.MIN else inner

    def _ref(self, key: str, stored: Any) -> dict[str, int]:
        digest = hashlib.sha1(("s" if isinstance(stored, str) else "j").encode() + key.encode("utf-8", "surrogatepass")
                              ).hexdigest()
        found = self._index.get(digest)
        if found is None:
            found = self._index[digest] = len(self.table)
            self.table.append(stored)
        return {"$": found}


def expand(value: Any, table: list[Any], done: dict[int, Any] | None = None) -> Any:
    """The value ``Interner.intern`` stored (shared entries decoded once: the caller copies what it mutates)."""
    done = {} if done is None else done
    if isinstance(value, dict):
        if len(value) == 1 and "$" in value:
            ref = value["$"]
            if ref not in done:
                done[ref] = expand(table[ref], table, done)
            return done[ref]
        return {k: expand(v, table, done) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, table, done) for v in value]
    return value


def compact(agents: Mapping[str, list[dict]], source: str) -> dict[str, Any]:
    interner = Interner()
    lanes = {agent: [interner.intern(call) for call in calls] for agent, calls in agents.items()}
    return {"source": source, "table": interner.table, "agents": lanes}


def load(path: Path = FIXTURE) -> dict[str, list[dict]]:
    """agent -> its calls in order, as recorded (``calls``: ``{"pre_call": ..., "deployment": ..., "success": ...}``)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        raw = json.load(fh)
    table = raw["table"]
    done: dict[int, Any] = {}
    return {agent: [expand(call, table, done) for call in calls] for agent, calls in raw["agents"].items()}


def aider_calls(path: Path = AIDER) -> list[dict]:
    """aider's recorded requests as pre-call inputs, session by session (a, b, c of each variant),
    each session's prompts in order (chat route: what reached the upstream with the plugin off is
    the client's request)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    headers = {k.lower(): v for k, v in raw["headers"].items()}
    calls = []
    for name in sorted(raw["requests"], key=lambda n: (n.split("/")[0], n.split("/")[1][0], n.split("/")[1][1:])):
        body = dict(raw["requests"][name])
        body.pop("stream_options", None)
        calls.append({"pre_call": {"call_type": "acompletion", "headers": headers, "data": body}})
    return calls


TAG = re.compile(r"\(agent: ([A-Za-z0-9_.-]+)\)")


def calls_of(records: list[dict]) -> Iterator[dict]:
    """Hook records grouped per call, in the order of their pre-call hooks: each call
    ``{"pre_call": record, "deployment": [records], "success": record}``. A ``/v1/messages`` or
    ``/v1/responses`` call served as chat completions reaches the deployment hook twice under its
    call id: in its own shape, then translated. A Gemini route's call is served by an inner chat
    completion of its own call id (LiteLLM's ``google_genai`` adapter): its deployment hook
    (``"inner": true``) and success callback belong to the call whose pre-call hook came last."""
    by_call: dict[str, dict] = {}
    order: list[str] = []
    inner: dict[str, str] = {}  # an inner call id -> the call it serves
    for record in records:
        call_id = record.get("call_id")
        if not call_id:
            continue
        hook = record["hook"]
        entry = {k: v for k, v in record.items() if k not in ("hook", "time", "call_id", "route")}
        if call_id not in by_call and hook == "pre_call":
            by_call[call_id] = {"deployment": []}
            order.append(call_id)
        elif call_id not in by_call and call_id not in inner:
            if not order or hook != "deployment":
                continue  # (no call of a client's to serve)
            inner[call_id] = order[-1]
        if call_id in inner:
            entry["inner"] = True
        call = by_call[inner.get(call_id, call_id)]
        if hook == "deployment":
            call["deployment"].append(entry)
        elif hook == "success" and (call_id in inner or "success" not in call):
            call[hook] = entry
        elif hook not in call:
            call[hook] = entry
    for call_id in order:
        yield by_call[call_id]


def by_agent(records: list[dict]) -> dict[str, list[dict]]:
    """The calls of each agent: ``record`` runs one agent after another, so a call belongs to the
    agent whose tag (``(agent: NAME)``, in every prompt) the last tagged call carried (a call
    without a tag, such as a title request, follows its agent's tagged ones)."""
    agents: dict[str, list[dict]] = {}
    current = None
    for call in calls_of(records):
        found = TAG.search(json.dumps(call["pre_call"]["data"], ensure_ascii=False))
        if found:
            current = found.group(1)
        if current is not None:
            agents.setdefault(current, []).append(call)
    return agents


def write_fixture(agents: Mapping[str, list[dict]], out: Path, versions: str) -> None:
    agents = {**agents, "aider": aider_calls()}
    fixture = compact(agents, f"harness/hook_record.py: every hook's input through a LiteLLM proxy with the plugin "
                              f"({versions}); aider 0.86.2 from tests/fixtures/agents_aider/aider.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=9) as fh:
        json.dump(fixture, fh, ensure_ascii=False, separators=(",", ":"))
    print(f"{sum(len(c) for c in agents.values())} calls of {len(agents)} agents, {out.stat().st_size} bytes in {out}")


def record(out: Path) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import tempfile

    from harness.proxy_fleet import Fleet
    from harness.real_agents import harness
    from harness.real_agents.catalog import SPECS

    work = Path(tempfile.mkdtemp(prefix="hook-record-"))
    raw = work / "hooks.jsonl"
    raw.touch()
    os.environ["HOOK_RECORD"] = str(raw)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    model = harness.ScriptedModel(work)
    config = harness.scripted_proxy_config(model.url)
    config["litellm_settings"]["callbacks"] = ["harness.hook_record.handler", *config["litellm_settings"]["callbacks"]]
    try:
        with Fleet(work, config, 1) as fleet:
            for spec in SPECS:  # one agent at a time: a call without the agent's tag follows its agent's
                harness.run_specs([spec], fleet.url, fleet.key, model, fleet.logs, work / "runs" / spec.name,
                                  ("plugin",), 1, proxy=fleet.proxies)
    finally:
        model.stop()
    records = [json.loads(line) for line in raw.read_text(encoding="utf-8").splitlines() if line.strip()]
    write_fixture(by_agent(records), out, ", ".join(f"{s.name} {s.version}" for s in SPECS))
    print(f"raw record: {raw}")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] in ("record", "compact"):
        # compact RAW [--out F] VERSIONS: the fixture again from a raw record (hooks.jsonl)
        args = sys.argv[2:]
        out = FIXTURE
        if "--out" in args:
            at = args.index("--out")
            out = Path(args[at + 1])
            del args[at:at + 2]
        if sys.argv[1] == "record":
            record(out)
        else:
            raw_records = [json.loads(line) for line in Path(args[0]).read_text(encoding="utf-8").splitlines() if line]
            write_fixture(by_agent(raw_records), out, args[1] if len(args) > 1 else "")
    else:
        sys.exit(__doc__)
