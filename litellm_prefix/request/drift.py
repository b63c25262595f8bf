"""Fingerprints, first divergence and the cost of a changed head. Pure functions.

The head is its system text (segments joined by a blank line) followed by the tools'
JSON (keys in the client's order: a reordered key is a changed byte on the wire; marker
fields such as ``cache_control`` left out: a moved mark is not a changed head). Its
fingerprint (16 hex digits) is a SHA-256 over the hashes of its parts (sections and
tools), so it changes exactly when a byte of the head does.
The journal keeps the head section by section (pi sections where the text has them,
else one section per system segment) by content hash and length; the texts live in
the store, so a drift report can name the first differing character without the
journal carrying the whole prompt. Token estimates use 4 characters per token.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..caches import Identity, compact_json, orjson
from .context import Context
from .events import Drift, Event, HeadSeen, TextsNeeded, TextsToKeep
from .journal import MARKER_FIELDS, HeadRecord, Journal
from .sections import JOIN, parse_head, section_digests, text_digest
from .view import View, tool_name

CHARS_PER_TOKEN = 4


def head_text(view: View) -> str:
    return JOIN.join(view.head)


def tools_json(view: View, ctx: Context | None = None) -> str:
    """The tools' compact JSON (computed once per request when there is a context).

    A moved ``cache_control`` is not a changed head: marked tools are encoded without their marks."""
    tools = view.tools
    if not tools:
        return ""
    if ctx is None:
        return "[" + ",".join(_unmarked_tool_json(tool, compact_json) for tool in tools) + "]"
    return tools_entry(tools, ctx)[1]


def tools_entry(tools: Any, ctx: Context) -> tuple[Any, str, bool]:
    """``(tools, their unmarked JSON, exact)``, once per request and tools object (``ctx.memo``).

    ``exact``: no tool carries a marker field and the text is orjson's encoding of the list, so
    two lists with equal texts hold equal JSON values (what may be remembered by the text)."""
    key = ("tools_json", Identity(tools))
    memo = ctx.memo
    cached = memo.get(key)
    if cached is None:
        cached = memo[key] = _encode_tools(tools, ctx)
    return cached


def _encode_tools(tools: Any, ctx: Context) -> tuple[Any, str, bool]:
    as_list = tools if type(tools) is list else list(tools)
    text = None
    if orjson is not None:
        try:
            text = orjson.dumps(as_list).decode()
        except TypeError:
            pass
    # No marker field's key in the text: no tool is marked, without looking at each tool.
    marked = (text is None or any(key in text for key in _MARKER_KEYS_JSON)) and any(_marked(t) for t in tools)
    if text is not None and not marked:
        return tools, text, True
    if marked:
        return tools, "[" + ",".join(_unmarked_tool_json(tool, ctx.tool_json) for tool in tools) + "]", False
    # One encoder call for the list, not one per tool and a join; the same bytes as tool by
    # tool, compact JSON having no space after a comma.
    return tools, compact_json(as_list), False


def remember_tools(tools: Any, text: str | None, names: tuple[str, ...], ctx: Context) -> None:
    """What a rule already knows of ``tools`` (unmarked, exact), for this request's head record:
    their JSON (``None``: not known) and their names."""
    if text is not None:
        ctx.memo[("tools_json", Identity(tools))] = (tools, text, True)
    ctx.memo[("tool names", Identity(tools))] = names


def _tool_names(tools: Any, ctx: Context | None) -> tuple[str, ...]:
    if not tools:
        return ()
    if ctx is not None:
        cached = ctx.memo.get(("tool names", Identity(tools)))
        if cached is not None:
            return cached
    return tuple(tool_name(t) for t in tools)


_MARKER_KEYS_JSON = tuple(f'"{name}":' for name in sorted(MARKER_FIELDS))


def _marked(tool: Any) -> bool:
    return (type(tool) is dict or isinstance(tool, Mapping)) and not MARKER_FIELDS.isdisjoint(tool)


def _unmarked_tool_json(tool: Any, encode) -> str:
    """A tool's JSON without its marker fields."""
    if _marked(tool):
        return compact_json({k: v for k, v in tool.items() if k not in MARKER_FIELDS})
    return encode(tool)


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def head_sections(view: View) -> list[tuple[str, str]]:
    """The head as (name, text) parts whose texts joined by a blank line give ``head_text``."""
    out: list[tuple[str, str]] = []
    for index, segment in enumerate(view.head):
        # Names do not depend on how many segments follow, so appending one renames nothing.
        sections = parse_head(segment)
        if sections:
            out.extend(((f"{index}:{name}" if index else name), text) for name, text in sections)
        else:
            out.append((f"system[{index}]" if index else "system", segment))
    return out


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


