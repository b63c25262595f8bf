"""Hosted providers, measured in money: the real agent CLIs through a real LiteLLM proxy to the
provider emulators (``harness/providers``), each way a gateway can run, priced by LiteLLM's cost map.

    .venv/bin/python -m bench.hosted            # every cell: bench/results/hosted.json, the README table
    .venv/bin/python -m bench.hosted --short    # two agents, two providers, their recorded requests (make test)

Cells (agent -> provider, on the agent's own route; LiteLLM translates where the two differ):

- Claude Code -> Anthropic Messages (``/v1/messages``, native);
- Codex -> OpenAI Responses, GPT-5.6 (``/v1/responses``, native);
- Gemini CLI -> Gemini ``generateContent`` (its native route);
- opencode, pi 0.73, pi 1.6, Qwen Code, Gemini CLI and aider (its recorded requests, replayed) ->
  Claude through chat completions, and GPT-5.6 through chat completions.

Modes (``harness.providers.server.MODE_OPTIONS``), each on a model group of its own with an API
key of its own (the emulators scope their caches by key, so no mode reads another's entries):
``plain`` (LiteLLM as it is, the plugin off for the group); ``litellm-inject`` (LiteLLM's own
``cache_control_injection_points``: the last system message and the newest message, its documented
pattern; to GPT-5.6 it writes them as ``prompt_cache_breakpoint``), where the provider reads marks;
``litellm-auto`` (Anthropic's automatic caching: a top-level ``cache_control`` LiteLLM passes on);
``plugin`` (the plugin, nothing else configured).

LiteLLM's ``prompt_caching`` router check pins a prefix to one deployment of a group: with one
deployment per group it changes nothing here (bench/fleet.py measures placement).

The *ideal* of a cell is what a perfectly stable client with marks placed for the provider would
pay, computed by the same emulator's accounting (``cache.replay``) on the ``plain`` run's own
blocks: each request's leading blocks up to the end of its first user message (where agents put
their volatile values; an append-only client keeps them) are the stream's earlier request's, and
after them every block equal to that request's up to the first that differs; the marks: Anthropic
at the end of the head, the end of the earlier request and the newest block, GPT-5.6 one at the
end of the head (OpenAI places its own at the tail), none for automatic caches. Stream: the same
first prompt and the same tool names (as the append-only bound of bench/real_agents.py).

Scenarios (harness/real_agents): a (three prompts, a commit between the first two, the third on
the next calendar day) and b (the same first prompt in another workspace a day later). Reported per
cell and mode: requests, prompt, cached and written tokens, input cost in USD (output tokens are the
scripted model's and the same in every mode: left out), requests the provider rejected, the most
marks one request carried, and the harness's checks (lost, tool errors).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harness.procs import Proxy
from harness.providers import cache
from harness.providers.server import MODE_OPTIONS, ProviderEmulator, mode_group, mode_groups
from harness.real_agents import harness
from harness.real_agents.catalog import SPECS
from litellm_prefix.measure import classify, pricing

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SCENARIOS = ("a", "b")
TARGET = 1.02  # money over the ideal client's, every cell

# provider -> the cost map's model and provider
PROVIDERS = {
    "anthropic": ("claude-sonnet-4-5", "anthropic"),
    "openai": ("gpt-5.6", "openai"),
    "gemini": ("gemini-2.5-flash", "gemini"),
}
MODES = MODE_OPTIONS
# (agent, provider): the agent's own route to that provider
CELLS = [("claude-code", "anthropic"), ("codex", "openai"), ("gemini-cli", "gemini"),
         *[(agent, provider) for agent in ("opencode", "pi-0.73", "pi-1.6", "qwen-code", "gemini-cli", "aider")
           for provider in ("anthropic", "openai")]]
SHORT_CELLS = [("claude-code", "anthropic"), ("opencode", "openai")]
AIDER_FIXTURE = ROOT / "tests" / "fixtures" / "agents_aider" / "aider.json"


def proxy_config(url: str) -> dict:
    return {"model_list": mode_groups(url),
            "litellm_settings": {"callbacks": ["litellm_prefix.proxy_handler"]},
            "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"}}


# -- money ------------------------------------------------------------------------------


@dataclass
class Tokens:
    prompt: int = 0
    cached: int = 0
    written: int = 0
    written_1h: int = 0


def tokens_of(usage: dict) -> Tokens:
    """A provider's usage block as prompt, cached and written tokens (Gemini's ``usageMetadata`` too)."""
    if "promptTokenCount" in usage:
        return Tokens(int(usage.get("promptTokenCount") or 0), int(usage.get("cachedContentTokenCount") or 0))
    m = classify.measure(usage)
    if m is None:
        return Tokens()
    return Tokens(m.prompt, m.cached or 0, m.written, m.written_1h)


def tokens_of_charge(charge: cache.Charge) -> Tokens:
    written = sum(charge.written.values())
    return Tokens(charge.read + written + charge.input, charge.read, written,
                  sum(n for ttl, n in charge.written.items() if ttl >= 3600))


def usd(provider: str, t: Tokens) -> float:
    model, family = PROVIDERS[provider]
    return pricing.cost_of(pricing.prices_for(model, family), t.prompt, t.cached, t.written, 0, t.written_1h).billed or 0.0


# -- the ideal client ------------------------------------------------------------------------

MESSAGE_INDEX = re.compile(r"^(?:messages|input|contents)\[(\d+)\]")


def first_user_index(record: dict) -> int:
    """Where the first user message stands in the provider's body (its volatile zone ends there)."""
    body = record.get("body") or {}
    for key in ("messages", "input", "contents"):
        items = body.get(key)
        if isinstance(items, list):
            for i, item in enumerate(items):
                if isinstance(item, dict) and item.get("role") == "user":
                    return i
            return len(items)
    return 0


