from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Isolate every test from the developer's own settings and from the network.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
for _name in list(os.environ):
    if _name == "LITELLM_PREFIX" or _name.startswith("LITELLM_PREFIX_"):
        del os.environ[_name]
os.environ["LITELLM_PREFIX_CONFIG"] = str(Path(__file__).parent / "no-such-global-settings.json")

sys.path.insert(0, str(Path(__file__).parent))

from litellm_prefix.context import Context, Target  # noqa: E402
from litellm_prefix.settings import Settings  # noqa: E402


@pytest.fixture
def settings_factory():
    def make(**kwargs) -> Settings:
        kwargs.setdefault("path_check", "absolute")
        return Settings(**kwargs)

    return make


@pytest.fixture
def ctx(settings_factory):
    def make(target: Target | None = None, path_exists=None, **kwargs) -> Context:
        extra = {"path_exists": path_exists} if path_exists else {}
        return Context(settings=settings_factory(**kwargs), target=target or Target(), **extra)

    return make


@pytest.fixture
def anyio_backend():
    return "asyncio"
