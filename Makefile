# The two commands a newcomer runs: `make demo` and `make test`. Each creates .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-test
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: demo test lint bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

$(DEMO_STAMP): $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install --quiet -e '.[demo]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(PY) -m munet.cli demo

# Two test processes share the two cores: one BLAS/OpenMP thread each, or spinning BLAS threads
# oversubscribe the machine and small matmuls get 100x slower.
test: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -n 2 --dist loadfile

lint: $(STAMP)
	$(PY) -m ruff check munet tests benchmarks examples
	$(PY) -m ruff format --check munet tests benchmarks examples

bench: $(STAMP)
	$(PY) benchmarks/eager_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