def zone_end(record: dict, blocks: list[cache.Block]) -> int:
    """The number of leading blocks up to the end of the first user message: the head (tools,
    system, instructions) and that message, where agents write their volatile values."""
    last_in_zone = first_user_index(record)
    n = 0
    for block in blocks:
        found = MESSAGE_INDEX.match(block.label)
        if found and int(found.group(1)) > last_in_zone:
            break
        n += 1
    return n


def head_end(blocks: list[cache.Block]) -> int:
    """Index of the head's last block (tools, system, instructions), -1 when none."""
    return max((i for i, b in enumerate(blocks) if not MESSAGE_INDEX.match(b.label)), default=-1)


def rechained(blocks: list[cache.Block]) -> list[cache.Block]:
    """``blocks`` with their prefix hashes computed again in this order."""
    out, prefix = [], ""
    for b in blocks:
        prefix = cache.digest(prefix + b.hash)
        out.append(cache.Block(b.label, b.hash, prefix, b.tokens, b.ttl))
    return out


def stream_of(record: dict) -> tuple[str, tuple[str, ...]]:
    view = record.get("view") or {}
    return harness._opening(view), harness._tool_names(view)


def ideal_requests(records: list[dict], session_of: dict[int, str]) -> list[cache.Replayed]:
    """The plain run's requests as an append-only client with well-placed marks would send them."""
    out: list[cache.Replayed] = []
    earlier: dict[tuple, list[tuple[dict, list[cache.Block]]]] = defaultdict(list)
    seen: list[list[cache.Block]] = []  # every earlier ideal request of the cell, any session
    machines = cache.MachinePool()
    for record in records:
        replayed = cache.replayed_from_record(record)
        if replayed is None:
            continue
        client_marks = [i for i, b in enumerate(replayed.blocks) if b.ttl is not None]
        blocks = [cache.Block(b.label, b.hash, b.prefix, b.tokens, None) for b in replayed.blocks]
        key = (session_of.get(record["seq"], ""), *stream_of(record))
        best, best_len, ancestor_len = blocks, 0, 0
        for before, their in earlier[key]:
            mine_zone, their_zone = zone_end(record, blocks), zone_end(before, their)
            k = 0
            while their_zone + k < len(their) and mine_zone + k < len(blocks) \
                    and their[their_zone + k].hash == blocks[mine_zone + k].hash:
                k += 1
            held = their_zone + k
            if held > best_len:
                best = their[:held] + blocks[mine_zone + k:]
                best_len, ancestor_len = held, len(their) if their_zone + k == len(their) else 0
        ideal = rechained(best)
        shared = max((common_blocks(ideal, other) for other in seen), default=0)
        earlier[key].append((record, ideal))
        seen.append(ideal)
        # the client's own marks too, where its blocks stand as sent (before the first held block changed)
        own = [i for i in client_marks if i < len(ideal) and ideal[i].hash == blocks[i].hash]
        marks = ideal_marks(replayed.rules, ideal, ancestor_len, shared, own)
        # OpenAI picks a cache machine by the prompt's start and prompt_cache_key, and spills past
        # about 15 requests a minute: the ideal client keys each session (as the plugin does).
        scope = replayed.scope
        if record.get("family") == "openai":
            scope = f"ideal:{key[0]}|m{machines.machine_for('', key[0], replayed.time)}"
        out.append(cache.Replayed(replayed.time, scope, replayed.rules, cache.with_marks(ideal, marks)))
    return out


