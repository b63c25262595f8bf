from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# Isolate every test from the developer's own settings and from the network.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
for _name in list(os.environ):
    if _name == "LITELLM_PREFIX" or _name.startswith("LITELLM_PREFIX_"):
        del os.environ[_name]
os.environ["LITELLM_PREFIX_CONFIG"] = str(Path(__file__).parent / "no-such-global-settings.json")


from litellm_prefix.request.context import Context
from litellm_prefix.request.target import Target
from litellm_prefix.settings import Settings

# A suite is a folder: tests/unit (in this process only: tests/unit/conftest.py checks it),
# tests/integration (real servers, proxies, processes) and tests/agents (the real agent CLIs).
# The second LiteLLM release (make test's e2e line) runs `-m litellm`: what depends on the
# release. The release checks in tests/unit are marked by hand; everything under these folders,
# which goes through a LiteLLM proxy or the SDK, is marked here.
LITELLM_FOLDERS = tuple(Path(__file__).resolve().parent / name for name in ("integration/litellm", "agents"))

# Property tests take their max_examples from tests.support.examples(n): n in the profile "full"
# (make test: `--hypothesis-profile=full`), a twentieth of it (at least 5) in "quick", the default:
# the unit suite is an inner loop of seconds, and every property still runs at its full size in
# make test.
hypothesis_settings.register_profile("full", max_examples=100)  # Hypothesis' own default: examples(n) == n
hypothesis_settings.register_profile("quick", max_examples=5)
hypothesis_settings.load_profile("quick")  # --hypothesis-profile (Hypothesis' pytest plugin) overrides it

# The session's servers and proxies (started once per session, by the first test that asks):
# tests/integration and tests/agents share them, so they are registered here, above both.
pytest_plugins = ["tests.integration.servers"]


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(folder in Path(item.path).parents for folder in LITELLM_FOLDERS):
            item.add_marker(pytest.mark.litellm)


@pytest.fixture
def settings_factory():
    def make(**kwargs) -> Settings:
        kwargs.setdefault("path_check", "trusted")  # install roots rewritten without a disk
        return Settings(**kwargs)

    return make


@pytest.fixture
def ctx(settings_factory):
    def make(target: Target | None = None, path_exists=None, resolve_path=None, **kwargs) -> Context:
        extra = {"path_exists": path_exists} if path_exists else {}
        if resolve_path:
            extra["resolve_path"] = resolve_path
        return Context(settings=settings_factory(**kwargs), target=target or Target(), **extra)

    return make


@pytest.fixture
def home(tmp_path, monkeypatch):
    """The gateway's HOME, empty: no ``~/.pi/pi-home`` (the default stablePath) resolves."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(autouse=True)
def journals_decode_to_what_was_saved(monkeypatch):
    """core remembers a saved journal under the text it saved, in place of decoding that text on
    the session's next request: every test checks that the text decodes to that very journal, and
    that orjson wrote the stdlib's bytes (a replica of an older version reads and compares them)."""
    import json

    from litellm_prefix.request import core
    from litellm_prefix.request.journal import Journal

    remember = core._remember_decoded

    def checked(encoded: str, journal: Journal) -> None:
        assert Journal.from_json(json.loads(encoded)) == journal, "a journal does not survive its own encoding"
        assert Journal.decoded(encoded) == journal
        assert encoded == json.dumps(journal.to_json(), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        remember(encoded, journal)

    monkeypatch.setattr(core, "_remember_decoded", checked)
