# The two set-up commands of the README. Both work on a fresh machine without a GPU (CPU torch 2.13.0, the
# Triton interpreter); on a GPU host install a CUDA or ROCm torch first and pass TORCH_SPEC= (empty).
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: install test test-fast tune lint

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(if $(TORCH_SPEC),$(PY) -m pip install -q $(TORCH_SPEC))
	$(PY) -m pip install -q -e '.[test,plots]'
	touch $@

# The test suite: kernels run in the Triton interpreter when no GPU is present (tests/conftest.py), one pytest-xdist
# worker per core (JOBS=0: all in one process). loadgroup keeps the tests that share a module-scoped fixture (a Ray
# cluster, a `ray start` head) in one worker; each worker has a Ray temp dir of its own (tests/conftest.py).
JOBS ?= auto
XDIST = -n $(JOBS) --dist loadgroup
test: install
	$(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)

# The fast subset: every test not marked slow (pyproject.toml's markers).
test-fast: install
	$(PY) -m pytest -q $(XDIST) -m "not slow" $(PYTEST_ARGS)

# The main job: a sweep on the embedded local Ray cluster with its defaults (interpreter problems without a GPU).
tune: install
	$(PY) -m raytune_attn tune

lint: install
	$(VENV)/bin/ruff check raytune_attn tests pipelines examples benchmarks
