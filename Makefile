# The two commands a newcomer needs: `make demo` and `make test`. Both install what
# they need: Python tools into .venv at the repository root, the Debian packages of the
# local cluster's real node (root), the Kubernetes control plane and its tools (built from
# pinned Go modules) and the container images into a cache outside the repo
# (MGJ_CACHE_DIR, default ~/.cache/multigpu-operator).

SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
VENV_STAMP := $(VENV)/.installed
CLUSTER := $(BIN)/python tests/cluster/localcluster.py
CACHE_DIR := $(or $(MGJ_CACHE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/multigpu-operator)
# torch and its nvidia libraries (several GB) are downloaded once, here, for the venv and
# for the trainer image's build (tests/cluster/images.py installs from this directory).
WHEELHOUSE := $(CACHE_DIR)/images/wheelhouse
TORCH := torch>=2.14,<2.15

.PHONY: help demo test venv host-packages tools images lint typecheck unit integration cluster-tools \
	cluster-up cluster-down clean prepare-test prepare-cluster docs
# What a cold `make test` or `make demo` prepares runs side by side: the Go builds use
# the CPU, the venv and the image builds mostly the network and the disk (docs/development.md).
PARALLEL := $(MAKE) --jobs=3 --output-sync=target --no-print-directory

help:
	@echo "make demo          local cluster + the operator in it; a DDP job trains on real pods"
	@echo "                   (MONITORING=1: and a Prometheus reading the chart's monitors and alerts)"
	@echo "make test          install everything, then lint, type checks, unit and integration tests"
	@echo "make images        build the trainer, frameworks and operator images (buildah); push them and the chart to the local registry"
	@echo "make cluster-up    start (or reuse) the local cluster; make cluster-down stops it and the tests' one"
	@echo "make docs          rewrite the docs' tables generated from the API's models, and docs/benchmarks.md"
	@echo "make gpu-check     on a GPU machine: versions, every technique, DDP/DataParallel/MFU/NCCL figures"

# images/trainer is the training package that tests/training runs; torch from PyPI is
# the CUDA build, a few GB. pip takes the same version from the wheelhouse when it is
# there (files it finds are preferred to the index's copy of the same release).
$(VENV_STAMP): pyproject.toml images/trainer/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip download --quiet --only-binary=:all: --dest $(WHEELHOUSE) '$(TORCH)'
	$(BIN)/pip install --quiet --find-links $(WHEELHOUSE) -e '.[dev]'
	$(BIN)/pip install --quiet --find-links $(WHEELHOUSE) -e images/trainer
	touch $@

venv: $(VENV_STAMP)

host-packages:
	bash tests/cluster/host-packages.sh

tools: host-packages
	bash tests/cluster/build-tools.sh >/dev/null

# The cluster's tools; Kueue, promtool and Prometheus are built by the few tests that use them,
# in the background while the others run (tests/conftest.py).
cluster-tools: host-packages
	bash tests/cluster/build-tools.sh --core >/dev/null

images: venv host-packages
	$(BIN)/python tests/cluster/images.py build

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/hadolint images/*/Dockerfile

typecheck: venv
	$(BIN)/mypy

# The chart's unit tests run helm and promtool, the kustomization's kubectl: built here on
# a fresh machine (minutes), not while a test waits for them under its timeout.
unit: venv
	bash tests/cluster/build-tools.sh --only k8s helm promtool >/dev/null
	$(BIN)/pytest tests/unit

# The docs' generated blocks (tests/support/doc_tables.py) and docs/benchmarks.md from
# docs/bench-results/ (tests/bench/results_page.py); unit tests check both.
docs: venv
	PYTHONPATH=operator:tests $(BIN)/python -m support.doc_tables
	$(BIN)/python tests/bench/results_page.py

integration: venv cluster-tools images
	$(BIN)/pytest tests/integration

prepare-test: venv cluster-tools images lint typecheck

# Two workers: one runs every cluster test in order, the other the unit and training
# tests beside it (tests/conftest.py); the cluster tests mostly wait, the others compute.
test:
	$(PARALLEL) prepare-test
	$(BIN)/pytest -n 2 tests

cluster-up: venv cluster-tools images
	$(CLUSTER) up

cluster-down: venv cluster-tools
	$(CLUSTER) down --all

prepare-cluster: venv cluster-tools images

demo:
	$(PARALLEL) prepare-cluster
	$(BIN)/python tests/cluster/demo.py $(if $(MONITORING),--monitoring)

# Not part of `make test`: it needs NVIDIA GPUs (without one it says so and exits 2).
# No venv and no download: the first of GPU_CHECK_PYTHON, .venv's python, python3 that
# imports torch runs the package from the source tree (any python >= 3.10, offline).
# GPU_CHECK_ARGS passes options, e.g. GPU_CHECK_ARGS="--report gpu-check.json".
.PHONY: gpu-check
gpu-check:
	@for py in $(GPU_CHECK_PYTHON) $(BIN)/python python3; do \
	  if command -v $$py >/dev/null && $$py -c 'import torch' 2>/dev/null; then \
	    echo "gpu-check: $$py with torch from $$($$py -c 'import torch; print(torch.__version__)')"; \
	    PYTHONPATH=images/trainer$${PYTHONPATH:+:$$PYTHONPATH} exec $$py -m multigpu_train.gpu_check $(GPU_CHECK_ARGS); \
	  fi; \
	done; \
	echo "gpu-check: no python with torch found (set GPU_CHECK_PYTHON, or make venv)" >&2; exit 2

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