def common_blocks(a: list[cache.Block], b: list[cache.Block]) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n].prefix == b[n].prefix:
        n += 1
    return n


def ideal_marks(rules: Any, blocks: list[cache.Block], ancestor_len: int, shared: int,
                own: list[int] = ()) -> dict[int, int | None]:
    """Where a client that knows its own bytes marks: Anthropic at the newest block, where its
    stream's previous request ended, where what it shares with any earlier request ends, the end of
    its head and the client's own marks (Claude Code's, which split its head's static part from its
    session's), 4 at most; GPT-5.6 where it shares with earlier requests or else at the end of its
    head (OpenAI's own breakpoint takes the tail); automatic caches need none."""
    if isinstance(rules, cache.AnthropicRules):
        spots = [len(blocks) - 1, ancestor_len - 1, *reversed(own), shared - 1, head_end(blocks)]
        chosen = list(dict.fromkeys(i for i in spots if 0 <= i < len(blocks)))[:4]
        return {i: 300 for i in chosen}
    if isinstance(rules, cache.ExplicitBreakpointRules):  # own: OpenAI's implicit breakpoint, recorded as a mark
        spots = [*own, shared - 1, head_end(blocks)]
        chosen = list(dict.fromkeys(i for i in spots if 0 <= i < len(blocks)))[:rules.max_writes]
        return {i: rules.ttl for i in chosen}
    return {}


# -- running ---------------------------------------------------------------------------------


def _adapted(record: dict) -> dict:
    """An emulator record as the real-agent harness reads the scripted model's: ``body`` is the chat view."""
    return {**record, "body": record.get("view") or {"messages": []}, "provider_body": record.get("body")}


def aider_requests(scenarios: tuple[str, ...]) -> list[str]:
    """The fixture's requests of the scenarios asked for, in the order recorded: ``variant/a1`` is
    session a's first prompt (a: three prompts, the third the next day; b: another workspace; c: a's
    first prompt in a third); scenario b of the other agents is aider's b and c."""
    names = list(json.loads(AIDER_FIXTURE.read_text())["requests"])
    wanted = {"a"} if scenarios == ("a",) else {"a", "b", "c"}
    return [n for n in names if n.split("/")[1][0] in wanted]


