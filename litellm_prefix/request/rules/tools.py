"""Tool order: the agent's own order where it is stable, the session's first-seen order where it moves.

Agents list tools in registration or discovery order. Some keep it the same on every
request (Codex: built-ins in registration order, MCP tools sorted by name); others move it
with extension load order, MCP server start-up races and plugin updates. The model does not
care; the prefix cache does, and it cares across streams too: a subagent whose tool list
starts like its main agent's shares that prefix, and re-sorting an order the agent already
keeps stable costs exactly that (Codex's subagent shared 544 instead of 864 prefix tokens
with its main agent once its own order was sorted). ``toolOrder`` says what to do:

- ``auto`` (default): ``tools[]`` keeps the agent's own order. A session whose tools came in
  the same order on every request so far is never touched. When a request brings tools
  whose names the session has seen in another order, they go upstream in the order the
  session last sent (``journal.head.tool_names``, recorded for every head sent): known
  tools in that order, tools new to the session after them in the order they came.

  Pinned, not sorted: the first time an order moves, the session's cache holds the
  first-seen order, so sorting then would itself move the prefix (once more than the
  agent did), and it would take away the order shared with the agent's other streams.
  Sorting buys only sharing between sessions whose first orders differ, which a moving
  order gives up anyway. The order lives in the journal, so a resume or another replica
  pins the same one. A list with two tools of one name is left as sent (a name cannot
  place it). A profile may set ``tool_order`` (``keep`` for an agent whose order is its
  own and deterministic: never reordered; ``sort``), applied where the setting is ``auto``.
- ``sort``: ``tools[]`` sorted by name on every request (OpenAI ``function.name``,
  Anthropic and Responses ``name``; unnamed built-ins by ``type``), ties broken by the
  tool's canonical JSON so the order is total and deterministic: the same bytes for every
  session of any agent, whatever order it sends.
- ``keep``: nothing is reordered.

A ``cache_control`` mark on the last tool (Anthropic's breakpoint after the tool block)
moves to the new last tool, whichever way the list was reordered. Under ``auto`` and
``sort``, inside a ``<tools>`` section of the system text (pi's head), each contiguous run
of ``- name: ...`` lines (with their indented continuation lines) is sorted by name; every
other line stays where it is.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ...caches import compact_json
from ..context import Context
from ..drift import remember_tools, tools_entry
from ..events import Event
from ..journal import Journal
from ..sections import SectionedText, memo, sections_of, segment_memo
from ..view import View, tool_name

_OPEN = "<tools>\n"
_CLOSE = "\n</tools>"
_ENTRY = re.compile(r"- (?P<name>[^:\n]*)")


def _canonical(tool: Any) -> str:
    return json.dumps(tool, sort_keys=True, ensure_ascii=False, default=str)


def sort_tools(tools: tuple[Any, ...]) -> tuple[Any, ...]:
    names = [tool_name(t) for t in tools]
    if len(set(names)) == len(names):
        if all(a <= b for a, b in zip(names, names[1:])):
            return tools
        ordered = [tool for _, tool in sorted(zip(names, tools), key=lambda pair: pair[0])]
    else:  # duplicate names: the canonical JSON breaks the tie, so the order is still total
        ordered = sorted(tools, key=lambda t: (tool_name(t), _canonical(t)))
    return _reordered(tools, ordered)


def _reordered(tools: tuple[Any, ...], ordered: list[Any]) -> tuple[Any, ...]:
    """``ordered`` (the same tools in another order), the last tool's ``cache_control`` mark moved with the end."""
    if all(a is b for a, b in zip(tools, ordered)):
        return tools
    last = tools[-1]
    mark = last.get("cache_control") if isinstance(last, Mapping) else None
    others_marked = any((type(t) is dict or isinstance(t, Mapping)) and "cache_control" in t for t in tools[:-1])
    if mark is not None and not others_marked and ordered[-1] is not last:
        ordered = [({k: v for k, v in t.items() if k != "cache_control"} if t is last else t) for t in ordered]
        ordered[-1] = _marked_at(ordered[-1], mark, list(last).index("cache_control"))
    return tuple(ordered)


