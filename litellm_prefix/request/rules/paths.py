"""Install paths: an absolute install root that ends in a package suffix becomes ``stablePath``,
only where ``stablePath`` is known to resolve to that root on the agent's machine; else, in a
session, the session's first root, only where that holds the same npm package on this disk.

Agents print their own install directory into the prompt (pi: ``<root>/README.md``,
``<root>/docs``, ``<root>/examples``), and tell the model to read there. A reinstall, an
``nvm`` switch or a second machine moves that root, and every byte after its first
mention has to be prefilled again. This rule rewrites the root, also inside longer paths
such as ``<root>/docs/x.md``, to one stable path, in the head (system text and tool
definitions) and in mid-conversation system messages (reminders and section patches carry
head text too).

The rule (DESIGN invariant 8): the model is never shown a path that does not resolve, on
the agent's machine, to the same files as the original. A cache miss is cheaper than a
read that fails. So a root is rewritten only where that is known, by ``pathCheck``:

- ``exists`` (default; the gateway shares the agent's disk): a root is rewritten only if it
  exists and ``stablePath`` resolves (every symlink followed) to the same directory, because
  the operator's link points there or because ``createSymlink`` just made it point there.
  Then ``stablePath/<tail>`` resolves to ``<root>/<tail>`` for every tail. Two sessions with
  two roots at once: only the one the link points at is rewritten, the other passes
  through. With no link (the default install) nothing is rewritten.
- ``absolute`` (a remote gateway, which cannot look): nothing is rewritten.
- ``trusted``: the operator declares that ``stablePath`` resolves to the agent's install
  root on every agent's machine (each has the link): every absolute candidate is rewritten
  unchecked.

**The session's root** (``pathCheck: exists`` only; ``keep_install_root``, the rule in a
session). pi resumed from a reinstall at another path (a second ``npm i -g`` prefix, an
``nvm`` switch with the old one kept) names root B where the session has shown root A: the
whole conversation after the docs block would be prefilled again. The session's journal
records, per suffix, the first root its head named (as the client sent it, ``roots``). A
later root B of the head that ``stablePath`` does not take is shown as A only if A still
exists and both hold a ``package.json`` with the same npm ``name`` and ``version``: npm never
publishes a name and version twice, so ``A/<tail>`` holds the bytes ``B/<tail>`` holds for
every tail the package ships. Otherwise B passes through and becomes the session's root (a
reinstall of another version, or the old install removed: the next resume keeps B). A head
that still names A keeps A. The same rewrite as above (head, tool definitions,
mid-conversation system messages); a ``stablePath`` that resolves to B or to A wins. The
package files are read on this disk through the context (``package_identity``, remembered
for a second), and the decision is recorded in the journal, so a resume, a restart and
another replica sharing the disk decide the same. ``absolute`` cannot look, so it pins
nothing; ``trusted`` already shows every root as ``stablePath``. Limit: a file edited by
hand inside an install (a local patch) is no longer the published one; such an install should
not share a name and version with another.

The suffixes are ``packagePathSuffix`` (one, or a list) plus those of the detected agent's
profile (pi: both ``@mariozechner`` and ``@earendil-works`` package names), merged by
``profiles.apply``. The facts about the disk come in through the context (``path_exists``,
``resolve_path``, ``package_identity``); the link itself is made by the shell (``core`` asks
``link_target`` which root, ``sinks`` makes it), before the rule runs.

A candidate starts at the beginning of the text, after whitespace, or after one of
``"'`(<[``, and is absolute (starts with ``/`` and has at least one directory before
the suffix). Relative mentions, a bare ``/<suffix>`` and URLs are never candidates.
Rewriting the stable path again gives the stable path: the rule is idempotent.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ..context import Context
from ..drift import tools_json
from ..events import Event
from ..journal import Journal
from ..sections import JOIN, SectionedText, memo, memo_of
from ..view import View, is_system_message

_BOUNDARY_CHARS = frozenset("\"'`(<[")
# Characters that cannot be part of a path mention: they end it on both sides.
_NOT_PATH = frozenset(" \t\n\r\f\v\"'`()<>[]{}|")
_CLOSERS = frozenset("/\"'`)>]}|") | frozenset(" \t\n\r\f\v")
_SENTENCE_END = frozenset(".,;:!?")
_NO_PINS: Mapping[str, str] = MappingProxyType({})


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


def rewritable(root: str, ctx: Context) -> bool:
    """Whether ``root`` may be shown as ``stablePath`` (see the module docstring)."""
    mode = ctx.settings.path_check
    if mode == "trusted":
        return True
    if mode != "exists" or not ctx.path_exists(root):
        return False
    real = ctx.resolve_path(root)
    return real is not None and real == ctx.resolve_path(ctx.settings.resolved_stable_path)


def same_package(first: str, root: str, ctx: Context) -> bool:
    """Whether the session's first root may be shown for ``root`` (``pathCheck: exists`` only):
    both hold a ``package.json`` with the same npm ``name`` and ``version`` (npm never publishes
    a name and version twice: the same files), read on this disk through the context."""
    if ctx.settings.path_check != "exists" or not ctx.path_exists(first):
        return False
    identity = ctx.package_identity(first)
    return identity is not None and identity == ctx.package_identity(root)


def target_of(root: str, suffix: str, ctx: Context, pins: Mapping[str, str]) -> str | None:
    """What ``root`` is shown as: ``stablePath`` where that resolves to it (first), else the
    session's pinned root of ``suffix`` where that holds the same package (itself shown as
    ``stablePath`` where that resolves to it, so a second pass changes nothing), else ``None``
    (as sent)."""
    stable = ctx.settings.resolved_stable_path
    if root == stable:
        return None
    if rewritable(root, ctx):
        return stable
    pin = pins.get(suffix)
    if pin is None or pin == root or pin == stable or not same_package(pin, root, ctx):
        return None
    return stable if rewritable(pin, ctx) else pin


def rewrite_text(text: str, ctx: Context, found: dict[str, int], pins: Mapping[str, str] = _NO_PINS) -> str:
    """``text`` with every qualifying install root (of every suffix) replaced by what it is shown
    as (``target_of``)."""
    for suffix in ctx.settings.package_path_suffixes:
        text = _rewrite_text(text, suffix, lambda root, s=suffix: target_of(root, s, ctx, pins), found)
    return text


def _rewrite_text(text: str, suffix: str, target: Callable[[str], str | None], found: dict[str, int]) -> str:
    if suffix not in text:
        return text
    spans: list[tuple[int, int, str]] = []
    roots: dict[str, int] = {}
    shown: dict[str, str] = {}
    hits: list[int] = []
    for start, end in find_roots(text, suffix, hits):
        root = text[start:end]
        new = shown[root] if root in shown else shown.setdefault(root, target(root))
        if new is None:
            continue
        spans.append((start, end, new))
        roots[root] = roots.get(root, 0) + 1
    if not spans:
        return text
    for root, count in roots.items():
        found[root] = found.get(root, 0) + count
    distinct = list(roots) + [shown[root] for root in roots]
    nested = any(a != b and a in b for a in distinct for b in distinct)
    if len(spans) == len(hits) and not nested:
        # Every mention of the suffix is a qualifying root (any other occurrence of a root
        # string would have been a mention too), and no root is part of another or of what
        # one is shown as: str.replace copies a long head once.
        for root in roots:
            text = text.replace(root, shown[root])
        return text
    pieces: list[str] = []
    last = 0
    for start, end, new in spans:
        pieces.append(text[last:start])
        pieces.append(new)
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def rewrite_head_text(segment: Any, ctx: Context, found: dict[str, int], pins: Mapping[str, str] = _NO_PINS) -> Any:
    """``rewrite_text`` of a head segment (a string or a ``SectionedText``), suffix by suffix and
    section by section: only the sections that mention the suffix are searched and copied (which
    sections do is remembered per section text). A sectioned result is handed on unjoined
    (``SectionedText``).

    Same bytes as ``rewrite_text`` on the whole segment: a root mention holds no newline, so
    it never crosses a section boundary, and a section's start and end are boundaries to it
    just as the newlines around it are in the whole text."""
    for suffix in ctx.settings.package_path_suffixes:
        segment = _rewrite_head_suffix(segment, suffix, ctx, found, pins)
    return segment


def _segment_roots(segment: Any, suffix: str):
    """(segment, its memo, its sections or None, its candidate roots) for one suffix."""
    if "\n" in suffix and isinstance(segment, SectionedText):
        segment = segment.text
    known = memo_of(segment)
    sections = known.sections(segment) if "\n" not in suffix else None
    # Candidate roots, section by section (each section's, and the segment's, remembered while known).
    roots = known.get(("head roots", suffix), lambda seg: _head_roots(seg, sections, suffix), segment)
    return segment, known, sections, roots


def _rewrite_head_suffix(segment: Any, suffix: str, ctx: Context, found: dict[str, int],
                         pins: Mapping[str, str]) -> Any:
    original = segment
    segment, known, sections, roots = _segment_roots(segment, suffix)
    if not roots:
        return original
    # The result depends on the text and on what each root is shown as (the settings, the disk
    # with pathCheck exists, the session's root): remembered under both, so a head seen before
    # costs no copy.
    decisions = tuple(target_of(r, suffix, ctx, pins) for r in roots)
    if not any(decisions):  # no root qualifies (no link to it, a gateway on another disk)
        return original
    shown = dict(zip(roots, decisions))
    key = ("rewritten", suffix, decisions)
    new_segment, counts = known.get(key, lambda seg: _rewrite_head_text(seg, sections, suffix, shown), segment)
    for root, count in counts:
        found[root] = found.get(root, 0) + count
    return new_segment


def _head_roots(segment: Any, sections, suffix: str) -> tuple[str, ...]:
    parts = [block for _, block in sections] if sections else [segment]
    return tuple(sorted({root for part in parts for root in memo(part, ("roots", suffix), lambda t: _roots(t, suffix))}))


def _roots(text: str, suffix: str) -> tuple[str, ...]:
    return tuple({text[start:end]: None for start, end in find_roots(text, suffix)})


def _rewrite_head_text(segment: Any, sections, suffix: str,
                       shown: dict[str, str | None]) -> tuple[Any, tuple[tuple[str, int], ...]]:
    found: dict[str, int] = {}
    if sections is None:
        return _rewrite_text(segment, suffix, shown.get, found), tuple(found.items())
    blocks = tuple((name, _rewrite_text(block, suffix, shown.get, found))
                   if memo(block, ("roots", suffix), lambda t: _roots(t, suffix)) else (name, block)
                   for name, block in sections)
    if all(new is old for (_, new), (_, old) in zip(blocks, sections)):
        return segment, tuple(found.items())
    if any(c in new for new in shown.values() if new for c in "<>\n"):  # could touch section tags: parse again
        return JOIN.join(block for _, block in blocks), tuple(found.items())
    return SectionedText(blocks), tuple(found.items())


def link_target(view: View, ctx: Context) -> str | None:
    """The install root ``createSymlink`` should point ``stablePath`` at before this request's
    rule runs, or ``None``: only with ``pathCheck: exists``, only where nothing usable is at
    ``stablePath`` (no link, or one whose install is gone: a link to an existing directory and a
    real directory are kept, see ``symlink.py``), and only a root of the head that exists. Of
    several, the first in sorted order."""
    settings = ctx.settings
    if not settings.create_symlink or settings.path_check != "exists":
        return None
    if ctx.resolve_path(settings.resolved_stable_path) is not None:
        return None  # already resolves (to one of these roots or elsewhere): never moved
    stable = settings.resolved_stable_path
    roots = sorted({root for suffix in settings.package_path_suffixes for segment in view.segments
                    for root in _segment_roots(segment, suffix)[3]})
    return next((root for root in roots if root != stable and ctx.path_exists(root)
                 and ctx.resolve_path(root) is not None), None)


def _rewrite_value(value: Any, ctx: Context, found: dict[str, int], pins: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        new_text = rewrite_text(value, ctx, found, pins)
        return value if new_text == value else new_text
    if isinstance(value, dict):
        changed = {}
        for key, item in value.items():
            new = _rewrite_value(item, ctx, found, pins)
            if new is not item:
                changed[key] = new
        return {**value, **changed} if changed else value
    if isinstance(value, list):
        new_items = [_rewrite_value(item, ctx, found, pins) for item in value]
        return new_items if any(a is not b for a, b in zip(value, new_items)) else value
    return value


def _may_mention(tools: tuple[Any, ...], ctx: Context) -> bool:
    return any(_may_mention_suffix(tools, suffix, ctx) for suffix in ctx.settings.package_path_suffixes)


def _may_mention_suffix(tools: tuple[Any, ...], suffix: str, ctx: Context) -> bool:
    """Cheap pre-check before walking every tool: its JSON (memoised for the fingerprint), one substring search."""
    if any(c in suffix for c in '"\\') or not suffix.isprintable():
        return True  # JSON would escape the suffix: walk to be sure
    if any(c in suffix for c in ",[]{}"):  # could span two tools in the list's JSON
        return any(suffix in ctx.tool_json(tool) for tool in tools)
    return suffix in tools_json(View("chat", (), tools, ()), ctx)


def stabilize_install_paths(view: View, ctx: Context, pins: Mapping[str, str] = _NO_PINS) -> tuple[View, list[Event]]:
    """The rule without the session (a retry of a request already rewritten): roots ``stablePath``
    resolves to. ``pins``: the session's root per suffix (``keep_install_root``)."""
    mode = ctx.settings.path_check
    if mode == "absolute" or (mode == "exists" and not pins
                              and ctx.resolve_path(ctx.settings.resolved_stable_path) is None):
        return view, []  # nothing can be rewritten truthfully (the default install: no link)
    found: dict[str, int] = {}
    segments = tuple(rewrite_head_text(segment, ctx, found, pins) for segment in view.segments)
    tools = view.tools
    if tools and _may_mention(tools, ctx):
        new_tools = tuple(_rewrite_value(tool, ctx, found, pins) for tool in tools)
        if any(a is not b for a, b in zip(tools, new_tools)):
            tools = new_tools
    body = view.body
    changed = {index: new for index in view.system_roles
               if (new := _rewrite_system_message(body[index], ctx, found, pins)) is not body[index]}
    if changed:
        body = tuple(changed.get(index, item) for index, item in enumerate(body))
    if not found:
        return view, []
    events = [Event("install_path", {"root": root, "count": count}) for root, count in sorted(found.items())]
    if all(new is old for new, old in zip(segments, view.segments)):
        return view.replace(tools=tools, body=body), events
    return view.replace(segments=segments, tools=tools, body=body), events


