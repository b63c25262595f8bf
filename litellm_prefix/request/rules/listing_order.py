"""Listing order: a list whose order the agent does not keep is sent in the session's first order.

Gemini CLI 0.61 finds its skills with ``glob`` (``loadSkillsFromDir``), whose results come in
the order the file system answers: two processes of one session may list the same skills in
another order, in the system prompt's ``<available_skills>`` block, in the ``activate_skill``
tool's description ("(Available: 'a', 'b')") and in its ``enum``. The model is told the same
thing either way; the prefix cache sees a new head from the first moved entry on (the whole
conversation prefilled again on a resume; seen in one of three test runs).

A profile declares such a list (``listings``): where it stands (a region regex with a group
``list``, and the regex of one entry in it with a group ``key``, searched in every head text
and tool description), whether a tool's ``enum`` of exactly its keys is the same list, and
the order to send: ``sort`` (by key, on every request: every session of the kind sends the
same bytes, so sessions share the head on a replica whatever order each found its list in;
Gemini CLI's profile) or ``first``. With ``first``, the first order the session sent, taken
from the first place it is found (the head first, then the tool descriptions, then the
enums), is recorded in the journal (``listings``: the list's name and a hash of each key, in
order). On a later request, every place whose keys are exactly the recorded ones in another
order is written back in the recorded order, entry by entry (the text between entries stays
where it is). A place whose keys differ (a skill added or removed: a genuine change) passes
as sent, and where the first place found differs, its order is recorded as the session's
from then on (with ``sort`` such a place is sorted by its own keys where the first place
holds the same ones). A place with a key twice is left alone.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ..context import Context
from ..events import Event
from ..journal import Journal, content_hash
from ..sections import memo
from ..view import View, tool_description, with_tool_description

_KEY = 12  # hex characters of a key's hash in the journal


@lru_cache(maxsize=64)
def _compiled(region: str, entry: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    return re.compile(region), re.compile(entry)


def _hash(key: str) -> str:
    return content_hash(key)[:_KEY]


def _runs(text: str, places) -> list[tuple[list[tuple[int, int]], list[str]]]:
    """Each place's entries in ``text``: (spans, keys), one per region found; remembered with a
    long text (a head repeats request after request: a lookup instead of a regex pass)."""
    if len(text) >= 1024:
        return memo(text, ("listing-runs", places), lambda t: _find_runs(t, places))
    return _find_runs(text, places)


def _find_runs(text: str, places) -> list[tuple[list[tuple[int, int]], list[str]]]:
    found = []
    for region, entry in places:
        region_re, entry_re = _compiled(region, entry)
        for outer in region_re.finditer(text):
            start, end = outer.span("list")
            matches = list(entry_re.finditer(text, start, end))
            if len(matches) > 1:
                found.append(([m.span() for m in matches], [m.group("key") for m in matches]))
    return found


def _reorder_text(text: str, places, order: list[str]) -> str:
    """``text`` with each place whose keys are ``order``'s (hashes) in another order written in that order."""
    pieces, at = [], 0
    for spans, keys in sorted(_runs(text, places), key=lambda run: run[0][0]):
        hashes = [_hash(k) for k in keys]
        if hashes == order or sorted(hashes) != sorted(order) or len(set(hashes)) != len(hashes) or spans[0][0] < at:
            continue
        entries = {h: text[s:e] for h, (s, e) in zip(hashes, spans)}
        for (s, e), h in zip(spans, order):
            pieces.append(text[at:s])
            pieces.append(entries[h])
            at = e
    if not pieces:
        return text
    pieces.append(text[at:])
    return "".join(pieces)


def _is_enum(name: str, item: Any) -> bool:
    """A schema's ``enum`` of two or more strings."""
    return name == "enum" and isinstance(item, list) and len(item) > 1 and all(isinstance(v, str) for v in item)


def _enums(value: Any) -> list[list[str]]:
    """Every ``enum`` of two or more strings inside ``value`` (a tool), depth first."""
    found: list[list[str]] = []
    if isinstance(value, Mapping):
        for name, item in value.items():
            if _is_enum(name, item):
                found.append(item)
            else:
                found.extend(_enums(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_enums(item))
    return found


def _reorder_enums(value: Any, order: list[str]) -> Any:
    """``value`` (a tool) with each ``enum`` whose strings are ``order``'s keys in another order reordered."""
    if isinstance(value, Mapping):
        out, changed = {}, False
        for name, item in value.items():
            if _is_enum(name, item):
                hashes = [_hash(v) for v in item]
                if hashes != order and sorted(hashes) == sorted(order) and len(set(hashes)) == len(hashes):
                    by = dict(zip(hashes, item))
                    item, changed = [by[h] for h in order], True
            else:
                new = _reorder_enums(item, order)
                changed = changed or new is not item
                item = new
            out[name] = item
        return out if changed else value
    if isinstance(value, list):
        items = [_reorder_enums(item, order) for item in value]
        return items if any(a is not b for a, b in zip(items, value)) else value
    return value


def _first_keys(view: View, listing) -> list[str] | None:
    """The keys of the first place the request lists them, in its order: head, tool descriptions, enums."""
    places = listing.places
    for text in (*(t for t in view.head if isinstance(t, str)), *(tool_description(t) for t in view.tools or ())):
        runs = _runs(text, places) if isinstance(text, str) and text else []
        if runs:
            return min(runs, key=lambda run: run[0][0])[1]
    if listing.enums:
        for tool in view.tools or ():
            for enum in _enums(tool):
                return enum
    return None


def keep_listing_order(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    listings = ctx.settings.listings
    if not listings or (not view.head and not view.tools):
        return view, journal, []
    events: list[Event] = []
    recorded = dict(journal.listings)
    for listing in listings:
        keys = _first_keys(view, listing)
        if keys is None:
            continue
        first = [_hash(k) for k in keys]
        if listing.order == "sort":
            order = [_hash(k) for k in sorted(keys)]
        else:
            order = list(recorded.get(listing.name, ()))
            if not order or sorted(order) != sorted(first):
                recorded[listing.name] = tuple(first)  # the session's first order, or a genuine change: as sent
                continue
        if len(set(order)) != len(order):
            continue
        head = tuple(_reorder_text(t, listing.places, order) if isinstance(t, str) else t for t in view.head)
        tools = view.tools
        if tools:
            new_tools = []
            for tool in tools:
                description = tool_description(tool)
                new = tool
                if isinstance(description, str) and description:
                    text = _reorder_text(description, listing.places, order)
                    if text != description:
                        new = with_tool_description(new, text)
                if listing.enums:
                    new = _reorder_enums(new, order)
                new_tools.append(new)
            if any(a is not b for a, b in zip(new_tools, tools)):
                tools = tuple(new_tools)
        head_moved = sum(a != b for a, b in zip(head, view.head))
        moved = head_moved + sum(a is not b for a, b in zip(tools or (), view.tools or ()))
        if moved:
            changes: dict[str, Any] = {"head": head} if head_moved else {}
            if tools is not view.tools:
                changes["tools"] = tools
            view = view.replace(**changes)
            events.append(Event("listing_order", {"listing": listing.name, "places": moved}))
    new = tuple(sorted(recorded.items()))
    if new != journal.listings:
        journal = journal.replace(listings=new)
    return view, journal, events