def _marked_at(tool: Mapping[str, Any], mark: Any, position: int) -> dict[str, Any]:
    """``tool`` with the ``cache_control`` mark at the key position it had on the client's last
    tool: the tool's JSON is sent in its own key order, so the bytes match those of the same tool
    marked by the client itself."""
    items = [(k, v) for k, v in tool.items() if k != "cache_control"]
    items.insert(min(position, len(items)), ("cache_control", mark))
    return dict(items)


def _sort_entry_runs(lines: list[str]) -> list[str]:
    """Sort each contiguous run of ``- name`` entries (continuation lines move with their entry)."""
    out: list[str] = []
    run: list[list[str]] = []

    def flush() -> None:
        run.sort(key=lambda entry: (_ENTRY.match(entry[0]).group("name").strip(), entry))
        for entry in run:
            out.extend(entry)
        run.clear()

    for line in lines:
        if line.startswith("- "):
            run.append([line])
        elif run and line[:1] in (" ", "\t") and line.strip():
            run[-1].append(line)
        else:
            flush()
            out.append(line)
    flush()
    return out


def sort_tools_section(text: str) -> str:
    """Sort the entries of the head's ``<tools>`` section (``<tools>`` and ``</tools>`` on lines of their own).

    Only the first such section: a head has one, and scanning a 500 KB head for a second
    would cost more than the whole rule.
    """
    region = _tools_region(text)
    if not isinstance(region, tuple):
        return text
    at, body_start, close = region
    body = text[body_start:close]
    sorted_body = "\n".join(_sort_entry_runs(body.split("\n")))
    if sorted_body == body:
        return text
    # One copy of the head (slicing and concatenating would copy it twice; at 500 KB that shows).
    return text.replace(text[at:close], text[at:body_start] + sorted_body, 1)


def _tools_region(text: str) -> tuple[int, int, int] | str:
    """(opener, body start, closer) of the first ``<tools>`` section, or why there is none:
    ``"none"`` (no ``<tools>`` line) or ``"open"`` (a ``<tools>`` line that nothing closes)."""
    at = text.find(_OPEN)
    while at != -1 and not (at == 0 or text[at - 1] == "\n"):
        at = text.find(_OPEN, at + 1)
    if at == -1:
        return "none"
    body_start = at + len(_OPEN)
    close = text.find(_CLOSE, body_start - 1)
    while close != -1 and not _closes_line(text, close + len(_CLOSE)):
        close = text.find(_CLOSE, close + 1)
    if close == -1:
        return "open"
    return at, body_start, close


def sort_tools_in_head(segment: Any) -> Any:
    """``sort_tools_section`` of a head segment (a string or a ``SectionedText``), section by
    section: the first section with a ``<tools>`` line is sorted on its own (remembered per
    section text); the others are not read. A sectioned result is handed on unjoined.

    Same bytes as on the whole segment: a section starts at a line start, so the first
    ``<tools>`` line of the segment is the first one of the first section that has one; when
    that section does not close it, the whole segment is sorted as before."""
    return segment_memo(segment, "sorted head tools", _sort_tools_in_head) or segment


def _sort_tools_in_head(segment: Any) -> Any:
    sections = sections_of(segment)
    if sections is None:
        return memo(segment, "sorted tools", _sorted_or_none)
    for index, (name, block) in enumerate(sections):
        region = memo(block, "tools region", _tools_region)
        if region == "none":
            continue
        if region == "open":
            text = segment if isinstance(segment, str) else segment.text
            return memo(text, "sorted tools", _sorted_or_none)
        new_block = memo(block, "sorted tools", _sorted_or_none)
        if new_block is None:
            return None
        return SectionedText((*sections[:index], (name, new_block), *sections[index + 1:]))
    return None


