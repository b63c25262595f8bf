"""The package's layering: no import cycle (lazy, function-level imports included), and the
import contracts of pyproject's ``[tool.importlinter]`` (``lint-imports``): offline tools on
top, then the LiteLLM glue, the transform, its outputs, measurement, the rules and the data
they read; no module imports from a layer above its own, and every module is in a layer. The
support code one way: tools/, bench/ and examples/ above harness/, harness/ above the package,
no cycle among them.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import io
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tests.support import ROOT

PACKAGE = ROOT / "litellm_prefix"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


@functools.cache  # the sources do not change during a run; test_a_cycle_is_found edits a copy
def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (``from . import x`` names the submodule x only)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
            graph[name].update(subs)
            if target in modules and len(subs) < len(node.names):
                graph[name].add(target)
        graph[name].discard(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert "litellm_prefix.measure.render" in graph["litellm_prefix.measure.prefix"]
    assert cycles(graph) == []


def test_a_cycle_is_found():
    """The check can fail: a lazy import back from the renderer to the transform is a cycle."""
    graph = {k: set(v) for k, v in import_graph().items()}
    graph["litellm_prefix.measure.render"].add("litellm_prefix.request.core")
    assert any("litellm_prefix.request.core" in c and "litellm_prefix.measure.render" in c for c in cycles(graph))


@dataclass
class Linted:
    """What ``lint-imports`` says: its exit status and its report (colours taken out)."""

    returncode: int
    stdout: str


def _lint(config: Path) -> Linted:
    """``lint-imports --no-cache --verbose --config CONFIG``, in this process: import-linter reads the
    sources (grimp parses them; nothing is imported), so no child process is needed."""
    from importlinter import configuration
    from importlinter.application import use_cases

    configuration.configure()  # what its command line does first
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        passed = use_cases.lint_imports(config_filename=str(config), cache_dir=None, verbose=True)
    return Linted(0 if passed else 1, re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()))


@functools.cache
def _lint_pyproject() -> Linted:
    """The repository's own contracts, linted once for the tests that read the report."""
    return _lint(ROOT / "pyproject.toml")


def test_the_layering_contracts_hold():
    """pyproject's [tool.importlinter] layers: no module imports from a layer above its own."""
    done = _lint_pyproject()
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    """The check can fail: settings placed above context (which imports it) is an upward import."""
    config = tmp_path / "contracts.toml"
    config.write_text('[tool.importlinter]\nroot_package = "litellm_prefix"\n\n'
                      '[[tool.importlinter.contracts]]\nname = "upside down"\ntype = "layers"\n'
                      'containers = ["litellm_prefix"]\nlayers = ["settings", "request.context"]\n')
    done = _lint(config)
    assert done.returncode != 0 and "BROKEN" in done.stdout
    assert "litellm_prefix.request.context -> litellm_prefix.settings" in done.stdout


def _contracts(config: Path = PACKAGE.parent / "pyproject.toml") -> list[dict]:
    return tomllib.loads(config.read_text())["tool"]["importlinter"]["contracts"]


def _layered(contract: dict) -> set[str]:
    """The modules a layers contract names (``a | b``, ``a : b``, ``(optional)``), made absolute."""
    containers = contract.get("containers") or [""]
    names = set()
    for layer in contract["layers"]:
        for name in layer.replace(":", "|").split("|"):
            name = name.strip().strip("()").strip()
            names.update(f"{c}.{name}" if c else name for c in containers)
    return names


def uncovered(modules: dict[str, Path], named: set[str]) -> list[str]:
    """The modules no layer names: a module is covered where it or a package above it is named;
    a package not named itself, where each of its children is covered and its ``__init__``
    imports nothing (its children carry the code the contract must see)."""
    def named_above(module: str) -> bool:
        parts = module.split(".")
        return any(".".join(parts[:i]) in named for i in range(len(parts), 0, -1))

    out = []
    for module, path in sorted(modules.items()):
        if named_above(module):
            continue
        if path.name == "__init__.py":
            children = [m for m in modules if m.startswith(module + ".")]
            imports = any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(ast.parse(path.read_text())))
            if children and not imports and all(named_above(m) for m in children):
                continue
        out.append(module)
    return out


def test_every_module_of_the_package_is_in_a_layer():
    """A module the layers contract does not name is checked by nothing: a new module must be put
    in a layer (or in a folder that is one)."""
    (layers,) = [c for c in _contracts() if c.get("id") == "layers"]
    modules = {name: path for name, path in _modules().items() if name != "litellm_prefix"}
    assert uncovered(modules, _layered(layers)) == []


def test_a_module_left_out_of_the_layers_is_found():
    """The check can fail: without ``request.appended`` (in no contract before issue 39) it is
    named, and so is its folder (a folder is covered by its children only where all of them are)."""
    (layers,) = [c for c in _contracts() if c.get("id") == "layers"]
    named = _layered(layers) - {"litellm_prefix.request.appended"}
    modules = {name: path for name, path in _modules().items() if name != "litellm_prefix"}
    assert uncovered(modules, named) == ["litellm_prefix.request", "litellm_prefix.request.appended"]
    named = _layered(layers) - {"litellm_prefix.request.rules"}
    assert "litellm_prefix.request.rules.notes" in uncovered(modules, named)  # a folder named covers its modules


def test_every_contract_is_checked():
    """``lint-imports`` reads them all: the package's layers and the support code's."""
    done = _lint_pyproject()
    ids = {c.get("id") for c in _contracts()}
    assert {"layers", "support", "support-acyclic"} <= ids
    for contract in _contracts():
        assert re.search(re.escape(contract["name"]) + r"\W+KEPT", done.stdout), contract["name"]


def test_support_code_importing_upwards_breaks_the_contract(tmp_path):
    """The check can fail: the package above the harness (which imports it) is an upward import."""
    config = tmp_path / "contracts.toml"
    config.write_text('[tool.importlinter]\nroot_packages = ["litellm_prefix", "harness"]\n\n'
                      '[[tool.importlinter.contracts]]\nname = "upside down"\ntype = "layers"\n'
                      'layers = ["litellm_prefix", "harness"]\n')
    done = _lint(config)
    assert done.returncode != 0 and "harness is not allowed to import litellm_prefix" in done.stdout


def test_support_code_loads_no_module_by_name():
    """An import by name (``importlib.import_module(f"bench.{name}")``) is one ``lint-imports``
    cannot see: the harness and the package never load tools/, bench/ or harness/ code that way."""
    found = []
    for folder in ("harness", "litellm_prefix"):
        for path in (PACKAGE.parent / folder).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"""import_module\(\s*f?["'](bench|tools)\b""", line) or (
                        folder == "litellm_prefix" and re.search(r"""import_module\(\s*f?["']harness\b""", line)):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{n}")
    assert found == []


def test_tests_and_benchmarks_find_each_other_without_path_edits():
    """The harness, the benchmarks and tools/ are imported from the repository root (pytest's
    ``pythonpath``, ``python -m bench.NAME``), never by editing ``sys.path``."""
    root = PACKAGE.parent
    edits = []
    for folder in ("tests", "bench", "tools", "harness", "examples", "litellm_prefix"):
        for path in (root / folder).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"sys\.path\s*(\.insert|\.append|\[|\+?=)|syspath" "_prepend", line):
                    edits.append(f"{path.relative_to(root)}:{n}")
    assert edits == []


