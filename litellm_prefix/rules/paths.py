"""Install paths: an absolute install root that ends in the package suffix becomes ``stablePath``.

Agents print their own install directory into the prompt (pi: ``<root>/docs``, the
README path, example paths). A reinstall, an ``nvm`` switch or a second machine moves
that root, and every byte after its first mention has to be prefilled again. This
rule rewrites the root, also inside longer paths such as ``<root>/docs/x.md``, to one
stable path, in the head (system text and tool definitions) and in mid-conversation
system messages (reminders and section patches carry head text too).

A candidate starts at the beginning of the text, after whitespace, or after one of
``"'`(<[``, and is absolute (starts with ``/`` and has at least one directory before
the suffix). Relative mentions, a bare ``/<suffix>`` and URLs are never candidates. With ``pathCheck: exists`` (the gateway shares a disk with
the agent) a candidate is rewritten only when the root exists on disk; with
``absolute`` (a remote gateway) every absolute candidate is. Rewriting the stable path
again gives the stable path: the rule is idempotent.
"""
from __future__ import annotations

from typing import Any

from ..context import Context, Event
from ..drift import tools_json
from ..sections import JOIN, SectionedText, memo, memo_of
from ..view import View, is_system_message

_BOUNDARY_CHARS = frozenset("\"'`(<[")
# Characters that cannot be part of a path mention: they end it on both sides.
_NOT_PATH = frozenset(" \t\n\r\f\v\"'`()<>[]{}|")
_CLOSERS = frozenset("/\"'`)>]}|") | frozenset(" \t\n\r\f\v")
_SENTENCE_END = frozenset(".,;:!?")


def _ends_root(text: str, end: int) -> bool:
    """Whether the suffix that ends at ``end`` ends the root: "/", a delimiter, whitespace,
    the end of the text, or sentence punctuation followed by one of those."""
    if end == len(text) or text[end] in _CLOSERS:
        return True
    if text[end] in _SENTENCE_END:
        return end + 1 == len(text) or text[end + 1] in _CLOSERS
    return False


def find_roots(text: str, suffix: str, hits: list[int] | None = None) -> list[tuple[int, int]]:
    """(start, end) of every install-root candidate in ``text``.

    Found by searching for ``/<suffix>`` and scanning back to where the path mention
    starts; the mention must start with ``/``, at the start of the text or after
    whitespace or one of ``"'`(<[``, and hold at least one directory before the suffix.
    """
    needle = "/" + suffix
    found: list[tuple[int, int]] = []
    at = text.find(needle)
    while at != -1:
        if hits is not None:
            hits.append(at)
        end = at + len(needle)
        if _ends_root(text, end):
            start = at
            while start > 0 and text[start - 1] not in _NOT_PATH:
                start -= 1
            boundary_ok = start == 0 or text[start - 1].isspace() or text[start - 1] in _BOUNDARY_CHARS
            if text[start] == "/" and start < at and boundary_ok:
                found.append((start, end))
        at = text.find(needle, end)
    return found


def rewrite_text(text: str, ctx: Context, found: dict[str, int]) -> str:
    """``text`` with every qualifying install root replaced by the stable path."""
    suffix = ctx.settings.package_path_suffix
    if suffix not in text:
        return text
    stable = ctx.settings.resolved_stable_path
    check = ctx.settings.path_check == "exists"
    spans: list[tuple[int, int]] = []
    roots: dict[str, int] = {}
    hits: list[int] = []
    for start, end in find_roots(text, suffix, hits):
        root = text[start:end]
        if root == stable or (check and not ctx.path_exists(root)):
            continue
        spans.append((start, end))
        roots[root] = roots.get(root, 0) + 1
    if not spans:
        return text
    for root, count in roots.items():
        found[root] = found.get(root, 0) + count
    distinct = list(roots)
    nested = any(a != b and a in b for a in distinct for b in distinct)
    if len(spans) == len(hits) and not nested:
        # Every mention of the suffix is a qualifying root (any other occurrence of a root
        # string would have been a mention too): str.replace copies a long head once.
        for root in roots:
            text = text.replace(root, stable)
        return text
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces.append(text[last:start])
        pieces.append(stable)
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def rewrite_head_text(segment: Any, ctx: Context, found: dict[str, int]) -> Any:
    """``rewrite_text`` of a head segment (a string or a ``SectionedText``), section by section:
    only the sections that mention the suffix are searched and copied (which sections do is
    remembered per section text). A sectioned result is handed on unjoined (``SectionedText``).

    Same bytes as ``rewrite_text`` on the whole segment: a root mention holds no newline, so
    it never crosses a section boundary, and a section's start and end are boundaries to it
    just as the newlines around it are in the whole text."""
    suffix = ctx.settings.package_path_suffix
    if "\n" in suffix and isinstance(segment, SectionedText):
        segment = segment.text
    known = memo_of(segment)
    sections = known.sections(segment) if "\n" not in suffix else None
    # Candidate roots, section by section (each section's, and the segment's, remembered while known).
    roots = known.get(("head roots", suffix), lambda seg: _head_roots(seg, sections, suffix), segment)
    if not roots:
        return segment
    # The result depends on the text, the settings and, with pathCheck exists, on which roots
    # exist: remembered under all three, so a head seen before costs no copy at all.
    check = ctx.settings.path_check == "exists"
    exists = tuple(ctx.path_exists(r) for r in roots) if check else ()
    if check and not any(exists):  # no root qualifies (a gateway on another disk): nothing to rewrite
        return segment
    stable = ctx.settings.resolved_stable_path
    key = ("rewritten", suffix, stable, check, exists)
    new_segment, counts = known.get(key, lambda seg: _rewrite_head_text(seg, sections, ctx), segment)
    for root, count in counts:
        found[root] = found.get(root, 0) + count
    return new_segment


