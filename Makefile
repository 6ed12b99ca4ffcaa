# Every target installs what it needs into .venv on first use, so a fresh clone works with nothing done by hand.
PYTHON    ?= python3
VENV      ?= .venv
PY        := $(VENV)/bin/python
SPEC      ?= cluster_configs/sweeps/default.yaml
CLUSTER   ?= local
OUT       ?=
GPU_CLASSES ?=
SEED      ?=
SAMPLES   ?=
MAX_MINUTES ?=
FORCE     ?=
export PIP_DISABLE_PIP_VERSION_CHECK=1

# CuPy is installed only where a GPU is visible and no CuPy is importable yet (override: make CUPY=cupy-cuda13x).
CUPY      ?= cupy-cuda12x
HAVE_GPU  := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)

.PHONY: venv sweep test pytest fuzz notebooks lint clean-venv help

help:
	@echo "make venv       create .venv with the project installed (every other target does it first)"
	@echo "make sweep      run the default sweep (local Dask cluster; GPU if visible, else CPU)"
	@echo "                vars: SPEC=cluster_configs/sweeps/X.yaml CLUSTER=local|slurm|FILE.yaml OUT=DIR GPU_CLASSES=v100,h100 SEED=N"
	@echo "                SAMPLES=N MAX_MINUTES=M FORCE=1"
	@echo "make test       lint, then the test suite (GPU tests skip without a GPU); make pytest: the suite alone"
	@echo "make fuzz       the property tests with fresh randomness, pass after pass for FUZZ_MINUTES (10); run"
	@echo "                before a submission, keep what it finds as an @example (make test draws fixed ones)"
	@echo "make notebooks  execute every notebook headless against the committed data"
	@echo "make lint       ruff check, ruff format --check, mypy (the pre-commit hook runs the same)"

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@if [ "$(HAVE_GPU)" = yes ] && ! $(PY) -c 'import cupy' 2>/dev/null; then \
		echo "GPU visible: installing $(CUPY)"; $(PY) -m pip install -q '$(CUPY)'; fi
	touch $@

venv: $(VENV)/.installed

# The flags the variables set, in one line (a recipe's continuation lines would echo blank where unset).
SWEEP_FLAGS = $(strip --cluster $(CLUSTER) $(if $(OUT),--out $(OUT)) $(if $(GPU_CLASSES),--gpu-class $(GPU_CLASSES)) \
	$(if $(SEED),--seed $(SEED)) $(if $(SAMPLES),--samples $(SAMPLES)) \
	$(if $(MAX_MINUTES),--max-minutes $(MAX_MINUTES)) $(if $(FORCE),--force))

sweep: $(VENV)/.installed
	$(VENV)/bin/launchtune sweep $(SPEC) $(SWEEP_FLAGS)

# The README's test command: lint first (seconds), then the suite. `make pytest` runs the suite alone.
test: lint pytest

pytest: $(VENV)/.installed
	$(PY) -m pytest -q

# Property tests with fresh randomness (tests/conftest.py's ``fuzz`` profile), pass after pass until
# FUZZ_MINUTES are up (exit 0) or a pass fails (its exit code, the counterexample printed).
FUZZ_MINUTES ?= 10
fuzz: $(VENV)/.installed
	@end=$$(( $$(date +%s) + 60 * $(FUZZ_MINUTES) )); pass=0; \
	while [ $$(date +%s) -lt $$end ]; do \
		pass=$$((pass + 1)); echo "fuzz pass $$pass"; \
		LAUNCHTUNE_HYPOTHESIS_PROFILE=fuzz timeout $$(( end - $$(date +%s) + 1 )) \
			$(PY) -m pytest -q -x -m hypothesis -p no:cacheprovider; rc=$$?; \
		if [ $$rc = 124 ]; then break; fi; if [ $$rc != 0 ]; then exit $$rc; fi; \
	done; echo "fuzz: $$pass passes in $(FUZZ_MINUTES) min, nothing found"

notebooks: $(VENV)/.installed
	$(VENV)/bin/launchtune notebooks

LINTED := launchtune kernels pipeline tests benchmarks lab tools notebooks
lint: $(VENV)/.installed
	$(PY) -m ruff check $(LINTED)
	$(PY) -m ruff format --check $(LINTED)
	$(PY) -m mypy

clean-venv:
	rm -rf $(VENV)
