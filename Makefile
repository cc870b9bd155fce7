# Two commands do all set-up on a fresh machine:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test typecheck docs clean

# pip builds the compiled per-message path (setup.py) into the package: a changed C file
# (or native.py, which fingerprints them) reinstalls, so the extension in use is always the one the sources describe.
NATIVE := $(wildcard src/shoal/_native/*.c src/shoal/_native/*.h)

$(STAMP): pyproject.toml setup.py src/shoal/native.py $(NATIVE)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[mpich,test,docs,notebook,bench,charm4py,dask,ray,numba]'
	touch $(STAMP)

demo: $(STAMP)  ## a representative job: 4 PEs, arrays, broadcasts, reductions, channels
	$(VENV)/bin/shoal run -n 4 examples/demo.py

test: $(STAMP)  ## every test: unit (in-process) and integration (real mpiexec, 2-3 PEs), then mypy
	$(PY) -m pytest -q
	$(PY) -m mypy

typecheck: $(STAMP)
	$(PY) -m mypy

docs: $(STAMP)  ## the documentation site, API reference from the docstrings: docs/_build/html (warnings are errors)
	$(PY) -m sphinx -W --keep-going -n -q -b html -d docs/_build/doctrees docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache build src/shoal/_shoal_native.*.so src/shoal/_native_build.py
