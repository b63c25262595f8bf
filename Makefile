# Two set-up commands: `make run` starts the gateway, `make test` tests it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: run test bench check clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $@

run: $(BIN)/.installed
	$(BIN)/python tools/run_gateway.py

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

bench: $(BIN)/.installed
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/session_cost.py

check: $(BIN)/.installed
	$(BIN)/litellm-prefix check

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