def _post(proxy_url: str, key: str, route: str, body: dict, headers: dict) -> None:
    import urllib.request

    request = urllib.request.Request(f"{proxy_url}{route}", data=json.dumps(body).encode(),
                                     headers={**headers, "authorization": f"Bearer {key}",
                                              "content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        answer.read()


def replay_aider(proxy_url: str, key: str, group: str, names: list[str]) -> list[tuple[str, float, float]]:
    """aider's recorded requests (tests/fixtures/agents_aider), one after another, to ``group``;
    returns each one's (session, start, end): ``variant/a1`` is session ``variant/a``."""
    fixture = json.loads(AIDER_FIXTURE.read_text())
    headers = {k: v for k, v in fixture["headers"].items() if k not in ("accept-encoding", "connection")}
    windows = []
    for name in names:
        body = {**fixture["requests"][name], "model": group, "stream": False}
        body.pop("stream_options", None)
        start = time.time()
        _post(proxy_url, key, "/v1/chat/completions", body, headers)
        variant, request = name.split("/")
        windows.append((f"{variant}/{request[0]}", start, time.time()))
    return windows


ROUTES = {"anthropic_messages": "/v1/messages", "acompletion": "/v1/chat/completions", "aresponses": "/v1/responses"}


def recorded_calls(agent: str, first_session_only: bool = True) -> list[tuple[str, dict, dict]]:
    """An agent's recorded client requests (``harness/hook_record``'s fixture: what the pre-call hook
    saw through a real proxy), in order, as (route, body, headers); by default only its first
    session's (scenario a: three prompts, a commit and a file between the first two, the next day
    before the third), as the session id header names it."""
    from harness import hook_record

    out = []
    for call in hook_record.load()[agent]:
        pre = call.get("pre_call") or {}
        route = ROUTES.get(str(pre.get("call_type")))
        data = dict(pre.get("data") or {})
        if route is None:
            continue
        # LiteLLM's own metadata (the request's headers) is ``litellm_metadata`` on /v1/messages and
        # /v1/responses, ``metadata`` on chat; Anthropic's ``metadata`` (Claude Code's user_id) is the client's
        meta = data.pop("litellm_metadata", None)
        if meta is None and isinstance(data.get("metadata"), dict) and "headers" in data["metadata"]:
            meta = data.pop("metadata")
        headers = {k: v for k, v in ((meta or {}).get("headers") or {}).items()
                   if k not in ("content-length", "host", "accept-encoding", "connection", "transfer-encoding")}
        data.pop("litellm_session_id", None)
        out.append((route, {**data, "stream": False}, headers, _session_of(headers)))
    if first_session_only and out:
        out = [call for call in out if call[3] == out[0][3]]
    return [call[:3] for call in out]


SESSION_HEADERS = ("x-claude-code-session-id", "session-id", "session_id", "x-session-affinity")


def _session_of(headers: dict) -> str:
    return next((headers[h] for h in SESSION_HEADERS if h in headers), "")


PACE_SECONDS = 5.0  # the emulators' clock between two replayed requests: 12 a minute, as an agent's tool loop


def replay_recorded(proxy_url: str, key: str, group: str, agent: str,
                    emulator: ProviderEmulator) -> list[tuple[str, float, float]]:
    """``recorded_calls(agent)`` to ``group``, one after another, the emulators' clock moved on
    ``PACE_SECONDS`` before each (a replay sends in seconds what an agent sends in minutes: without
    the pace OpenAI's 15 a minute per prefix and key would spill it); returns each one's
    (session, start, end) on the emulators' clock."""
    windows = []
    for route, body, headers in recorded_calls(agent):
        offset = float(emulator.advance(PACE_SECONDS)["offset"])
        start = time.time() + offset
        _post(proxy_url, key, route, {**body, "model": group}, headers)
        windows.append((_session_of(headers), start, time.time() + offset))
    return windows


def run_cells(cells: list[tuple[str, str]], emulator: ProviderEmulator, proxy: Any, workdir: Path,
              scenarios: tuple[str, ...] = SCENARIOS, parallel: int = 2, recorded: bool = False) -> dict:
    """Every cell in every mode that applies: the real CLIs' runs (aider's recorded requests), and
    the emulator's records; ``recorded``: every agent's recorded requests replayed instead of its
    CLI (``recorded_calls``: one after another, seconds in all; the short bench in make test)."""
    specs = {s.name: s for s in SPECS}
    if not recorded:
        harness.install.install_all([specs[a] for a, _ in cells if a in specs])
    jobs: dict[str, list[tuple[str, str]]] = defaultdict(list)  # agent -> its (provider, mode) runs, in order
    for agent, provider in cells:
        for mode, per_provider in MODES.items():
            if provider in per_provider:
                jobs[agent].append((provider, mode))
    runs: list[harness.Run] = []
    replays: list[tuple[str, str, float, float, str, str]] = []  # (agent, session, start, end, provider, mode)
    lock = threading.Lock()

    def agent_job(agent: str) -> None:
        for provider, mode in jobs[agent]:
            label, group = f"{provider}/{mode}", mode_group(provider, mode)
            if agent == "aider" or recorded:
                windows = (replay_aider(proxy.url, proxy.key, group, aider_requests(scenarios)) if agent == "aider"
                           else replay_recorded(proxy.url, proxy.key, group, agent, emulator))
                with lock:
                    replays.extend((agent, session, start, end, provider, mode) for session, start, end in windows)
                continue
            env = harness.Env(proxy.url, proxy.key, workdir / provider, groups={label: group}, proxy=proxy)
            done = harness.run_agent(specs[agent], env, label, scenarios)
            with lock:
                runs.extend(done)

    with ThreadPoolExecutor(max_workers=1 if recorded else max(1, parallel)) as pool:
        list(pool.map(agent_job, list(jobs)))
    time.sleep(0.5)
    return {"runs": runs, "replays": replays, "records": emulator.records()}


def attributed(outcome: dict) -> tuple[dict[tuple[str, str, str], list[dict]], dict[int, str], dict[int, Any]]:
    """The emulator's records by (agent, provider, mode), each record's session, and the harness's
    owner map (seq -> run)."""
    records = outcome["records"]
    by_cell: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    session_of: dict[int, str] = {}
    replayed = set()
    for record in records:  # replayed requests: by their window (aider's, among live runs, by its head too)
        for agent, session, start, end, provider, mode in outcome["replays"]:
            if start <= record["time"] <= end and (agent != "aider" or _is_aider(record)):
                by_cell[(agent, provider, mode)].append(record)
                session_of[record["seq"]] = session
                replayed.add(record["seq"])
                break
    others = [r for r in records if r["seq"] not in replayed]
    owner = harness.attribute([_adapted(r) for r in others], outcome["runs"])
    for record in others:
        run = owner.get(record["seq"])
        if run is not None:
            provider, mode = run.mode.split("/", 1)
            by_cell[(run.agent, provider, mode)].append(record)
            session_of[record["seq"]] = harness.SESSION.get(run.scenario, run.scenario)
    for records_of_cell in by_cell.values():
        records_of_cell.sort(key=lambda r: r["seq"])
    return by_cell, session_of, owner


def measure(cells: list[tuple[str, str]], outcome: dict) -> tuple[list[dict], dict]:
    """One row per (agent, provider, mode) with its money, plus the ideal per (agent, provider);
    and the TTL study of each Anthropic cell."""
    by_cell, session_of, owner = attributed(outcome)
    specs = {s.name: s for s in SPECS}
    rows = []
    ttl: dict[str, dict] = {}
    for agent, provider in cells:
        if provider == "anthropic" and agent in specs:
            ttl[agent] = ttl_study(sorted(by_cell.get((agent, provider, "plugin"), []), key=lambda r: r["seq"]),
                                   [r for r in outcome["runs"] if r.agent == agent and r.mode == f"{provider}/plugin"],
                                   provider)
        for mode in (m for m, per in MODES.items() if provider in per):
            mine = sorted(by_cell.get((agent, provider, mode), []), key=lambda r: r["seq"])
            t = Tokens()
            for record in mine:
                if record.get("usage") and not record.get("error"):
                    u = tokens_of(record["usage"])
                    t.prompt, t.cached, t.written, t.written_1h = (t.prompt + u.prompt, t.cached + u.cached,
                                                                   t.written + u.written, t.written_1h + u.written_1h)
            checks = {"lost": [], "tool_errors": []}
            if agent in specs:
                agent_runs = [r for r in outcome["runs"] if r.agent == agent and r.mode == f"{provider}/{mode}"]
                for row in harness.measure(specs[agent], f"{provider}/{mode}", agent_runs,
                                           [_adapted(r) for r in mine], owner, {}):
                    checks["lost"] += row["lost"]
                    checks["tool_errors"] += row["tool_errors"]
            rows.append({"agent": agent, "provider": provider, "mode": mode, "requests": len(mine),
                         "rejected": sum(1 for r in mine if r.get("error")),
                         "max_marks": max((sum(1 for b in r.get("blocks") or () if b.get("ttl") is not None)
                                           for r in mine), default=0),
                         "prompt_tokens": t.prompt, "cached_tokens": t.cached, "written_tokens": t.written,
                         "usd": round(usd(provider, t), 6), **checks})
        plain = sorted(by_cell.get((agent, provider, "plain"), []), key=lambda r: r["seq"])
        charges = cache.replay(ideal_requests(plain, session_of))
        ideal = Tokens()
        for c in charges:
            u = tokens_of_charge(c)
            ideal.prompt, ideal.cached, ideal.written, ideal.written_1h = (
                ideal.prompt + u.prompt, ideal.cached + u.cached, ideal.written + u.written,
                ideal.written_1h + u.written_1h)
        rows.append({"agent": agent, "provider": provider, "mode": "ideal", "requests": len(charges),
                     "prompt_tokens": ideal.prompt, "cached_tokens": ideal.cached, "written_tokens": ideal.written,
                     "usd": round(usd(provider, ideal), 6)})
    return rows, ttl


# -- the marks' TTL: 5 minutes or an hour ------------------------------------------------------

GAPS = (0, 240, 360, 900, 1800)  # seconds the user idles before each prompt
TTL_POLICIES = {"5m": lambda head: 300, "1h": lambda head: 3600, "1h-head": lambda head: 3600 if head else 300}


def ttl_study(records: list[dict], runs: list[harness.Run], provider: str) -> dict[str, dict[str, float]]:
    """The plugin run's own requests of one Anthropic cell again, with the user idling ``gap``
    seconds before each prompt (every request of a prompt and after it moves on by that much), under
    each TTL policy for the same marks: all 5 minutes, all an hour (written at 2x), or the head's
    mark an hour and the rest 5 minutes. USD per policy, per gap."""
    starts = sorted(r.start for r in runs if r.prompt)[1:]
    out: dict[str, dict[str, float]] = {}
    for gap in GAPS:
        out[str(gap)] = {}
        for name, ttl_for in TTL_POLICIES.items():
            requests = []
            for record in records:
                replayed = cache.replayed_from_record(record)
                if replayed is None:
                    continue
                moved = replayed.time + gap * sum(1 for s in starts if s <= record["time"])
                marks = {i: ttl_for(not MESSAGE_INDEX.match(b.label)) for i, b in enumerate(replayed.blocks)
                         if b.ttl is not None}
                requests.append(cache.Replayed(moved, replayed.scope, replayed.rules,
                                               cache.with_marks(replayed.blocks, marks)))
            total = Tokens()
            for charge in cache.replay(requests):
                u = tokens_of_charge(charge)
                total.prompt, total.cached, total.written, total.written_1h = (
                    total.prompt + u.prompt, total.cached + u.cached, total.written + u.written,
                    total.written_1h + u.written_1h)
            out[str(gap)][name] = round(usd(provider, total), 6)
    return out


def _is_aider(record: dict) -> bool:
    """aider's head (its modes open "Act as an expert ..."; harness/aider.py)."""
    return "Act as an expert" in json.dumps((record.get("view") or {}).get("messages", [])[:1])


def table(rows: list[dict]) -> list[dict]:
    """Per cell: plain, LiteLLM's best option, the plugin and the ideal, in USD, and the ratios."""
    cells: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for row in rows:
        cells[(row["agent"], row["provider"])][row["mode"]] = row
    out = []
    for (agent, provider), modes in cells.items():
        litellm = {m: r for m, r in modes.items() if m.startswith("litellm")}
        best_name = min(litellm, key=lambda m: litellm[m]["usd"]) if litellm else "plain"
        best = modes[best_name] if litellm else modes["plain"]
        best_usd = min(best["usd"], modes["plain"]["usd"])
        plugin, ideal = modes["plugin"], modes["ideal"]
        out.append({"agent": agent, "provider": provider, "plain_usd": modes["plain"]["usd"],
                    "litellm_best": best_name if best["usd"] <= modes["plain"]["usd"] else "plain",
                    "litellm_best_usd": best_usd, "plugin_usd": plugin["usd"], "ideal_usd": ideal["usd"],
                    "plugin_over_ideal": round(plugin["usd"] / ideal["usd"], 4) if ideal["usd"] else None,
                    "plugin_over_best": round(plugin["usd"] / best_usd, 4) if best_usd else None,
                    "plugin_cached_share": round(plugin["cached_tokens"] / plugin["prompt_tokens"], 4)
                    if plugin["prompt_tokens"] else None,
                    "plugin_written": plugin["written_tokens"],
                    "rejected": sum(m.get("rejected", 0) for m in modes.values()),
                    "max_marks": max(m.get("max_marks", 0) for m in modes.values()),
                    "plugin_lost": len(plugin["lost"]), "plugin_tool_errors": len(plugin["tool_errors"])})
    return out


def markdown(rows: list[dict]) -> str:
    head = ("| agent | provider | plain | LiteLLM's best | plugin | ideal | plugin / ideal | plugin / best "
            "| cached (plugin) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]

    def num(value: float | None, spec: str) -> str:
        return "–" if value is None else format(value, spec)

    for r in rows:
        lines.append(f"| {r['agent']} | {r['provider']} | ${r['plain_usd']:.4f} | ${r['litellm_best_usd']:.4f} "
                     f"({r['litellm_best']}) | ${r['plugin_usd']:.4f} | ${r['ideal_usd']:.4f} "
                     f"| {num(r['plugin_over_ideal'], '.3f')} | {num(r['plugin_over_best'], '.3f')} "
                     f"| {num(r['plugin_cached_share'], '.0%')} |")
    return "\n".join(lines)


def failures(summary: list[dict]) -> list[dict]:
    """The cells that miss a target: money over 1.02x the ideal or over LiteLLM's best, a rejected
    request, more than 4 marks, a lost message or a tool error with the plugin."""
    return [r for r in summary if (r["plugin_over_ideal"] or 0) > TARGET or r["plugin_usd"] > r["litellm_best_usd"]
            or r["rejected"] or r["max_marks"] > 4 or r["plugin_lost"] or r["plugin_tool_errors"]]


def report(cells, scenarios, outcome: dict, out: Path, seconds: float) -> int:
    rows, ttl = measure(cells, outcome)
    summary = table(rows)
    result = {"cells": [f"{a}:{p}" for a, p in cells], "scenarios": list(scenarios),
              "seconds": round(seconds, 1), "table": summary, "ttl": ttl, "rows": rows}
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(markdown(summary))
    print(f"\nwritten to {out} ({result['seconds']} s)")
    return 1 if failures(summary) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true",
                        help="two agents, two providers, their recorded requests replayed (no CLI run)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--cells", nargs="*", default=None, help="agent:provider cells (default: every cell)")
    parser.add_argument("--remeasure", type=Path, default=None,
                        help="an earlier run's outcome.json: measure it again, run nothing")
    args = parser.parse_args(argv)
    cells = SHORT_CELLS if args.short else CELLS
    if args.cells:
        cells = [tuple(c.split(":", 1)) for c in args.cells]
    scenarios = ("a",) if args.short else SCENARIOS
    out = args.out or RESULTS / ("hosted_short.json" if args.short else "hosted.json")
    if args.remeasure:
        saved = json.loads(args.remeasure.read_text())
        outcome = {"records": saved["records"], "replays": [tuple(w) for w in saved["replays"]],
                   "runs": [harness.Run(**r) for r in saved["runs"]]}
        return report(cells, scenarios, outcome, out, 0.0)
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="bench-hosted-"))
    emulator = ProviderEmulator(work / "emulator")
    proxy = None
    try:
        proxy = Proxy(work, proxy_config(emulator.url), {"LITELLM_PREFIX_LOG": str(work / "prefix.jsonl")})
        proxy.wait_ready()
        started = time.time()
        outcome = run_cells(cells, emulator, proxy, work, scenarios, recorded=args.short)
        (work / "outcome.json").write_text(json.dumps({"records": outcome["records"], "replays": outcome["replays"],
                                                       "runs": [vars(r) for r in outcome["runs"]]}))
        return report(cells, scenarios, outcome, out, time.time() - started)
    finally:
        if proxy is not None:
            proxy.stop()
        emulator.stop()


if __name__ == "__main__":
    sys.exit(main())
