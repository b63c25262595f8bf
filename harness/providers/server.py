"""The provider emulators in one process on one port, routed by path; their process and their
LiteLLM proxy groups.

    python -m harness.providers --port 18091 --record /tmp/providers.jsonl [--nested-marks limit]

Routes (standard library only; 127.0.0.1; stopped by pid):

- ``POST …/v1/messages`` (and ``…/v1/messages/count_tokens``): Anthropic (anthropic.py)
- ``POST …/chat/completions``, ``POST …/responses``: OpenAI (openai.py)
- ``POST …/models/{model}:generateContent`` / ``:streamGenerateContent[?alt=sse]`` /
  ``:countTokens``: Gemini (gemini.py)
- ``GET``/``POST …cachedContents`` (also ``…/models/{model}:cachedContents``, where LiteLLM
  sends it): Gemini's explicit context caches
- ``POST /_emulator/advance {"seconds": S}``: move the virtual clock on (cache lifetimes run on it)
- ``POST /_emulator/reset``: drop every cache entry (and OpenAI's per-minute routing counts)
- ``GET /health``

Each request is recorded, before it is answered, as one JSON line: ``seq``, ``time`` (virtual),
``path``, ``family``, ``rules`` (the rule set and its parameters, ``cache.rules_to_record``),
``model``, ``scope`` (the store scope: model, hashed API key, OpenAI's machine), ``headers``
(without credentials), ``body``, ``view`` (the chat view ``decide`` answered), ``blocks`` (label,
hash, prefix hash, tokens, mark TTL or null), ``usage`` (as returned), ``reply`` (``decide``'s),
``error`` (a rejected request's message, with ``status``). ``cache.replayed_from_record`` reads a
record back for a re-run of the accounting.

The answers come from the scripted model's ``decide`` (harness/real_agents/model.py) on the chat
view, so real agent CLIs follow their ``@script:`` lines through any provider.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import urllib.request
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from harness.providers import anthropic, gemini, openai
from harness.providers.cache import Charge, Clock, MachinePool, Store, rules_to_record
from harness.providers.wire import Exchange, Rejected, caller_key, lower_headers, recorded_headers
from harness.real_agents.model import chat_response, chat_stream, decide
from harness.recording_upstream import JsonHandler, Server, run_server

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@dataclass
class Outcome:
    """What one request gets: a status and a JSON body, or a stream of byte chunks."""

    status: int
    body: Any = None
    stream: list[bytes] | None = None


class Emulator:
    """The emulators' shared state: the virtual clock, the cache store, OpenAI's machine pool, the
    record. ``serve(path, raw, headers)`` answers one request (no HTTP: tests call it directly)."""

    def __init__(self, record_path: str | Path | None = None, nested_marks: str = "limit") -> None:
        if nested_marks not in anthropic.NESTED_MARKS:
            raise ValueError(f"nested_marks must be one of {anthropic.NESTED_MARKS}")
        self.lock = threading.Lock()
        self.clock = Clock()
        self.store = Store()
        self.pool = MachinePool()
        self.caches = gemini.CachedContents()
        self.nested_marks = nested_marks
        self.record_path = record_path
        self.seq = 0

    def reset(self) -> None:
        with self.lock:
            self.store.clear()
            self.pool.clear()
            self.caches.clear()

    def advance(self, seconds: float) -> float:
        return self.clock.advance(seconds)

    def prepare(self, path: str, body: dict, headers: dict[str, str], now: float) -> Exchange:
        bare = path.split("?", 1)[0]
        if gemini.is_caches_path(bare):
            exchange, cache = gemini.prepare_cache(path, body, headers, now)
            exchange.extra["cache"] = cache
            return exchange
        if bare.endswith("/messages"):
            return anthropic.prepare(body, headers, self.nested_marks)
        if bare.endswith("/chat/completions"):
            return openai.prepare_chat(body, headers)
        if bare.endswith("/responses"):
            return openai.prepare_responses(body, headers)
        return gemini.prepare(path, body, headers, self.caches, now)

    def account(self, exchange: Exchange, now: float) -> tuple[Charge, str]:
        with self.lock:
            scope = exchange.scope
            if exchange.pooled:
                scope += f"|m{self.pool.machine_for(exchange.prompt.head, exchange.routing_key, now)}"
            return exchange.rules.charge(exchange.prompt.blocks, self.store, scope, now), scope

    def serve(self, path: str, raw: bytes | str, headers: dict[str, str]) -> Outcome:
        headers = {k.lower(): v for k, v in headers.items()}
        try:
            body = json.loads(raw or "{}")
        except ValueError:
            body = None
        now = self.clock.now()
        entry: dict[str, Any] = {"time": now, "path": path, "headers": recorded_headers(headers), "body": body}
        if not isinstance(body, dict):
            return self._rejected(entry, family_of(path), Rejected(400, {"error": {"message": "invalid JSON body"}},
                                                                   "invalid JSON body"))
        counted = self._count_tokens(path, body)
        if counted is not None:
            return Outcome(200, counted)
        try:
            exchange = self.prepare(path, body, headers, now)
        except Rejected as rejected:
            return self._rejected(entry, family_of(path), rejected)
        charge, scope = self.account(exchange, now)
        if exchange.extra.get("cache") is not None:
            return self._cache_created(entry, exchange, charge, scope)
        try:
            reply = decide(exchange.view)
        except Exception as exc:  # a malformed request must not take the emulator down
            reply = {"text": f"scripted model error: {type(exc).__name__}"}
        outcome, usage = answer(exchange, body, reply, charge)
        self._record({**entry, "family": exchange.family, "rules": rules_to_record(exchange.rules),
                      "model": exchange.model, "scope": scope, "view": exchange.view,
                      "blocks": [b.to_record() for b in exchange.prompt.blocks], "usage": usage, "reply": reply,
                      "error": None, "status": 200})
        return outcome

    def _cache_created(self, entry: dict, exchange: Exchange, charge: Charge, scope: str) -> Outcome:
        cache = exchange.extra.pop("cache")
        self.caches.add(cache)
        resource = cache.resource()
        self._record({**entry, "family": "gemini", "rules": rules_to_record(exchange.rules), "model": exchange.model,
                      "scope": scope, "view": None, "blocks": [b.to_record() for b in exchange.prompt.blocks],
                      "usage": {**resource["usageMetadata"], "cachedContentTokenCount": charge.read},
                      "reply": {"cached_content": cache.name}, "error": None, "status": 200})
        return Outcome(200, resource)

    def listed(self, path: str, headers: dict[str, str]) -> Outcome:
        """``GET …cachedContents``: the caller's live explicit caches."""
        headers = {k.lower(): v for k, v in headers.items()}
        return Outcome(200, {"cachedContents": self.caches.listed(caller_key(headers), self.clock.now())})

    def _count_tokens(self, path: str, body: dict) -> dict | None:
        bare = path.split("?", 1)[0]
        if bare.endswith("/messages/count_tokens"):
            return anthropic.count_tokens(body)
        found = gemini.route(bare)
        if found and found[1] == "countTokens":
            return gemini.count_tokens(body)
        return None

    def _rejected(self, entry: dict, family: str, rejected: Rejected) -> Outcome:
        self._record({**entry, "family": family, "rules": None, "model": (entry.get("body") or {}).get("model")
                      if isinstance(entry.get("body"), dict) else None, "scope": None, "view": None, "blocks": None,
                      "usage": None, "reply": None, "error": rejected.message, "status": rejected.status})
        return Outcome(rejected.status, rejected.body)

    def _record(self, entry: dict) -> None:
        with self.lock:
            self.seq += 1
            entry = {"seq": self.seq, **entry}
            if self.record_path:
                with open(self.record_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")


def family_of(path: str) -> str:
    bare = path.split("?", 1)[0]
    if bare.endswith("/messages") or bare.endswith("/messages/count_tokens"):
        return "anthropic"
    if bare.endswith("/chat/completions") or bare.endswith("/responses"):
        return "openai"
    return "gemini" if gemini.route(bare) or gemini.is_caches_path(bare) else "unknown"


def answer(exchange: Exchange, body: dict, reply: dict, charge: Charge) -> tuple[Outcome, dict]:
    """The provider's reply to ``reply`` with the usage of ``charge``: (outcome, usage)."""
    model = exchange.model
    if exchange.family == "anthropic":
        content = anthropic.content_of(reply)
        usage = anthropic.usage_of(charge, anthropic.output_tokens_of(content))
        message = anthropic.message_of(model, content, usage)
        return (Outcome(200, stream=anthropic.events_of(message)) if exchange.stream else Outcome(200, message)), usage
    if exchange.family == "gemini":
        parts = gemini.parts_of(reply)
        usage = gemini.usage_of(charge, gemini.output_tokens_of(parts))
        if exchange.stream:
            return Outcome(200, stream=gemini.stream_bytes(gemini.chunks_of(model, parts, usage),
                                                           exchange.extra.get("sse", False))), usage
        return Outcome(200, gemini.response_of(model, parts, usage)), usage
    output_tokens = openai.output_tokens_of(reply)
    if exchange.extra.get("api") == "responses":
        usage = openai.responses_usage(charge, output_tokens)
        response = openai.response_of(body, openai.output_items(reply), usage)
        return (Outcome(200, stream=openai.response_events(response)) if exchange.stream else Outcome(200, response)), usage
    usage = openai.chat_usage(charge, output_tokens)
    if exchange.stream:
        return Outcome(200, stream=chat_stream(model, reply, usage)), usage
    return Outcome(200, chat_response(model, reply, usage)), usage


def make_handler(emulator: Emulator):
    class Handler(JsonHandler):

        def do_GET(self):
            if self.path.startswith("/health"):
                self._send_json({"status": "ok"})
            elif gemini.is_caches_path(self.path):
                outcome = emulator.listed(self.path, lower_headers(self.headers.items()))
                self._send_json(outcome.body, outcome.status)
            elif self.path.rstrip("/").endswith("/models"):
                self._send_json({"object": "list", "data": [], "models": []})
            else:
                self._send_json({"error": {"message": f"not found: {self.path}"}}, 404)

        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            if self.path.startswith("/_emulator/"):
                self._control(raw)
                return
            outcome = emulator.serve(self.path, raw, lower_headers(self.headers.items()))
            if outcome.stream is not None:
                self._send_stream(outcome.stream, flush_each=False)
            else:
                self._send_json(outcome.body, outcome.status)

        def _control(self, raw: bytes) -> None:
            if self.path.startswith("/_emulator/advance"):
                seconds = float((json.loads(raw or b"{}") or {}).get("seconds") or 0)
                offset = emulator.advance(seconds)
                self._send_json({"offset": offset, "now": emulator.clock.now()})
            elif self.path.startswith("/_emulator/reset"):
                emulator.reset()
                self._send_json({"ok": True})
            else:
                self._send_json({"error": {"message": f"not found: {self.path}"}}, 404)

    return Handler


def serve(host: str, port: int, record_path: str | None, nested_marks: str = "limit") -> ThreadingHTTPServer:
    return Server((host, port), make_handler(Emulator(record_path, nested_marks)))


def main() -> None:
    nested = "limit"
    if "--nested-marks" in sys.argv:  # (run_server parses --host, --port, --record)
        at = sys.argv.index("--nested-marks")
        nested = sys.argv[at + 1]
        del sys.argv[at:at + 2]
    run_server(lambda host, port, record: serve(host, port, record, nested), "provider emulators",
               __doc__.splitlines()[0], 18091)


# -- the process and its proxy groups ---------------------------------------------------------


class ProviderEmulator:
    """server.py in its own process group on 127.0.0.1, recording to ``record``; stopped by pid."""

    def __init__(self, workdir: Path, nested_marks: str = "limit") -> None:
        import subprocess

        from harness.procs import free_port, wait_port

        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.record = workdir / "providers.jsonl"
        self.record.touch()
        log = workdir / "providers.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.providers", "--port", str(self.port), "--record", str(self.record),
             "--nested-marks", nested_marks],
            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True, cwd=str(ROOT),
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
        wait_port(self.port, self.proc, 30, log, "provider emulators")

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.record.read_text(encoding="utf-8").splitlines() if line.strip()]

    def _post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(f"{self.url}{path}", data=json.dumps(body).encode(), method="POST",
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def advance(self, seconds: float) -> dict:
        """Move the emulators' virtual clock ``seconds`` on."""
        return self._post("/_emulator/advance", {"seconds": seconds})

    def reset(self) -> dict:
        """Drop every cache entry (and Gemini's explicit caches)."""
        return self._post("/_emulator/reset", {})

    def stop(self) -> None:
        from harness.procs import stop

        stop(self.proc)


EMULATOR_KEY = "emulator-key"
HOSTED_GROUPS = ("hosted-anthropic", "hosted-openai", "hosted-openai-responses", "hosted-gemini")


def hosted_deployments(url: str) -> dict[str, dict]:
    """Each hosted group's ``litellm_params``, the emulator as its ``api_base``.

    The GPT-5.6 deployments set ``prompt_cache_options: {"mode": "implicit"}``, OpenAI's default
    behaviour (so neutral on the wire): LiteLLM 1.108 treats an ``openai/`` deployment with a custom
    ``api_base`` as "not OpenAI" and forwards Anthropic ``cache_control`` marks as they are (which
    OpenAI, and the emulator, answer with HTTP 400); with ``prompt_cache_options`` set it speaks
    OpenAI's ``prompt_cache_breakpoint`` dialect, as to api.openai.com
    (``integrations/anthropic_cache_control_hook.py`` ``targets_openai_prompt_cache_breakpoint``,
    ``llms/openai/chat/gpt_transformation.py`` ``_messages_and_tools_in_cache_mark_dialect``).
    ``hosted-openai-responses`` is ``openai/responses/gpt-5.6``: chat requests go through LiteLLM's
    Responses bridge to ``/v1/responses``. Every deployment sets ``drop_params``, as an operator
    would: pi sends OpenAI's ``store``, which LiteLLM refuses for Anthropic otherwise."""
    openai_options = {"prompt_cache_options": {"mode": "implicit"}}
    return {
        "hosted-anthropic": {"model": "anthropic/claude-sonnet-4-5", "api_base": url},
        "hosted-openai": {"model": "openai/gpt-5.6", "api_base": f"{url}/v1", **openai_options},
        "hosted-openai-responses": {"model": "openai/responses/gpt-5.6", "api_base": f"{url}/v1", **openai_options},
        "hosted-gemini": {"model": "gemini/gemini-2.5-flash", "api_base": f"{url}/v1beta"},
    }


def hosted_groups(url: str) -> list[dict]:
    """LiteLLM proxy ``model_list`` entries for the emulators at ``url``: each hosted group with the
    plugin (its default ``pathCheck`` restored, as in ``harness.real_agents.harness.proxy_groups``)
    and ``<group>-off`` without it (``model_info.litellm_prefix.enabled: false``)."""
    from litellm_prefix.settings import Settings

    overrides = {"pathCheck": Settings.model_fields["path_check"].default}
    groups = []
    for name, params in hosted_deployments(url).items():
        params = {**params, "api_key": EMULATOR_KEY, "drop_params": True}
        groups.append({"model_name": name, "litellm_params": dict(params), "model_info": {"litellm_prefix": overrides}})
        groups.append({"model_name": f"{name}-off", "litellm_params": dict(params),
                       "model_info": {"litellm_prefix": {"enabled": False}}})
    return groups


# -- the ways a gateway can run in front of them (bench/hosted.py) -----------------------------

# provider -> the hosted deployment it is served by
PROVIDER_DEPLOYMENTS = {"anthropic": "hosted-anthropic", "openai": "hosted-openai", "gemini": "hosted-gemini"}
INJECT = {"cache_control_injection_points": [{"location": "message", "role": "system"},
                                             {"location": "message", "index": -1}]}
# mode -> provider -> the LiteLLM params the mode adds (a provider missing: the mode does not apply there).
# plain: LiteLLM as it is; litellm-inject: its cache_control_injection_points (the last system message
# and the newest message, LiteLLM's documented pattern; to GPT-5.6 it writes prompt_cache_breakpoint);
# litellm-auto: Anthropic's automatic caching, a top-level cache_control LiteLLM passes on; plugin: the
# plugin with nothing else configured.
MODE_OPTIONS: dict[str, dict[str, dict]] = {
    "plain": {"anthropic": {}, "openai": {}, "gemini": {}},
    "litellm-inject": {"anthropic": INJECT, "openai": INJECT},
    "litellm-auto": {"anthropic": {"cache_control": {"type": "ephemeral"}}},
    "plugin": {"anthropic": {}, "openai": {}, "gemini": {}},
}


def mode_group(provider: str, mode: str) -> str:
    return f"bench-{provider}-{mode}"


def mode_groups(url: str) -> list[dict]:
    """A group per (provider, mode), each with an API key of its own (the emulators scope their
    caches by key: no mode reads another's entries); the plugin on only in ``plugin``, with its
    default ``pathCheck`` (the agents run on the gateway's own disk)."""
    from litellm_prefix.settings import Settings

    deployments = hosted_deployments(url)
    out = []
    for mode, per_provider in MODE_OPTIONS.items():
        for provider, extra in per_provider.items():
            params = {**deployments[PROVIDER_DEPLOYMENTS[provider]], **extra, "api_key": f"bench-key-{mode}",
                      "drop_params": True}
            ours = {"pathCheck": Settings.model_fields["path_check"].default} if mode == "plugin" else {"enabled": False}
            out.append({"model_name": mode_group(provider, mode), "litellm_params": params,
                        "model_info": {"litellm_prefix": ours}})
    return out


if __name__ == "__main__":
    main()
