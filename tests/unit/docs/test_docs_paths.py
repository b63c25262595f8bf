"""The docs name files that exist: every repository path and ``python -m`` module that README.md
and docs/*.md mention is there, and the contributing page's layout names every module of the
package. A file moved or renamed without its docs fails here, not in a reader's hands."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
TOP = ("litellm_prefix", "tests", "bench", "harness", "tools", "config", "examples", "requirements", "docs")
# A path starts a word (not inside another path such as <root>/docs/x.md) at one of the top folders.
PATH = re.compile(r"(?<![\w./$~-])((?:" + "|".join(TOP) + r")/[\w./-]*)")
MODULE = re.compile(r"python -m ((?:bench|harness|tools|examples)(?:\.[a-z0-9_]+)+)(?!\w)")
WILDCARD = "*{<…"  # a pattern, not a path: bench/results/load-2-rounds-{off,log}-{1,2,3}.json


def _paths(text: str) -> set[str]:
    found = set()
    for match in PATH.finditer(text):
        if text[match.end():match.end() + 1] in WILDCARD and match.end() < len(text):
            continue
        found.add(match.group(1).rstrip(".,"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_named_exists(page):
    missing = sorted(p for p in _paths(page.read_text()) if not (ROOT / p).exists())
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_run_exists(page):
    missing = []
    for module in set(MODULE.findall(page.read_text())):
        base = ROOT / module.replace(".", "/")
        if not (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()):
            missing.append(module)
    assert not missing, f"{page.relative_to(ROOT)} runs modules that do not exist: {sorted(missing)}"


def test_the_layout_names_every_module_of_the_package():
    layout = (ROOT / "docs" / "contributing.md").read_text().split("## Layers")[0]
    package = ROOT / "litellm_prefix"
    unnamed = []
    for folder in [package, *(p for p in package.iterdir() if (p / "__init__.py").is_file())]:
        for item in folder.iterdir():
            if item.name.startswith(("_", ".")):
                continue
            if item.suffix == ".py" and not re.search(rf"\b{re.escape(item.name)}\b", layout):
                unnamed.append(str(item.relative_to(ROOT)))
            if (item / "__init__.py").is_file() and f"{item.name}/" not in layout:
                unnamed.append(f"{item.relative_to(ROOT)}/")
    assert not unnamed, f"docs/contributing.md's layout does not name: {unnamed}"
