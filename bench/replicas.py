"""Replicas: agent sessions over two llama.cpp servers behind real LiteLLM proxies.

Two local llama.cpp servers (``-np 4`` each: four slots, each keeping one prompt's prefix)
are two deployments of one model group. Eight agent sessions, built from the bundled
scenarios (pi, Claude Code, Codex; the stable-client versions, so only routing differs),
are replayed interleaved, turn by turn (turn 1 of every session, then turn 2, ...),
through a real proxy. Each session gets a unique workspace line at the top of its system
prompt and first prompt, so sessions share no prefix: every token a server reuses is the
session's own. Re-processed tokens = prompt tokens - cached tokens in each answer (the
server's ``timings.prompt_n``), summed. Configurations:

- ``default``: default routing (simple shuffle), no plugin, no session ids;
- ``litellm_ids``: the router's ``session_affinity`` check, clients send ``x-session-id``;
- ``litellm_no_ids``: the same check, no client ids (what agents get today);
- ``plugin``: litellm-prefix plus the same router setting, no client ids;
- ``limit``: each session fixed to one server, four per server (the best any router can do).

Both servers restart before each configuration (empty caches). Target: plugin within
1.10x the limit. Writes bench/results/replicas.json.

    .venv/bin/python -m bench.replicas [--turns 12] [--sessions 8] [--small] [--out FILE]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harness.llama_server import LlamaServer, PortTaken, server_version
from harness.procs import Proxy, free_port
from litellm_prefix.offline.cli import usage_tokens
from litellm_prefix.offline.replay import ROUTES, Turn, load

ROOT = Path(__file__).resolve().parent.parent

AGENTS = ["pi", "claude-code", "codex"]
SLOTS = 4
PLUGIN_ENV = {
    "LITELLM_PREFIX_PATH_CHECK": "trusted",  # a what-if: the recorded install paths are not on this disk
    "LITELLM_PREFIX_STABLE_PATH": "/srv/pi-home",
    "LITELLM_PREFIX_VOLATILE_PRESETS": "current-date,todays-date,git-status",
}
CONFIGS = ["default", "litellm_ids", "litellm_no_ids", "plugin", "limit"]


def _tagged(turn: Turn, tag: str) -> Turn:
    """The turn with ``tag`` at the start of its system prompt and of its first user message."""
    request = copy.deepcopy(turn.request)
    if isinstance(request.get("instructions"), str):
        request["instructions"] = tag + request["instructions"]
    system = request.get("system")
    if isinstance(system, str):
        request["system"] = tag + system
    elif isinstance(system, list) and system:
        system[0]["text"] = tag + system[0]["text"]
    items = request.get("messages") or request.get("input") or []
    if isinstance(items, list) and items and items[0].get("role") in ("system", "developer") and "system" not in request \
            and "instructions" not in request:
        items[0]["content"] = tag + items[0]["content"] if isinstance(items[0]["content"], str) else items[0]["content"]
    for item in items:
        if isinstance(item, dict) and item.get("role") == "user":
            if isinstance(item.get("content"), str):
                item["content"] = tag + item["content"]
            elif isinstance(item.get("content"), list) and item["content"] and "text" in item["content"][0]:
                item["content"][0]["text"] = tag + item["content"][0]["text"]
            break
    return Turn(f"{turn.session}-{tag.strip()}", turn.route, request, turn.target)


def _small(turn: Turn, head_chars: int, tools: int) -> Turn:
    """The turn with its system text cut to ``head_chars`` and its first ``tools`` tools (the same cut
    on every turn, so the session stays as stable as it was): for quick runs on a small machine."""
    request = copy.deepcopy(turn.request)
    if isinstance(request.get("tools"), list):
        request["tools"] = request["tools"][:tools]
    if isinstance(request.get("instructions"), str):
        request["instructions"] = request["instructions"][:head_chars]
    if isinstance(request.get("system"), list):
        request["system"] = [{**b, "text": b["text"][:head_chars]} for b in request["system"][:1]]
    elif isinstance(request.get("system"), str):
        request["system"] = request["system"][:head_chars]
    messages = request.get("messages")
    if "system" not in request and isinstance(messages, list) and messages and messages[0].get("role") == "system":
        messages[0]["content"] = messages[0]["content"][:head_chars]
    return Turn(turn.session, turn.route, request, turn.target)


def sessions(count: int, turns: int, small: bool = False) -> list[list[Turn]]:
    """``count`` sessions, cycling through the agents, each with its own workspace tag."""
    base = {agent: load(ROOT / "bench" / "scenarios" / f"{agent}.clean.jsonl") for agent in AGENTS}
    out = []
    for k in range(count):
        session = base[AGENTS[k % len(AGENTS)]][:turns]
        if small:
            session = [_small(t, 2000, 3) for t in session]
        out.append([_tagged(t, f"[workspace-{k}] ") for t in session])
    return out


def start_server(port: int, log: Path, threads: int) -> LlamaServer:
    """A fresh server (empty caches) on ``port``; waits out the port's TIME_WAIT after a restart."""
    deadline = time.monotonic() + 180
    while True:
        try:
            return LlamaServer(port, log, n_parallel=SLOTS, threads=threads)
        except PortTaken:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


