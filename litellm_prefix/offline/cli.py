"""``litellm-prefix``: command-line tools.

    litellm-prefix check            print the resolved settings and where each value came from
    litellm-prefix replay FILE      re-processed tokens of a recorded session, with and without the plugin
    litellm-prefix diff A.json B.json   why two requests do not share a cached prefix
    litellm-prefix report LOG.jsonl     measured cache use per model, agent and session, misses by class
"""
from __future__ import annotations

import argparse
import json
import sys

from pydantic.alias_generators import to_camel

from ..settings import ENV_VARS, SettingsError, display_value, global_file, load_with_provenance, project_dir


def _check(args: argparse.Namespace) -> int:
    try:
        resolved = load_with_provenance()
    except SettingsError as exc:
        print(f"litellm-prefix: invalid settings: {exc}", file=sys.stderr)
        return 2
    settings = resolved.settings
    if args.json:
        print(json.dumps({
            to_camel(name): {"value": display_value(settings, name), "from": resolved.origin[name]}
            for name in type(settings).model_fields
        }, indent=2))
        return 0
    print(f"global file:  {global_file()}")
    directory = project_dir()
    print(f"project dir:  {directory if directory else '(none: set LITELLM_PREFIX_PROJECT_DIR)'}")
    for note in resolved.notes:
        print(f"note: {note}")
    print()
    rows = []
    for name in type(settings).model_fields:
        env = ENV_VARS.get(name, "")
        rows.append((to_camel(name), json.dumps(display_value(settings, name)), resolved.origin[name], env))
    widths = [max(len(r[i]) for r in rows + [("key", "value", "from", "environment")]) for i in range(4)]
    header = ("key", "value", "from", "environment")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    if not settings.enabled:
        print("\nlitellm-prefix is disabled (LITELLM_PREFIX=0): requests pass through byte-identical.")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from . import replay

    try:
        turns = replay.load(args.file)
    except (OSError, ValueError) as exc:
        print(f"litellm-prefix: {exc}", file=sys.stderr)
        return 2
    if args.via:
        return _replay_via(args, turns)
    try:
        settings = load_with_provenance(path_check=args.path_check).settings
    except SettingsError as exc:
        print(f"litellm-prefix: invalid settings: {exc}", file=sys.stderr)
        return 2
    without = replay.account(turns)
    with_plugin = replay.account(replay.stabilized(turns, settings))
    sessions = len({t.session for t in turns})
    result = {
        "file": str(args.file), "requests": len(turns), "sessions": sessions, "prompt_tokens": without.prompt,
        "without_plugin": {"reprocessed": without.lcp, "reprocessed_blocks": without.blocks,
                           "hit_rate": round(without.hit_rate, 4)},
        "with_plugin": {"reprocessed": with_plugin.lcp, "reprocessed_blocks": with_plugin.blocks,
                        "hit_rate": round(with_plugin.hit_rate, 4)},
        "per_turn": {"without_plugin": without.per_turn, "with_plugin": with_plugin.per_turn},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.file}: {len(turns)} requests in {sessions} session(s), {without.prompt} prompt tokens (cl100k_base)")
    print(f"{'':16}{'re-processed (prefix)':>22}{'re-processed (blocks)':>23}{'hit rate':>10}")
    for name, totals in (("without plugin", without), ("with plugin", with_plugin)):
        print(f"{name:16}{totals.lcp:>22}{totals.blocks:>23}{totals.hit_rate:>10.1%}")
    return 0


def _replay_via(args: argparse.Namespace, turns) -> int:
    import os

    import httpx

    from .replay import ROUTES

    key = args.key or os.environ.get("LITELLM_MASTER_KEY", "")
    total_prompt = total_cached = 0
    with httpx.Client(base_url=args.via.rstrip("/"), timeout=args.timeout,
                      headers={"authorization": f"Bearer {key}"} if key else {}) as client:
        for number, turn in enumerate(turns, 1):
            body = dict(turn.request)
            if args.model:
                body["model"] = args.model
            response = client.post(ROUTES[turn.route], json=body, headers={"x-session-id": turn.session})
            if response.status_code != 200:
                print(f"request {number}: HTTP {response.status_code}: {response.text[:300]}", file=sys.stderr)
                return 1
            prompt, cached = usage_tokens(response.json())
            total_prompt += prompt
            total_cached += cached
            print(f"{number:>4} {turn.session[:24]:24} prompt {prompt:>7} cached {cached:>7} re-processed {prompt - cached:>7}")
    rate = total_cached / total_prompt if total_prompt else 0.0
    print(f"total: prompt {total_prompt}, cached {total_cached}, re-processed {total_prompt - total_cached}, "
          f"hit rate {rate:.1%}")
    return 0