def head_record(view: View, ctx: Context | None = None) -> tuple[HeadRecord, dict[str, str]]:
    """The record of this head, and the texts (by hash) it refers to."""
    parts = head_sections(view)
    tools = tools_json(view, ctx)
    # Each section hashed once while its text is known (``text_digest``): an unchanged 500 KB
    # head costs one comparison per section, not a SHA-256 over every byte.
    hashes = [h for segment in view.head for h in section_digests(segment)]
    tools_hash = text_digest(tools)
    record = HeadRecord(
        # A hash over the parts' hashes: identifies the exact bytes without hashing the whole head again.
        fingerprint=fingerprint("\x00".join(f"{name}:{h}" for (name, _), h in zip(parts, hashes)) + "\x00" + tools_hash),
        sections=tuple((name, h, len(text)) for (name, text), h in zip(parts, hashes)),
        tools=tools_hash,
        tool_names=_tool_names(view.tools, ctx),
    )
    texts = {h: text for (_, text), h in zip(parts, hashes)}
    texts[record.tools] = tools
    return record, texts


def extends(new: HeadRecord, old: HeadRecord) -> bool:
    """True when ``new`` only appends system parts to ``old`` (same tools): no cache loss."""
    if new.tools != old.tools or len(new.sections) <= len(old.sections):
        return False
    return new.sections[: len(old.sections)] == old.sections


def _label(part: str) -> str:
    """``system`` (or ``system[i]``) for unsectioned system text, else ``section:NAME``."""
    return part if part.startswith("system") else f"section:{part}"


def what_changed(old: HeadRecord, new: HeadRecord) -> list[str]:
    """``section:NAME`` for each part that differs (added, changed, removed), then ``tools``."""
    before = {name: h for name, h, _ in old.sections}
    after = {name: h for name, h, _ in new.sections}
    names = [n for n, h, _ in new.sections if before.get(n) != h] + [n for n, _, _ in old.sections if n not in after]
    changed = [_label(n) for n in names]
    if old.tools != new.tools:
        changed.append("tools")
    return changed


def _offset(old: HeadRecord, new: HeadRecord, new_texts: dict[str, str], ctx: Context) -> tuple[int, str, list[str]]:
    """(first differing character, where, texts still needed for an exact offset)."""
    position = 0
    for i, (name, h, length) in enumerate(new.sections):
        if i >= len(old.sections):
            return position, _label(name), []
        old_name, old_h, old_length = old.sections[i]
        if old_h != h or old_name != name:
            old_text = ctx.texts.get(old_h)
            if old_text is None:
                return position, _label(name), [old_h]
            return position + first_difference(old_text, new_texts[h]), _label(name), []
        position += length + len(JOIN)
    system_length = max(0, position - len(JOIN))
    if len(old.sections) > len(new.sections):
        return system_length, _label(old.sections[len(new.sections)][0]), []
    old_tools = ctx.texts.get(old.tools)
    if old_tools is None:
        return system_length + 1, "tools", [old.tools]
    return system_length + 1 + first_difference(old_tools, new_texts[new.tools]), "tools", []


def record_head(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    """Record the head sent; report a change that is not an append (never for pings)."""
    record, texts = head_record(view, ctx)
    old = journal.head
    if ctx.ping and old is not None:  # a warm-up ping never moves the recorded head (the first one records it)
        return view, journal, [Event("head", HeadSeen(record.fingerprint))]
    # Unchanged: the journal is not rewritten (an unchanged journal costs no save; its TTL is
    # refreshed when it is read).
    journal = journal if old == record else journal.replace(head=record)
    known = {h for _, h, _ in old.sections} | {old.tools} if old else set()
    events = [Event("head", HeadSeen(record.fingerprint)),
              Event("texts", TextsToKeep({h: t for h, t in texts.items() if h not in known}))]
    if old is None or old.fingerprint == record.fingerprint or extends(record, old):
        return view, journal, events
    offset, where, needed = _offset(old, record, texts, ctx)
    if needed and not ctx.texts_fetched:
        return view, journal, events + [Event("need_texts", TextsNeeded(needed))]
    size = sum(length for _, _, length in record.sections) + len(texts[record.tools])
    tools = None
    if old.tools != record.tools:
        before, after = set(old.tool_names), set(record.tool_names)
        tools = {"added": sorted(after - before), "removed": sorted(before - after)}
    drift = Drift(
        changed=what_changed(old, record),
        first_diff_char=offset,
        first_diff_token_est=offset // CHARS_PER_TOKEN,
        first_diff_in=where,
        exact=not needed,
        reprefill_tokens_est=estimate_tokens(max(0, size + body_chars(view.body) - offset)),
        before=old.fingerprint,
        after=record.fingerprint,
        tools=tools,
    )
    return view, journal, events + [Event("drift", drift)]
