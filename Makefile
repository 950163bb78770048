# The two commands users need are `make demo` and `make test`; both set up what is missing first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_WORKERS ?= 2
DEMO_OUT ?= build/demo

.PHONY: setup demo test test-quick clean

setup: $(STAMP)
	@scripts/install-system-packages.sh

$(STAMP): pyproject.toml setup.py
	@scripts/install-system-packages.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

demo: setup
	$(BIN)/dashraker demo --out $(DEMO_OUT)

test: setup
	$(BIN)/pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

test-quick: setup
	$(BIN)/pytest -n $(PYTEST_WORKERS) -m "not slow" $(PYTEST_ARGS)

clean:
	rm -rf build
