# The two commands a newcomer needs: `make demo` and `make test`. Both install what
# they need: Python tools into .venv at the repository root, the Kubernetes control
# plane and its tools (built from pinned Go modules) into a cache outside the repo
# (MGJ_CACHE_DIR, default ~/.cache/multigpu-operator).

SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
VENV_STAMP := $(VENV)/.installed
CLUSTER := $(BIN)/python tests/cluster/localcluster.py

.PHONY: help demo test venv tools lint typecheck unit integration cluster-up cluster-down clean

help:
	@echo "make demo          local GPU cluster + the operator; every example job reaches Running"
	@echo "make test          install everything, then lint, type checks, unit and integration tests"
	@echo "make cluster-up    start (or reuse) the local cluster; make cluster-down stops it and the tests' one"

# images/trainer is the training package that tests/training runs; torch from PyPI is
# the CUDA build, a few GB.
$(VENV_STAMP): pyproject.toml images/trainer/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet -e images/trainer
	touch $@

venv: $(VENV_STAMP)

tools:
	bash tests/cluster/build-tools.sh >/dev/null

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/hadolint images/*/Dockerfile

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest tests/unit

integration: venv tools
	$(BIN)/pytest tests/integration

test: venv tools lint typecheck
	$(BIN)/pytest tests

cluster-up: venv tools
	$(CLUSTER) up

cluster-down: venv tools
	$(CLUSTER) down --all

demo: venv tools
	$(BIN)/python tests/cluster/demo.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
