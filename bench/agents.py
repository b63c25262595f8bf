"""Per-agent table: tokens an exact-prefix cache must prefill again, at zero configuration.

For each bundled agent session (bench/scenarios/agents-*.jsonl, written by
make_agent_scenarios.py) three runs are counted with litellm-prefix's replay accounting
(ChatML rendering, cl100k_base, one slot per session: longest common token prefix with the
previous request, as llama.cpp ``-np 1``):

- no plugin: the agent's requests as sent;
- plugin: the same requests through the plugin with default settings and nothing but
  the agent's own headers (as the proxy sees them): it must find the agent, its session
  and its presets by itself;
- stable client: the same session from a client that never moves its head (the oracle).

Target: plugin ≤ 1.02 × stable on every row. Each plugin run is also checked for loss:
every client message or item reaches the output in order, tool calls stay paired with
their results, and every tool is still there.

    .venv/bin/python -m bench.agents [--json]      # also writes bench/results/agents.json
"""
from __future__ import annotations

import copy
import json
import os
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from litellm_prefix.offline.replay import _CALL_TYPES, Turn, account
from litellm_prefix.request.core import Stabilizer
from litellm_prefix.request.rules.notes import unfolded
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "bench" / "scenarios"

AGENTS = ("claude-code", "opencode", "codex", "unknown")
TARGET_RATIO = 1.02


def load(path: Path) -> list[tuple[Turn, dict]]:
    """(turn, the agent's headers) per line."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            raw = json.loads(line)
            headers = raw.pop("headers", {}) or {}
            out.append((Turn.from_line(raw), headers))
    return out


def through_plugin(turns: list[tuple[Turn, dict]]) -> tuple[list[Turn], Counter]:
    """The requests as the plugin sends them upstream: default settings, the agent's headers only."""
    stabilizer = Stabilizer(Settings())
    out = []
    agents: Counter = Counter()
    for n, (turn, headers) in enumerate(turns):
        data = copy.deepcopy(turn.request)
        data["proxy_server_request"] = {"headers": dict(headers)}
        data["litellm_call_id"] = f"bench-{n}"
        target = Target(model="local", provider=str(turn.target.get("provider", "")),
                        system_messages_first=bool(turn.target.get("system_messages_first")))
        result = stabilizer.stabilize_sync(data, _CALL_TYPES[turn.route], target=target)
        agents[stabilizer.response_headers(f"bench-{n}").get("x-litellm-prefix-agent", "none")] += 1
        result.pop("proxy_server_request", None)
        result.pop("litellm_call_id", None)
        out.append(Turn(turn.session, turn.route, dict(result), turn.target))
    return out, agents


def _client_items(turn: Turn) -> list:
    request = turn.request
    if turn.route == "responses":
        return [i for i in request.get("input") or [] if i.get("role") not in ("system", "developer")]
    if turn.route == "messages":
        return list(request.get("messages") or [])
    return [m for m in request.get("messages") or [] if m.get("role") not in ("system", "developer")]


def _tool_names(turn: Turn) -> list[str]:
    from litellm_prefix.request.view import tool_name

    return sorted(tool_name(t) for t in turn.request.get("tools") or [])


def lost(sent: list[Turn], received: list[Turn]) -> list[str]:
    """Everything the client sent reaches the model, in order; tool calls paired; tools kept."""
    problems = []
    for n, (a, b) in enumerate(zip(sent, received)):
        want, got = _client_items(a), [unfolded(item) for item in _client_items(b)]  # notes folded in: out
        it = iter(got)
        if not all(any(item == other for other in it) for item in want):
            problems.append(f"request {n}: a client message is missing or out of order")
        if _tool_names(a) != _tool_names(b):
            problems.append(f"request {n}: tools differ")
        calls = [c["id"] for m in got if isinstance(m, dict) for c in (m.get("tool_calls") or [])]
        results = [m.get("tool_call_id") for m in got if isinstance(m, dict) and m.get("role") == "tool"]
        if calls != results:
            problems.append(f"request {n}: tool calls and results unpaired")
    return problems


def measure(agent: str) -> dict:
    noisy = load(SCENARIOS / f"agents-{agent}.noisy.jsonl")
    clean = load(SCENARIOS / f"agents-{agent}.clean.jsonl")
    plugin_turns, detected = through_plugin(noisy)
    raw = account(t for t, _ in noisy)
    stable = account(t for t, _ in clean)
    plugin = account(plugin_turns)
    return {
        "agent": agent,
        "detected": dict(detected),
        "requests": len(noisy),
        "prompt_tokens": raw.prompt,
        "no_plugin": raw.lcp,
        "plugin": plugin.lcp,
        "stable": stable.lcp,
        "plugin_vs_stable": round(plugin.lcp / stable.lcp, 4),
        "no_plugin_vs_stable": round(raw.lcp / stable.lcp, 4),
        "lost": lost([t for t, _ in noisy], plugin_turns),
    }


def main() -> int:
    rows = [measure(agent) for agent in AGENTS]
    out = ROOT / "bench" / "results" / "agents.json"
    out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    if "--json" in sys.argv:
        print(json.dumps(rows, indent=2))
    else:
        print("Re-processed tokens per agent session (exact-prefix cache, one slot, cl100k_base), zero configuration")
        print(f"{'agent':<12} {'detected as':<14} {'requests':>8} {'no plugin':>10} {'plugin':>8} {'stable':>8} "
              f"{'plugin/stable':>13} {'no plugin/stable':>16}  lost")
        for r in rows:
            detected = ",".join(sorted(r["detected"]))
            print(f"{r['agent']:<12} {detected:<14} {r['requests']:>8} {r['no_plugin']:>10} {r['plugin']:>8} "
                  f"{r['stable']:>8} {r['plugin_vs_stable']:>12.3f}x {r['no_plugin_vs_stable']:>15.2f}x  "
                  f"{'nothing' if not r['lost'] else '; '.join(r['lost'][:3])}")
    over = [r["agent"] for r in rows if r["plugin_vs_stable"] > TARGET_RATIO]
    if over:
        print(f"above {TARGET_RATIO}x the stable client: {', '.join(over)}")
    return 1 if any(r["lost"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
