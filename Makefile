# Two commands do everything on a fresh machine:
#   make quickstart   -> creates .venv if missing, runs examples/quickstart.yaml
#   make test         -> creates .venv if missing, runs the test suite (.venv/bin/python -m pytest -q)
# Both install the exact versions in requirements/lock.txt (pinned and hashed); `make lock`
# regenerates it after a dependency change in pyproject.toml (see README, "Reproducibility").
# `make test-olmo` (opt-in) checks the numpy export with OLMo-core's own reader in a second environment.
# On a CUDA machine: `make setup-gpu` (the CUDA build of torch and preschool[gpu], exact versions from
# requirements/gpu-lock.txt, in .venv-gpu) and `make gpu-check` (scripts/gpu_check.py: PASS/FAIL per step).
# The locks are resolved for CPython 3.11, and the CPU torch wheel of lock.txt and olmo-lock.txt is 3.11's
# alone (the PyPI packages carry every Python's hashes): make takes python3.11 when it is on PATH, else
# python3, and a CPU install into an environment of another Python stops saying what to do.
LOCK_PYTHON := 3.11
PY ?= $(or $(shell command -v python$(LOCK_PYTHON) 2>/dev/null),python3)
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

# OLMo-core's reader gets an environment of its own: ai2-olmo-core needs cached-path, whose caps
# (huggingface-hub<2, rich<14, filelock<4) the main lock does not meet, and lowering those for every
# test would change the main environment. requirements/olmo-lock.txt is the main lock's versions, with
# OLMO_DOWNGRADES moved to what OLMo-core allows and OLMo-core's own dependencies added
# (tests/reliability/test_install_lock.py checks that no other version differs).
OLMO_EXTRAS := dev,olmo
OLMO_LOCK := requirements/olmo-lock.txt
OLMO_DOWNGRADES := filelock huggingface-hub rich
OLMO_VENV := .venv-olmo
OLMO_BIN := $(OLMO_VENV)/bin

# The GPU environment: PyPI's Linux wheel of torch (the version in requirements/torch-gpu.txt, the
# same as the CPU wheel's) is the CUDA build and brings its nvidia-* libraries and triton; GPU_EXTRAS
# adds Liger-Kernel (gpu) and pytest (dev). requirements/gpu-lock.txt is the main lock's versions
# wherever both hold a package (tests/reliability/test_install_lock.py), plus the CUDA ones.
GPU_EXTRAS := gpu,dev
GPU_LOCK := requirements/gpu-lock.txt
GPU_VENV := .venv-gpu
GPU_BIN := $(GPU_VENV)/bin
# `make gpu-check GPU_CHECK_ARGS='--steps quickstart'`: arguments for scripts/gpu_check.py
GPU_CHECK_ARGS ?=

comma := ,
# $(call locked_install,VENV,LOCK,PIP_OPTIONS[,PYTHON]): create the environment if missing (and, given PYTHON,
# stop unless it runs that Python), install LOCK's exact
# versions (hashes checked; PIP_OPTIONS: where torch's wheel is found) and this checkout without
# dependencies, then check that they fit together
define locked_install
	test -x $(1)/bin/python || $(PY) -m venv $(1)
	$(if $(4),v=$$($(1)/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])'); test "$$v" = $(4) || { \
	  echo "make: $(2) is resolved for CPython $(4) (its torch CPU wheel is $(4)'s) and $(1) runs Python $$v:" \
	    "install Python $(4)$(comma) remove $(1) and run again (make takes python$(4) from PATH$(comma) or give" \
	    "PY=/path/to/python$(4))$(comma) or install pyproject.toml's version ranges instead with USE_LOCK=0" >&2; exit 2; })
	$(1)/bin/pip install -q --upgrade pip
	$(1)/bin/pip install -q --require-hashes $(3) -r $(2)
	$(1)/bin/pip install -q --no-deps -e .
	$(1)/bin/pip check
endef
# $(call compile,EXTRAS,OUTPUT,COMMAND,TORCH_PIN,PIP_OPTIONS): resolve the runtime dependencies plus EXTRAS
# into OUTPUT (pinned, hashed; versions already in OUTPUT kept where allowed), torch as TORCH_PIN says
define compile
	$(BIN)/uv pip compile pyproject.toml $(foreach e,$(subst $(comma), ,$(1)),--extra $(e)) \
		--constraint $(4) $(5) --generate-hashes \
		--python-version $(LOCK_PYTHON) --python-platform x86_64-manylinux_2_28 $(if $(UPGRADE),--upgrade) \
		--custom-compile-command '$(3)' --quiet -o $(2)