def _rewrite_system_message(item: Any, ctx: Context, found: dict[str, int], pins: Mapping[str, str]) -> Any:
    """Mid-conversation system messages (reminders, section patches) are head text too."""
    if not is_system_message(item):
        return item
    content = item.get("content")
    new = _rewrite_value(content, ctx, found, pins)
    return item if new is content else {**item, "content": new}


def head_roots(view: View, suffix: str) -> tuple[str, ...]:
    """The install-root candidates of ``suffix`` in the head's text, sorted."""
    return tuple(sorted({root for segment in view.segments for root in _segment_roots(segment, suffix)[3]}))


def session_roots(view: View, journal: Journal, ctx: Context) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """(the pins this request rewrites with, the journal's roots after it), per suffix.

    A suffix the journal has no root for records the head's first root (as the client sent it).
    A recorded root stays while the head shows it (itself, or ``stablePath`` resolving to it), or
    while a root of the head that ``stablePath`` does not take holds the same package
    (``same_package``); otherwise the first such root that holds a package becomes the session's
    root (a reinstall of another version, or the old install removed). A head that names no
    root of the suffix changes nothing. Only facts of the disk and the head decide, so a second
    pass over the rewritten request keeps the same roots."""
    recorded = dict(journal.roots)
    pins: dict[str, str] = {}
    stable = ctx.settings.resolved_stable_path
    for suffix in ctx.settings.package_path_suffixes:
        roots = head_roots(view, suffix)
        first = recorded.get(suffix)
        sent = [root for root in roots if root != stable]
        if first is None and sent:
            first = recorded[suffix] = sent[0]
        elif first is not None and sent and first not in roots and not (
                rewritable(first, ctx) and _mentions(view, stable)):  # (shown as stablePath: still shown)
            shown = [root for root in sent if not rewritable(root, ctx)]
            if not any(same_package(first, root, ctx) for root in shown):
                installed = (root for root in shown if ctx.package_identity(root) is not None)
                first = recorded[suffix] = next(installed, first)
        if first is not None:
            pins[suffix] = first
    return pins, tuple(sorted(recorded.items()))


def _mentions(view: View, path: str) -> bool:
    """Whether the head's text holds ``path`` (the stable path a root was shown as)."""
    return any(path in (segment.text if isinstance(segment, SectionedText) else segment)
               for segment in view.segments if isinstance(segment, (str, SectionedText)))


def keep_install_root(view: View, journal: Journal, ctx: Context) -> tuple[View, Journal, list[Event]]:
    """The rule in a session: ``stabilize_install_paths`` with the session's first root kept (see
    the module docstring), recorded in the journal (``roots``) so that a resume, a restart and
    another replica decide the same. Only with ``pathCheck: exists``: ``absolute`` cannot look
    at the disk (no pin), ``trusted`` shows every root as ``stablePath`` already."""
    if ctx.settings.path_check != "exists":
        new_view, events = stabilize_install_paths(view, ctx)
        return new_view, journal, events
    pins, roots = session_roots(view, journal, ctx)
    if roots != journal.roots:
        journal = journal.replace(roots=roots)
    new_view, events = stabilize_install_paths(view, ctx, pins)
    return new_view, journal, events