def _sorted_or_none(text: str) -> str | None:
    new = sort_tools_section(text)
    return None if new is text else new


def _closes_line(text: str, end: int) -> bool:
    return end == len(text) or text[end] == "\n"


def _sorted_tools(tools: tuple[Any, ...], ctx: Context) -> tuple[Any, ...]:
    """``sort_tools(tools)``, the order remembered with the tools' JSON text while it is known.

    Only for tools without marks whose text is exact (equal texts, equal values): the order
    is then a function of the text, and the sorted list's text and names come with it (the
    head record needs both: no second encoding, no name read per tool)."""
    _, text, exact = tools_entry(tools, ctx)
    if not exact:
        return sort_tools(tools)
    order, sorted_text, names = memo(text, "tool order", lambda _: _order_of(tools))
    new_tools = tools if order is None else tuple(tools[i] for i in order)
    remember_tools(new_tools, sorted_text, names, ctx)  # (in the given order: the text is known already)
    return new_tools


def _order_of(tools: tuple[Any, ...]) -> tuple[tuple[int, ...] | None, str | None, tuple[str, ...]]:
    ordered = sort_tools(tools)
    if ordered is tools:
        return None, None, tuple(tool_name(t) for t in tools)
    # Unmarked: the same objects, reordered; by id for this call only (``tools`` holds them all).
    position = {id(tool): i for i, tool in enumerate(tools)}
    return (tuple(position[id(tool)] for tool in ordered), compact_json(list(ordered)),
            tuple(tool_name(t) for t in ordered))


def pinned_order(tools: tuple[Any, ...], recorded: tuple[str, ...] | None) -> tuple[Any, ...]:
    """``tools`` in the ``recorded`` order of names: known tools in that order, new ones after
    them as they came. Left as sent without a recorded order or with a name twice in ``tools``."""
    if not tools or not recorded:
        return tools
    names = [tool_name(t) for t in tools]
    if tuple(names) == recorded or len(set(names)) != len(names):
        return tools
    rank = {name: i for i, name in enumerate(recorded)}
    known = sorted((pair for pair in zip(names, tools) if pair[0] in rank), key=lambda pair: rank[pair[0]])
    return _reordered(tools, [t for _, t in known] + [t for n, t in zip(names, tools) if n not in rank])


def keep_session_tool_order(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    """``toolOrder: auto``: ``tools[]`` in the order this stream last sent upstream (its recorded head)."""
    if ctx.settings.tool_order != "auto" or not view.tools or journal.head is None:
        return view, journal, []
    tools = pinned_order(view.tools, journal.head.tool_names)
    if tools is view.tools:
        return view, journal, []
    return view.replace(tools=tools), journal, [
        Event("tool_order", {"where": "tools[]", "count": len(tools), "order": "session"})]


def normalize_tool_order(view: View, ctx: Context) -> tuple[View, list[Event]]:
    """``sort``: ``tools[]`` and the head's ``<tools>`` entries sorted; ``auto``: the entries only
    (``tools[]`` is the session's, ``keep_session_tool_order``); ``keep``: nothing."""
    mode = ctx.settings.tool_order
    if mode not in ("sort", "auto"):
        return view, []
    events: list[Event] = []
    segments = tuple(sort_tools_in_head(segment) for segment in view.segments)
    if any(new is not old for new, old in zip(segments, view.segments)):
        events.append(Event("tool_order", {"where": "tools section"}))
    else:
        segments = None
    tools = view.tools
    if tools and mode == "sort":
        new_tools = _sorted_tools(tools, ctx)
        if new_tools is not tools:
            events.append(Event("tool_order", {"where": "tools[]", "count": len(tools)}))
            tools = new_tools
    if not events:
        return view, []
    if segments is None:
        return view.replace(tools=tools), events
    return view.replace(segments=segments, tools=tools), events
