# Two commands do everything on a fresh machine:
#   make quickstart   -> creates .venv if missing, runs examples/quickstart.yaml
#   make test         -> creates .venv if missing, runs the test suite (.venv/bin/python -m pytest -q)
# Both install the exact versions in requirements/lock.txt (pinned and hashed); `make lock`
# regenerates it after a dependency change in pyproject.toml (see README, "Reproducibility").
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

# Extras the test suite needs, all covered by the lock: dev (pytest, hypothesis), lmeval (our BLiMP
# decisions are checked against lm-eval), bench (the HF Trainer baseline), datatrove and formats
# (the readers our exports are checked with), wandb (the W&B callback, run offline), ray (prepare
# --executor ray on a local Ray).
TEST_EXTRAS := dev,lmeval,bench,datatrove,formats,wandb,ray
LOCK := requirements/lock.txt
# torch (version in requirements/torch.txt) is the CPU wheel, so that nothing pulls a multi-GB CUDA
# build. pip finds it through its find-links setting when one is configured, else on PyTorch's CPU wheel page.
TORCH_WHEELS ?= $(or $(PIP_FIND_LINKS),https://download.pytorch.org/whl/cpu/torch/)
# `make setup USE_LOCK=0`: the loose ranges of pyproject.toml instead (newest allowed versions)
USE_LOCK ?= 1
UV := uv==0.13.9

comma := ,
$(BIN)/preschool: pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
ifeq ($(USE_LOCK),1)
	$(BIN)/pip install -q --require-hashes --find-links $(TORCH_WHEELS) -r $(LOCK)
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/pip check
else
	$(BIN)/pip install -q --find-links $(TORCH_WHEELS) -r requirements/torch.txt
	$(BIN)/pip install -q -e '.[$(TEST_EXTRAS)]'
endif
	touch $(BIN)/preschool

.PHONY: setup quickstart test test-all lock
setup: $(BIN)/preschool

quickstart: setup
	$(BIN)/preschool run examples/quickstart.yaml

test: setup
	$(BIN)/python -m pytest -q

test-all: setup
	$(BIN)/python -m pytest -q -m ''

# Regenerate the lock (needs the network): runtime dependencies plus TEST_EXTRAS, resolved for
# CPython 3.11 on Linux x86-64 with the torch of requirements/torch.txt. Versions already locked are kept where
# pyproject.toml still allows them; `make lock UPGRADE=1` moves everything to the newest allowed.
lock:
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q $(UV)
	$(BIN)/uv pip compile pyproject.toml $(foreach e,$(subst $(comma), ,$(TEST_EXTRAS)),--extra $(e)) \
		--constraint requirements/torch.txt --find-links $(TORCH_WHEELS) --generate-hashes \
		--python-version 3.11 --python-platform x86_64-manylinux_2_28 $(if $(UPGRADE),--upgrade) \
		--custom-compile-command 'make lock' --quiet -o $(LOCK)
