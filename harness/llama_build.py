"""Where the opt-in source build of llama.cpp's ``llama-server`` lives, and which release it is.

``tools/build_llama_server.py`` builds the binary there; ``harness/llama_server.py`` runs it
where the ``xllamacpp`` wheel is missing, and ``harness/make_tiny_model.py`` keeps the tiny
model beside it. Cached outside the clone, keyed by version:
``~/.cache/litellm-prefix/llama-server-<version>/llama-server`` (``LITELLM_PREFIX_CACHE`` moves
the cache).
"""
from __future__ import annotations

import os
from pathlib import Path

VERSION = "0.3.36"  # the llama-cpp-python sdist whose vendor/llama.cpp is built


def cache_dir() -> Path:
    base = os.environ.get("LITELLM_PREFIX_CACHE") or os.path.join(Path.home(), ".cache", "litellm-prefix")
    return Path(base) / f"llama-server-{VERSION}"


def binary_path() -> Path:
    return cache_dir() / "llama-server"
