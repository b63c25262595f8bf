"""pi's sectioned head (pi >= 0.86) and its section-patch wire format. Pure functions.

A head is an ordered set of sections: untagged ``preamble``, then ``tools, rules, docs,
addendum, project_context, skills, cwd``, then extension sections, each wrapped
``<name>\\n...\\n</name>`` and joined with ``\\n\\n``. Later changes arrive as system
messages whose parts are ``Removed system prompt section "NAME".`` or
``Updated system prompt section "NAME":\\n\\n<NAME>\\n...\\n</NAME>``, joined with ``\\n\\n``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

PI_SECTIONS = frozenset({"preamble", "tools", "rules", "docs", "addendum", "project_context", "skills", "cwd"})
JOIN = "\n\n"
_OPEN = re.compile(r"<([A-Za-z][A-Za-z0-9_.-]*)>\n")
_REMOVED = re.compile(r'Removed system prompt section "(?P<name>[^"\n]+)"\.')
_UPDATED = re.compile(r'Updated system prompt section "(?P<name>[^"\n]+)":\n\n')


@lru_cache(maxsize=16)
def parse_head(text: str) -> tuple[tuple[str, str], ...] | None:
    """``((name, block), ...)`` with ``JOIN.join(blocks) == text``, or ``None`` when the text is not sectioned.

    Scanned with ``str.find`` (a regex over a 500 KB head is too slow for every request);
    cached, since several rules ask about the same head string in one request.
    """
    start = 0 if _OPEN.match(text, 0) else -1
    if start == -1:
        at = text.find("\n\n<")
        while at != -1 and not _OPEN.match(text, at + 2):
            at = text.find("\n\n<", at + 2)
        if at == -1:
            return None
        start = at + 2
    out: list[tuple[str, str]] = [("preamble", text[: start - 2])] if start else []
    position = start
    while True:
        opener = _OPEN.match(text, position)
        if opener is None:
            return None
        name = opener.group(1)
        closer = f"\n</{name}>"
        end = text.find(closer, opener.end() - 1)
        while end != -1 and not _ends_section(text, end + len(closer)):
            end = text.find(closer, end + 1)
        if end == -1:
            return None
        end += len(closer)
        out.append((name, text[position:end]))
        if end == len(text):
            break
        position = end + len(JOIN)
    names = [name for name, _ in out]
    if len(set(names)) != len(names):
        return None
    return tuple(out)


def _ends_section(text: str, end: int) -> bool:
    return end == len(text) or text.startswith(JOIN, end)


def render_head(sections) -> str:
    return JOIN.join(block for _, block in sections)


@dataclass(frozen=True)
class PatchEntry:
    action: str  # "removed" | "updated"
    name: str
    block: str = ""  # for "updated": the whole "<name>\n...\n</name>"

    def render(self) -> str:
        if self.action == "removed":
            return f'Removed system prompt section "{self.name}".'
        return f'Updated system prompt section "{self.name}":{JOIN}{self.block}'


def parse_patch(text: str) -> list[PatchEntry] | None:
    """The entries of a section-patch message, or ``None`` when the text is not one."""
    entries: list[PatchEntry] = []
    position = 0
    while position < len(text):
        if entries:
            if not text.startswith(JOIN, position):
                return None
            position += len(JOIN)
        removed = _REMOVED.match(text, position)
        if removed:
            entries.append(PatchEntry("removed", removed.group("name")))
            position = removed.end()
            continue
        updated = _UPDATED.match(text, position)
        if not updated:
            return None
        name = updated.group("name")
        opener = f"<{name}>\n"
        body_start = updated.end()
        if not text.startswith(opener, body_start):
            return None
        closer = f"\n</{name}>"
        end = text.find(closer, body_start + len(opener) - 1)
        while end != -1 and not (end + len(closer) == len(text) or text.startswith(JOIN, end + len(closer))):
            end = text.find(closer, end + 1)
        if end == -1:
            return None
        entries.append(PatchEntry("updated", name, text[body_start : end + len(closer)]))
        position = end + len(closer)
    return entries or None


def render_patch(entries: list[PatchEntry]) -> str:
    return JOIN.join(entry.render() for entry in entries)
