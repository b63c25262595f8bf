# Two set-up commands: `make run` starts the gateway, `make test` tests it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: run test bench check llama-server clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $@

run: $(BIN)/.installed
	$(BIN)/python tools/run_gateway.py

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

# llama.cpp's server, built once per machine into ~/.cache/litellm-prefix (7-9 minutes on 2 cores).
llama-server: $(BIN)/.installed
	$(BIN)/python tools/build_llama_server.py

bench: $(BIN)/.installed llama-server
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/session_cost.py
	$(BIN)/python bench/cache_real.py
	$(BIN)/python bench/load.py

check: $(BIN)/.installed
	$(BIN)/litellm-prefix check

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
