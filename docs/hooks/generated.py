"""MkDocs hook: the docs' generated parts (``tools/docs_pages.py``).

- ``docs/contributing.md``'s ``<!-- layer-chart -->`` becomes the chart of pyproject's import
  contracts, at build time: it follows the contracts without a commit of its own.
- ``docs/settings.md``'s generated table must be what the code gives today (a stale page fails the
  build, as ``tests/unit/docs/test_settings_page.py`` does): ``python -m tools.docs_pages``.
- The charts the benchmarks write (``bench/results/*.png``) are served under ``results/``, so
  the pages show the current ones without a copy in ``docs/``.
"""
from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]


def _docs_pages():
    """``tools.docs_pages``, from the repository root (mkdocs runs from its own script directory)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tools import docs_pages

    return docs_pages


def on_files(files, config):
    for png in sorted((ROOT / "bench" / "results").glob("*.png")):
        files.append(File.generated(config, f"results/{png.name}", abs_src_path=str(png)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    docs_pages = _docs_pages()
    if page.file.src_uri == "settings.md" and docs_pages.with_settings_table(markdown) != markdown:
        raise PluginError("docs/settings.md is out of date with litellm_prefix/settings.py: "
                          "run `python -m tools.docs_pages`")
    if docs_pages.LAYER_CHART in markdown:
        markdown = markdown.replace(docs_pages.LAYER_CHART, docs_pages.layer_chart())
    return markdown
