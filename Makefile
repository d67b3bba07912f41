# Two commands do everything on a fresh machine:
#   make quickstart   -> creates .venv if missing, runs examples/quickstart.yaml
#   make test         -> creates .venv if missing, runs the test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

$(BIN)/preschool: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned to the CPU wheel, so nothing below pulls a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/preschool

.PHONY: setup quickstart test test-all
setup: $(BIN)/preschool

quickstart: setup
	$(BIN)/preschool run examples/quickstart.yaml

test: setup
	$(BIN)/python -m pytest -q

test-all: setup
	$(BIN)/python -m pytest -q -m ''
