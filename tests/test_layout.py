"""The package's layering: no import cycle (lazy, function-level imports included), and the
import contracts of pyproject's ``[tool.importlinter]`` (``lint-imports``): offline tools on
top, then the LiteLLM glue, the transform, its outputs, measurement, the rules and the data
they read; no module imports from a layer above its own.
"""
from __future__ import annotations

import pytest

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "litellm_prefix"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


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


LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--verbose", "--config", str(config)], capture_output=True, text=True,
                          cwd=PACKAGE.parent, timeout=120)


def test_the_layering_contracts_hold():
    """pyproject's [tool.importlinter] layers: no module imports from a layer above its own."""
    done = _lint(PACKAGE.parent / "pyproject.toml")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
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


@pytest.mark.servers  # a child process: end-to-end (tests/conftest.py)
def test_importing_the_load_benchmark_leaves_the_environment_as_it_was():
    """Tests import benchmarks (``harness.procs.load_bench``): bench/load.py hands its proxies an
    environment of their own (``proxy_environment``) instead of editing this process's."""
    env = {**os.environ, "LITELLM_PREFIX_STORE": "redis://127.0.0.1:1", "LITELLM_PREFIX": "1", "PYTHONPATH": "."}
    env.pop("LITELLM_PREFIX_CONFIG", None)
    script = ("import json, os; before = dict(os.environ); import bench.load as load; "
              "print(json.dumps([dict(os.environ) == before, load.proxy_environment(os.environ)]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=PACKAGE.parent,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    unchanged, proxies = json.loads(done.stdout.splitlines()[-1])
    assert unchanged
    assert "LITELLM_PREFIX_STORE" not in proxies and "LITELLM_PREFIX" not in proxies
    assert proxies["LITELLM_PREFIX_CONFIG"].endswith("no-such-global-settings.json")
    assert proxies["PYTHONPATH"].split(os.pathsep)[-1] == "." and proxies["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
