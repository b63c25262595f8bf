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

PI_SECTIONS = frozenset({"preamble", "tools", "rules", "docs", "addendum", "project_context", "skills", "cwd"})
JOIN = "\n\n"
_SECTION = re.compile(r"(?ms)^<(?P<name>[A-Za-z][A-Za-z0-9_.-]*)>\n.*?\n</(?P=name)>$")
_REMOVED = re.compile(r'Removed system prompt section "(?P<name>[^"\n]+)"\.')
_UPDATED = re.compile(r'Updated system prompt section "(?P<name>[^"\n]+)":\n\n')


def parse_head(text: str) -> list[tuple[str, str]] | None:
    """``[(name, block)]`` with ``JOIN.join(blocks) == text``, or ``None`` when the text is not sectioned."""
    found = list(_SECTION.finditer(text))
    if not found:
        return None
    out: list[tuple[str, str]] = []
    position = 0
    for i, match in enumerate(found):
        gap = text[position : match.start()]
        if i == 0:
            if gap:
                if not gap.endswith(JOIN) or len(gap) == len(JOIN):
                    return None
                out.append(("preamble", gap[: -len(JOIN)]))
        elif gap != JOIN:
            return None
        out.append((match.group("name"), match.group(0)))
        position = match.end()
    if position != len(text):
        return None
    names = [name for name, _ in out]
    if len(set(names)) != len(names):
        return None
    return out


def render_head(sections: list[tuple[str, str]]) -> str:
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
