"""Fingerprints, first divergence and the cost of a changed head. Pure functions.

The head is serialised as its system text (segments joined by a blank line) followed
by the tools' canonical JSON; its fingerprint is the first 16 hex digits of that
string's SHA-256. Token estimates use 4 characters per token: good enough to rank a
change at character 2,000 against one at character 200,000, never shown as exact.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .view import View, tool_name

CHARS_PER_TOKEN = 4
_SECTION = re.compile(r"(?ms)^<(?P<name>[a-z][a-z0-9_-]*)>\n.*?\n</(?P=name)>$")


def head_text(view: View) -> str:
    return "\n\n".join(view.head)


def tools_json(view: View) -> str:
    if not view.tools:
        return ""
    # Keys in the client's order: a reordered key is a changed byte on the wire, so it is drift too.
    return json.dumps(list(view.tools), ensure_ascii=False, separators=(",", ":"), default=str)


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class HeadSnapshot:
    """What the session remembers of a head: enough to say what changed and where."""

    fingerprint: str
    system: str
    tools: str
    tool_names: tuple[str, ...]

    @classmethod
    def of(cls, view: View) -> "HeadSnapshot":
        system = head_text(view)
        tools = tools_json(view)
        return cls(
            fingerprint=fingerprint(system + "\x00" + tools),
            system=system,
            tools=tools,
            tool_names=tuple(tool_name(t) for t in view.tools or ()),
        )

    def extends(self, earlier: "HeadSnapshot") -> bool:
        """True when this head only appends system text to ``earlier`` (same tools): no cache loss."""
        return self.tools == earlier.tools and self.system.startswith(earlier.system)

    @property
    def size(self) -> int:
        return len(self.system) + len(self.tools)


def first_difference(a: str, b: str) -> int:
    """Index of the first differing character (``min(len)`` when one is a prefix of the other)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # binary search on prefix equality: O(log n) slice compares in C
    while lo < hi:
        mid = (lo + hi) // 2
        if a[lo : mid + 1] == b[lo : mid + 1]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def sections(text: str) -> list[tuple[str, int, int]]:
    """pi-style ``<name>\\n...\\n</name>`` sections as (name, start, end); text before the first is ``preamble``."""
    found = [(m.group("name"), m.start(), m.end()) for m in _SECTION.finditer(text)]
    if found and found[0][1] > 0:
        found.insert(0, ("preamble", 0, found[0][1]))
    return found


def section_at(text: str, offset: int) -> str | None:
    for name, start, end in sections(text):
        if start <= offset <= end:
            return name
    return None


def _section_map(text: str) -> dict[str, str]:
    return {name: text[start:end] for name, start, end in sections(text)}


def what_changed(old: HeadSnapshot, new: HeadSnapshot) -> list[str]:
    """Names for the parts that differ: ``tools``, ``section:NAME`` or ``system``."""
    changed: list[str] = []
    if old.system != new.system:
        before, after = _section_map(old.system), _section_map(new.system)
        names = [n for n in after if before.get(n) != after[n]] + [n for n in before if n not in after]
        if names:
            changed.extend(f"section:{n}" for n in names)
        else:
            changed.append("system")
    if old.tools != new.tools:
        changed.append("tools")
    return changed


def tools_delta(old: HeadSnapshot, new: HeadSnapshot) -> dict[str, list[str]]:
    before, after = set(old.tool_names), set(new.tool_names)
    return {"added": sorted(after - before), "removed": sorted(before - after)}


def estimate_tokens(chars: int) -> int:
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def body_chars(body: Sequence[Any]) -> int:
    """Approximate serialised size of the body; only computed when a drift event is built."""
    total = 0
    for item in body:
        try:
            total += len(json.dumps(item, ensure_ascii=False, default=str))
        except (TypeError, ValueError):
            total += len(str(item))
    return total


def drift_event(old: HeadSnapshot, new: HeadSnapshot, view: View, *, session: str, model: str) -> dict[str, Any]:
    """The drift report for a head change: what changed, where, and what it costs."""
    old_serial = old.system + "\x00" + old.tools
    new_serial = new.system + "\x00" + new.tools
    offset = first_difference(old_serial, new_serial)
    in_system = offset <= len(new.system)
    where = section_at(new.system, offset) if in_system else None
    total_chars = new.size + body_chars(view.body)
    event: dict[str, Any] = {
        "event": "drift",
        "session": session,
        "model": model,
        "changed": what_changed(old, new),
        "first_diff_char": offset,
        "first_diff_token_est": offset // CHARS_PER_TOKEN,
        "first_diff_in": (f"section:{where}" if where else "system") if in_system else "tools",
        "reprefill_tokens_est": estimate_tokens(max(0, total_chars - offset)),
        "before": old.fingerprint,
        "after": new.fingerprint,
    }
    if "tools" in event["changed"]:
        event["tools"] = tools_delta(old, new)
    return event
