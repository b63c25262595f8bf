"""``litellm-prefix``: command-line tools.

    litellm-prefix check    print the resolved settings and where each value came from
"""
from __future__ import annotations

import argparse
import json
import sys

from pydantic.alias_generators import to_camel

from .settings import ENV_VARS, SettingsError, display_value, global_file, load_with_provenance, project_dir


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="litellm-prefix", description="Keep agent request prefixes byte-stable.")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="print the resolved settings and where each value came from")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(func=_check)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