def _head_roots(segment: Any, sections, suffix: str) -> tuple[str, ...]:
    parts = [block for _, block in sections] if sections else [segment]
    return tuple(sorted({root for part in parts for root in memo(part, ("roots", suffix), lambda t: _roots(t, suffix))}))


def _roots(text: str, suffix: str) -> tuple[str, ...]:
    return tuple({text[start:end]: None for start, end in find_roots(text, suffix)})


def _rewrite_head_text(segment: Any, sections, ctx: Context) -> tuple[Any, tuple[tuple[str, int], ...]]:
    found: dict[str, int] = {}
    suffix = ctx.settings.package_path_suffix
    if sections is None:
        return rewrite_text(segment, ctx, found), tuple(found.items())
    blocks = tuple((name, rewrite_text(block, ctx, found)) if memo(block, ("roots", suffix), lambda t: _roots(t, suffix))
                   else (name, block) for name, block in sections)
    if all(new is old for (_, new), (_, old) in zip(blocks, sections)):
        return segment, tuple(found.items())
    if any(c in ctx.settings.resolved_stable_path for c in "<>\n"):  # could touch section tags: parse again
        return JOIN.join(block for _, block in blocks), tuple(found.items())
    return SectionedText(blocks), tuple(found.items())


def _rewrite_value(value: Any, ctx: Context, found: dict[str, int]) -> Any:
    if isinstance(value, str):
        new_text = rewrite_text(value, ctx, found)
        return value if new_text == value else new_text
    if isinstance(value, dict):
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


def _may_mention(tools: tuple[Any, ...], ctx: Context) -> bool:
    """Cheap pre-check before walking every tool: its JSON (memoised for the fingerprint), one substring search."""
    suffix = ctx.settings.package_path_suffix
    if any(c in suffix for c in '"\\') or not suffix.isprintable():
        return True  # JSON would escape the suffix: walk to be sure
    if any(c in suffix for c in ",[]{}"):  # could span two tools in the list's JSON
        return any(suffix in ctx.tool_json(tool) for tool in tools)
    return suffix in tools_json(View("chat", (), tools, ()), ctx)


def stabilize_install_paths(view: View, ctx: Context) -> tuple[View, list[Event]]:
    found: dict[str, int] = {}
    segments = tuple(rewrite_head_text(segment, ctx, found) for segment in view.segments)
    tools = view.tools
    if tools and _may_mention(tools, ctx):
        new_tools = tuple(_rewrite_value(tool, ctx, found) for tool in tools)
        if any(a is not b for a, b in zip(tools, new_tools)):
            tools = new_tools
    body = view.body
    changed = {index: new for index in view.system_roles
               if (new := _rewrite_system_message(body[index], ctx, found)) is not body[index]}
    if changed:
        body = tuple(changed.get(index, item) for index, item in enumerate(body))
    if not found:
        return view, []
    events = [Event("install_path", {"root": root, "count": count}) for root, count in sorted(found.items())]
    if all(new is old for new, old in zip(segments, view.segments)):
        return view.replace(tools=tools, body=body), events
    return view.replace(segments=segments, tools=tools, body=body), events


def _rewrite_system_message(item: Any, ctx: Context, found: dict[str, int]) -> Any:
    """Mid-conversation system messages (reminders, section patches) are head text too."""
    if not is_system_message(item):
        return item
    content = item.get("content")
    new = _rewrite_value(content, ctx, found)
    return item if new is content else {**item, "content": new}
