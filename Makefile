# Two commands do everything on a fresh machine:
#   make run   -> creates .venv, installs, runs the main job (results under outputs/)
#   make test  -> creates .venv, installs, runs the test suite
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TORCH  := torch==2.13.0

.PHONY: run test bench venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first with an exact pin: a looser pin pulls gigabytes of CUDA packages
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e ".[test,tensorboard]"
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m workbench run --params-set default

test: $(STAMP)
	$(VENV)/bin/ruff check workbench tests scripts benchmarks notebooks
	$(VENV)/bin/ruff format --check workbench tests scripts benchmarks notebooks
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m benchmarks losses

clean:
	rm -rf $(VENV)