def _deployment(group: str, url: str, ident: str, responses: bool) -> dict:
    model = "hosted_vllm/local" if responses else "openai/local"
    return {"model_name": group, "litellm_params": {"model": model, "api_base": f"{url}/v1", "api_key": "none"},
            "model_info": {"id": ident}}


def config(urls: list[str], plugin: bool, affinity: bool) -> dict:
    models = []
    for suffix, responses in (("", False), ("-responses", True)):
        models += [_deployment(f"pool{suffix}", url, f"server-{i}{suffix}", responses) for i, url in enumerate(urls)]
        models += [_deployment(f"server-{i}{suffix}", url, f"only-{i}{suffix}", responses) for i, url in enumerate(urls)]
    settings: dict = {"openai_system_messages_first": True}
    if plugin:
        settings["callbacks"] = ["litellm_prefix.proxy_handler"]
    out = {"model_list": models, "litellm_settings": settings,
           "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"}}
    if affinity:
        out["router_settings"] = {"optional_pre_call_checks": ["session_affinity"]}
    return out


def replay(proxy: Proxy, all_sessions: list[list[Turn]], name: str) -> dict:
    reprocessed = cached = failures = 0
    placement: dict[int, list[str]] = {k: [] for k in range(len(all_sessions))}
    started = time.perf_counter()
    for t in range(max(len(s) for s in all_sessions)):
        for k, session in enumerate(all_sessions):
            if t >= len(session):
                continue
            turn = session[t]
            body = dict(turn.request)
            group = f"server-{k % 2}" if name == "limit" else "pool"
            body["model"] = group + ("-responses" if turn.route == "responses" else "")
            headers = {"x-session-id": f"bench-session-{k:02d}"} if name == "litellm_ids" else {}
            response = proxy.client.post(ROUTES[turn.route], json=body, headers=headers, timeout=600)
            if response.status_code != 200:
                failures += 1
                print(f"  {name}: session {k} turn {t}: HTTP {response.status_code} {response.text[:300]}", flush=True)
                continue
            prompt, hit = usage_tokens(response.json())
            reprocessed += prompt - hit
            cached += hit
            placement[k].append(response.headers.get("x-litellm-model-id", "?").removesuffix("-responses"))
    per_server = Counter(p[0] for p in placement.values() if p)
    switches = sum(sum(a != b for a, b in zip(p, p[1:])) for p in placement.values())
    return {"reprocessed": reprocessed, "cached": cached, "failures": failures,
            "sessions_per_server_first_turn": dict(sorted(per_server.items())), "server_switches": switches,
            "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12, help="turns per session (the scenarios have 12)")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--only", nargs="*", choices=CONFIGS, default=CONFIGS)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "replicas.json")
    parser.add_argument("--small", action="store_true",
                        help="cut each session's system text to 2,000 characters and its tools to 3 (quick runs)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="litellm-prefix-replicas-"))
    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    all_sessions = sessions(args.sessions, args.turns, args.small)
    proxies: dict[str, Proxy] = {}
    servers: list[LlamaServer] = []
    try:
        proxies["plain"] = Proxy(work, config(urls, plugin=False, affinity=False), {}, name="plain")
        proxies["affinity"] = Proxy(work, config(urls, plugin=False, affinity=True), {}, name="affinity")
        proxies["plugin"] = Proxy(work, config(urls, plugin=True, affinity=True), PLUGIN_ENV, name="plugin")
        for proxy in proxies.values():
            proxy.wait_ready()
        results: dict = {
            "machine": f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}",
            "server": f"llama.cpp server ({server_version()}), tiny random llama, -np {SLOTS}, two servers",
            "sessions": args.sessions, "turns": args.turns, "small": args.small, "configurations": {},
        }
        uses = {"default": "plain", "litellm_ids": "affinity", "litellm_no_ids": "affinity", "plugin": "plugin",
                "limit": "plain"}
        for name in args.only:
            for server in servers:
                server.stop()
            servers = [start_server(port, work / f"llama-{port}.log", args.threads) for port in ports]
            result = replay(proxies[uses[name]], all_sessions, name)
            results["configurations"][name] = result
            print(f"{name:15} re-processed {result['reprocessed']:>9,}  cached {result['cached']:>9,}  "
                  f"first-turn placement {result['sessions_per_server_first_turn']}  "
                  f"switches {result['server_switches']}  failures {result['failures']}  {result['seconds']} s",
                  flush=True)
        limit = results["configurations"].get("limit", {}).get("reprocessed")
        if limit:
            for result in results["configurations"].values():
                result["over_limit"] = round(result["reprocessed"] / limit, 3)
            print("over the limit: " + ", ".join(f"{n} {r['over_limit']:.2f}x"
                                                for n, r in results["configurations"].items()))
        out = args.out
        out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"written to {out}")
    finally:
        for server in servers:
            server.stop()
        for proxy in proxies.values():
            proxy.stop()


if __name__ == "__main__":
    main()