def usage_tokens(payload: dict) -> tuple[int, int]:
    """(prompt tokens, cached prompt tokens) from a chat, Anthropic or Responses usage block."""
    usage = payload.get("usage") or {}
    if "input_tokens" in usage and "cache_read_input_tokens" in usage:  # Anthropic
        cached = int(usage.get("cache_read_input_tokens") or 0)
        return int(usage.get("input_tokens") or 0) + cached + int(usage.get("cache_creation_input_tokens") or 0), cached
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    prompt = usage.get("prompt_tokens", usage.get("input_tokens", 0))
    return int(prompt or 0), int(details.get("cached_tokens") or 0)


def _diff(args: argparse.Namespace) -> int:
    from .replay import explain

    try:
        a, b = (json.loads(open(p, encoding="utf-8").read()) for p in (args.a, args.b))
    except (OSError, ValueError) as exc:
        print(f"litellm-prefix: {exc}", file=sys.stderr)
        return 2
    route = args.route or a.get("route") or "chat"
    for request in (a, b):
        for meta in ("session_id", "route", "target"):
            request.pop(meta, None)
    result = explain(a, b, route)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    if result["identical"]:
        print(f"identical: all {result['tokens_b']} tokens can be served from the cache")
        return 0
    print(f"first difference: character {result['first_diff_char']}, token {result['first_diff_token']} "
          f"of {result['tokens_b']}")
    print(f"changed: {', '.join(result['changed']) or 'messages only'}")
    print(f"tokens to prefill again: {result['reprefill_tokens']}")
    print(f"A: ...{result['context']['a']!r}...")
    print(f"B: ...{result['context']['b']!r}...")
    return 0


def _report(args: argparse.Namespace) -> int:
    from . import report

    try:
        summary = report.read(args.log, progress=sys.stderr if not args.quiet else None)
    except OSError as exc:
        print(f"litellm-prefix: {exc}", file=sys.stderr)
        return 2
    if args.html:
        try:
            page = report.html_page(summary)
        except ImportError:
            print("litellm-prefix: --html needs matplotlib (pip install 'litellm-prefix[report]')", file=sys.stderr)
            return 2
        with open(args.html, "w", encoding="utf-8") as fh:
            fh.write(page)
        print(f"written {args.html}", file=sys.stderr)
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    elif not args.html or args.text:
        print(report.text(summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="litellm-prefix", description="Keep agent request prefixes byte-stable.")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="print the resolved settings and where each value came from")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(func=_check)
    rep = sub.add_parser("replay", help="re-processed tokens of a recorded session, with and without the plugin")
    rep.add_argument("file", help="JSON Lines: one request per line plus session_id (and route, target)")
    rep.add_argument("--via", metavar="URL", help="send the requests through a running proxy instead")
    rep.add_argument("--key", help="proxy key for --via (default: $LITELLM_MASTER_KEY)")
    rep.add_argument("--model", help="override each request's model for --via")
    rep.add_argument("--timeout", type=float, default=600.0)
    rep.add_argument("--path-check", default="trusted", choices=["trusted", "exists", "absolute"],
                     help="a what-if: recorded install paths rarely exist here, so by default every one is "
                          "taken as stablePath on the agent's machine (trusted); exists checks this disk, "
                          "absolute rewrites none")
    rep.add_argument("--json", action="store_true")
    rep.set_defaults(func=_replay)
    diff = sub.add_parser("diff", help="why two requests do not share a cached prefix")
    diff.add_argument("a")
    diff.add_argument("b")
    diff.add_argument("--route", choices=["chat", "messages", "responses"])
    diff.add_argument("--json", action="store_true")
    diff.set_defaults(func=_diff)
    rpt = sub.add_parser("report", help="measured cache use per model, agent and session; misses by class")
    rpt.add_argument("log", help="the JSONL log (LITELLM_PREFIX_LOG); - reads standard input")
    rpt.add_argument("--html", metavar="OUT", help="write a self-contained HTML page with a per-turn chart")
    rpt.add_argument("--json", action="store_true", help="one JSON object on standard output")
    rpt.add_argument("--text", action="store_true", help="also print the text summary with --html")
    rpt.add_argument("--quiet", action="store_true", help="no progress lines on standard error")
    rpt.set_defaults(func=_report)
    keygen = sub.add_parser("keygen", help="print a new key for LITELLM_PREFIX_STORE_KEY (the shared store's "
                                           "values encrypted at rest)")
    keygen.set_defaults(func=_keygen)
    args = parser.parse_args(argv)
    return args.func(args)


def _keygen(args: argparse.Namespace) -> int:
    from ..fleet.store.cipher import new_key

    print(new_key())
    return 0


if __name__ == "__main__":
    sys.exit(main())
