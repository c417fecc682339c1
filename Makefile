# Two commands do everything on a fresh machine:
#   make run   -> creates .venv, installs, runs the main job (results under outputs/)
#   make test  -> creates .venv, installs, runs the test suite
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TORCH  := torch==2.13.0
# where torch comes from: PyPI by default (on Linux its wheel brings gigabytes of CUDA packages); on a machine with no
# GPU, `make venv TORCH_INDEX=https://download.pytorch.org/whl/cpu` installs the CPU-only wheel instead
TORCH_INDEX ?=

.PHONY: run test bench venv clean notebook-filter

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first with an exact pin: a looser pin pulls gigabytes of CUDA packages
	$(PY) -m pip install --quiet $(TORCH) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install --quiet -e ".[test,tensorboard]"
	$(MAKE) notebook-filter
	touch $(STAMP)

# Notebooks are committed without outputs: nbstripout as this repository's git filter strips outputs and execution
# counts from what `git add` stores (cell ids kept), and what JupyterLab writes on every save beside them (nbstripout's
# default keys: widget state, cell timings, scroll state; and NOTEBOOK_KEYS: the kernel's language_info, the cells'
# collapsed state), so a notebook saved in JupyterLab stays clean in git. The notebooks' kernelspec is the one
# JupyterLab writes for the environment's own kernel (python3, "Python 3 (ipykernel)").
NOTEBOOK_KEYS := metadata.language_info cell.metadata.jupyter
notebook-filter:
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		python=$$($(PY) -c 'import sys; print(sys.executable)') && \
		$(PY) -m nbstripout --install && \
		git config filter.nbstripout.clean "\"$$python\" -m nbstripout --keep-id --extra-keys '$(NOTEBOOK_KEYS)'" && \
		git config diff.ipynb.textconv "\"$$python\" -m nbstripout --keep-id --extra-keys '$(NOTEBOOK_KEYS)' -t"; \
	fi

run: $(STAMP)
	$(PY) -m workbench run --params-set default

test: $(STAMP)
	$(VENV)/bin/ruff check workbench tests scripts benchmarks notebooks examples
	$(VENV)/bin/ruff format --check workbench tests scripts benchmarks notebooks examples
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m benchmarks losses

clean:
	rm -rf $(VENV)