endef

$(BIN)/preschool: pyproject.toml $(LOCK)
ifeq ($(USE_LOCK),1)
	$(call locked_install,$(VENV),$(LOCK),--find-links $(TORCH_WHEELS),$(LOCK_PYTHON))
else
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --find-links $(TORCH_WHEELS) -r requirements/torch.txt
	$(BIN)/pip install -q -e '.[$(TEST_EXTRAS)]'
endif
	touch $(BIN)/preschool

.PHONY: setup quickstart test test-all rerender lock setup-olmo test-olmo lock-olmo setup-gpu gpu-check lock-gpu
setup: $(BIN)/preschool

quickstart: setup
	$(BIN)/preschool run examples/quickstart.yaml

test: setup
	$(BIN)/python -m pytest -q

test-all: setup
	$(BIN)/python -m pytest -q -m ''

# Re-render every committed study under docs/results/ from its results.json with today's report rules
# (no training; studies that cannot be re-rendered are listed with the reason): scripts/rerender_results.py
rerender: setup
	$(BIN)/python scripts/rerender_results.py

# Regenerate the lock (needs the network): runtime dependencies plus TEST_EXTRAS, resolved for
# CPython 3.11 on Linux x86-64 with the torch of requirements/torch.txt. Versions already locked are kept where
# pyproject.toml still allows them; `make lock UPGRADE=1` moves everything to the newest allowed.
lock:
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q $(UV)
	$(call compile,$(TEST_EXTRAS),$(LOCK),make lock,requirements/torch.txt,--find-links $(TORCH_WHEELS))

# The OLMo-core environment (opt-in; .ci/run runs it after `make test` when time allows): about 90
# packages, most of them the main environment's, so a second download only where pip's cache lacks them.
$(OLMO_BIN)/preschool: pyproject.toml $(OLMO_LOCK)
	$(call locked_install,$(OLMO_VENV),$(OLMO_LOCK),--find-links $(TORCH_WHEELS),$(LOCK_PYTHON))
	touch $(OLMO_BIN)/preschool

setup-olmo: $(OLMO_BIN)/preschool

# The OLMo-core tests of the exports, in that environment; PRESCHOOL_REQUIRE_OLMO_CORE turns their
# skip (olmo_core missing) into a failure, so this target cannot pass without running them.
test-olmo: setup-olmo
	PRESCHOOL_REQUIRE_OLMO_CORE=1 $(OLMO_BIN)/python -m pytest -q -k olmo_core tests/data/test_export.py

# Regenerate requirements/olmo-lock.txt after `make lock` (needs the network): it starts from the main
# lock's versions each time, so it follows the main lock, and only what OLMo-core excludes moves.
lock-olmo:
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q $(UV)
	cp $(LOCK) $(OLMO_LOCK).new
	$(call compile,$(OLMO_EXTRAS),$(OLMO_LOCK).new,make lock-olmo,requirements/torch.txt,--find-links $(TORCH_WHEELS))
	mv $(OLMO_LOCK).new $(OLMO_LOCK)

# The GPU environment (a CUDA machine, network to PyPI): several GB of wheels (torch's CUDA build and
# its nvidia-* libraries), so a separate .venv-gpu; `make setup`/`make test` stay on the CPU wheel.
# torch comes from PyPI (its Linux wheel is the CUDA build), not from the CPU wheel page.
$(GPU_BIN)/preschool: pyproject.toml $(GPU_LOCK)
	$(call locked_install,$(GPU_VENV),$(GPU_LOCK),)
	touch $(GPU_BIN)/preschool

setup-gpu: $(GPU_BIN)/preschool

# PASS/FAIL/SKIP per step, non-zero exit on a FAIL; output under docs/results/gpu/<date>-<device>/
# (docs/results/gpu/README.md; a machine without network: carry the wheels it names there)
gpu-check: setup-gpu
	$(GPU_BIN)/python scripts/gpu_check.py $(GPU_CHECK_ARGS)

# Regenerate requirements/gpu-lock.txt after `make lock` (needs the network): it starts from the main
# lock's versions, so it follows the main lock; torch at requirements/torch-gpu.txt from PyPI.
lock-gpu:
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q $(UV)
	cp $(LOCK) $(GPU_LOCK).new
	$(call compile,$(GPU_EXTRAS),$(GPU_LOCK).new,make lock-gpu,requirements/torch-gpu.txt,)
	mv $(GPU_LOCK).new $(GPU_LOCK)
