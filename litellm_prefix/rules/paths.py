"""Install paths: an absolute install root that ends in the package suffix becomes ``stablePath``.

Agents print their own install directory into the prompt (pi: ``<root>/docs``, the
README path, example paths). A reinstall, an ``nvm`` switch or a second machine moves
that root, and every byte after its first mention has to be prefilled again. This
rule rewrites the root, also inside longer paths such as ``<root>/docs/x.md``, to one
stable path, in the head (system text and tool definitions).

A candidate starts at the beginning of the text, after whitespace, or after one of
``"'`(<[``, and is absolute (starts with ``/`` and has at least one directory before
the suffix). Relative mentions, a bare ``/<suffix>`` and URLs are never candidates. With ``pathCheck: exists`` (the gateway shares a disk with
the agent) a candidate is rewritten only when the root exists on disk; with
``absolute`` (a remote gateway) every absolute candidate is. Rewriting the stable path
again gives the stable path: the rule is idempotent.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ..context import Context, Event
from ..view import View

_BOUNDARY_CHARS = "\"'`(<["
_PATH_CHAR = r"[^\s\"'`()<>\[\]{}|]"


@lru_cache(maxsize=32)
def _pattern(suffix: str) -> re.Pattern[str]:
    # root = "/" + path chars, ending in "/<suffix>", followed by "/", a closing
    # delimiter, whitespace, the end, or punctuation that ends the sentence.
    return re.compile(
        rf"(?:^|(?<=[\s{re.escape(_BOUNDARY_CHARS)}]))"
        rf"(?P<root>/{_PATH_CHAR}+/{re.escape(suffix)})"
        rf"(?=/|[\s\"'`)>\]}}|]|$|[.,;:!?](?:[\s\"'`)>\]}}]|$))"
    )


def rewrite_text(text: str, ctx: Context, found: dict[str, int]) -> str:
    """``text`` with every qualifying install root replaced by the stable path."""
    suffix = ctx.settings.package_path_suffix
    if suffix not in text:
        return text
    stable = ctx.settings.resolved_stable_path
    check = ctx.settings.path_check == "exists"

    def replace(match: re.Match[str]) -> str:
        root = match.group("root")
        if root == stable or (check and not ctx.path_exists(root)):
            return root
        found[root] = found.get(root, 0) + 1
        return stable

    return _pattern(suffix).sub(replace, text)


def _rewrite_value(value: Any, ctx: Context, found: dict[str, int]) -> Any:
    if isinstance(value, str):
        new_text = rewrite_text(value, ctx, found)
        return value if new_text == value else new_text
    if isinstance(value, Mapping):
        changed = {}
        for key, item in value.items():
            new = _rewrite_value(item, ctx, found)
            if new is not item:
                changed[key] = new
        return {**value, **changed} if changed else value
    if isinstance(value, list):
        new_items = [_rewrite_value(item, ctx, found) for item in value]
        return new_items if any(a is not b for a, b in zip(value, new_items)) else value
    return value


def stabilize_install_paths(view: View, ctx: Context) -> tuple[View, list[Event]]:
    found: dict[str, int] = {}
    head = tuple(rewrite_text(text, ctx, found) for text in view.head)
    tools = view.tools
    if tools is not None:
        new_tools = tuple(_rewrite_value(tool, ctx, found) for tool in tools)
        if any(a is not b for a, b in zip(tools, new_tools)):
            tools = new_tools
    if not found:
        return view, []
    events = [Event("install_path", {"root": root, "count": count}) for root, count in sorted(found.items())]
    return view.replace(head=head, tools=tools), events
