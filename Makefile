# The two commands users need are `make demo` and `make test`; both set up what is missing first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_WORKERS ?= 2
DEMO_OUT ?= build/demo

.PHONY: setup demo test test-all clean

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

# The suite without the cases marked slow (large tile builds, long formal proofs, full sweeps).
test: setup
	$(BIN)/pytest -n $(PYTEST_WORKERS) -m "not slow" $(PYTEST_ARGS)

# Everything, slow cases included.
test-all: setup
	$(BIN)/pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

clean:
	rm -rf build

# FPGA (slow: hours on 2 cores; finished configurations are reused): the equal-lanes comparison of
# the designs (their default 16-lane baseline/TensorDash configurations among them, bf16 and fp32)
# and FPRaker's default, placed and routed for ECP5-85k. Throughput per LUT uses the speedups of `make demo`'s mapping when it exists (or FPGA_MAP=map.json).
FPGA_OUT ?= build/fpga
FPGA_MAP ?= $(wildcard $(DEMO_OUT)/map/map.json)
.PHONY: fpga
fpga: setup
	$(BIN)/dashraker fpga compare --out $(FPGA_OUT) $(if $(FPGA_MAP),--map $(FPGA_MAP)) $(FPGA_ARGS)
	$(BIN)/dashraker fpga fpraker --out $(FPGA_OUT)/fpraker-default
