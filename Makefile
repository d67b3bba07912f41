# Two commands do everything on a fresh machine:
#   make quickstart   -> creates .venv if missing, runs examples/quickstart.yaml
#   make test         -> creates .venv if missing, runs the test suite (.venv/bin/python -m pytest -q)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

# The package and its runtime dependencies; torch first, pinned to the CPU wheel,
# so that nothing below pulls a multi-GB CUDA build.
$(BIN)/preschool: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/preschool

# Test extras: lm-eval (our BLiMP decisions are checked against it), the HF Trainer baseline, and the
# readers our exports are checked with (datatrove, Megatron-core).
$(VENV)/.test-deps: $(BIN)/preschool
	$(BIN)/pip install -q -e '.[dev,lmeval,bench,datatrove,formats]'
	touch $(VENV)/.test-deps

.PHONY: setup quickstart test test-all
setup: $(BIN)/preschool

quickstart: setup
	$(BIN)/preschool run examples/quickstart.yaml

test: $(VENV)/.test-deps
	$(BIN)/python -m pytest -q

test-all: $(VENV)/.test-deps
	$(BIN)/python -m pytest -q -m ''
