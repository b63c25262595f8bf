"""The contributing page's layer chart is generated from pyproject's import contracts at build time
(docs/hooks/generated.py): it names every layer of every contract, and the page asks for it."""
from __future__ import annotations

import tomllib

from tools import docs_pages


def test_the_chart_names_every_layer_of_every_contract():
    config = tomllib.loads(docs_pages.PYPROJECT.read_text())["tool"]["importlinter"]
    chart = docs_pages.layer_chart()
    contracts = config["contracts"]
    assert contracts
    for contract in contracts:
        assert contract["name"] in chart
        for layer in contract.get("layers", []):
            for module in layer.replace(":", "|").strip("()").split("|"):
                assert module.strip().strip("()") in chart, module


def test_the_contributing_page_holds_the_chart_marker():
    assert docs_pages.LAYER_CHART in (docs_pages.ROOT / "docs" / "contributing.md").read_text()


def test_other_contract_kinds_are_charted_too(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('''
[tool.importlinter]
root_packages = ["pkg", "harness"]

[[tool.importlinter.contracts]]
name = "wings"
type = "independence"
modules = ["pkg.a", "pkg.b"]

[[tool.importlinter.contracts]]
name = "support code one way"
type = "forbidden"
source_modules = ["pkg"]
forbidden_modules = ["harness"]

[[tool.importlinter.contracts]]
name = "stack"
type = "layers"
layers = ["top", "(optional) : other", "bottom"]
ignore_imports = ["bottom -> top"]
''')
    chart = docs_pages.layer_chart(pyproject)
    assert "`pkg.a`, `pkg.b` never import each other" in chart
    assert "`pkg` never import `harness`" in chart
    assert "top\n    ↓\n(optional) : other\n    ↓\nbottom" in chart
    assert "`bottom -> top`" in chart
