# The two commands users need are `make demo` and `make test`; both set up what is missing first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_WORKERS ?= 2
DEMO_OUT ?= build/demo

.PHONY: setup demo test test-all docs clean lint-imports

# The YoWASP tools compile to machine code on their first run and cache it; two first runs at once (the test
# workers) can truncate the cache under each other (SIGBUS), so it is made here, once, before any parallel use.
setup: $(STAMP)
	@scripts/install-system-packages.sh
	@scripts/install-debian-data.sh $(VENV)
	@for tool in yosys nextpnr-ecp5 nextpnr-ice40; do $(BIN)/yowasp-$$tool --version >/dev/null; done

$(STAMP): pyproject.toml setup.py
	@scripts/install-system-packages.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

demo: setup
	$(BIN)/dashraker demo --out $(DEMO_OUT)

# The suite without the cases marked slow (large tile builds, long formal proofs, full sweeps). Each worker starts on
# a consecutive half of the tests and takes the last pending half of the other's when it runs out (worksteal), so
# both finish together; the default (load) hands the first chunk, every minutes-long case, to one worker.
PYTEST_DIST ?= --dist worksteal
test: setup
	$(BIN)/pytest -n $(PYTEST_WORKERS) $(PYTEST_DIST) -m "not slow" $(PYTEST_ARGS)

# Everything, slow cases included.
test-all: setup
	$(BIN)/pytest -n $(PYTEST_WORKERS) $(PYTEST_DIST) $(PYTEST_ARGS)

# The import contracts of pyproject.toml (layers, no circles, RTL without PyTorch), as tests/test_layers.py runs them;
# a plain `lint-imports` from this folder runs the same (dashraker/'s subpackages are links to the folders).
lint-imports: setup
	$(BIN)/lint-imports --no-cache pyproject.toml

# The documentation site (docs/, Sphinx + MyST) into docs/_build/html: warnings are errors, broken references
# included (nitpicky). tests/test_docs.py builds it too and runs every example in it.
docs: setup
	$(BIN)/python -m sphinx -E -W --keep-going -n -b html docs docs/_build/html

clean:
	rm -rf build docs/_build docs/_generated

# FPGA (slow: many hours on 2 cores; finished configurations and placement seeds are reused), placed and
# routed for ECP5-85k with three placement seeds each (the median Fmax): the designs compared at 8 lanes
# in bf16 and fp32 (FPRaker's default among them), the baseline and TensorDash in 2x2 tiles at 8 lanes in
# bf16, at 16 lanes in bf16 (the baseline's and TensorDash's defaults; FPRaker and the 2x2 tiles routed by
# router2, which copes with their congestion), and the loops and units that bound Fmax alone. The seeds of a
# configuration are placed and routed at once (FPGA_JOBS). Throughput per LUT at the speedups of `make demo`'s
# mapping when it exists (or FPGA_MAP=map.json) and at TensorDash 2x.
FPGA_OUT ?= build/fpga
FPGA_MAP ?= $(wildcard $(DEMO_OUT)/map/map.json)
FPGA_SEEDS ?= 3
FPGA_JOBS ?= $(FPGA_SEEDS)
FPGA_COMPARE = $(BIN)/dashraker fpga compare --seeds $(FPGA_SEEDS) --jobs $(FPGA_JOBS) $(if $(FPGA_MAP),--map $(FPGA_MAP)) \
	--speedup tensordash=2 $(FPGA_ARGS)
.PHONY: fpga
fpga: setup
	$(FPGA_COMPARE) --lanes 8 --dtypes bf16,fp32 --out $(FPGA_OUT)/lanes8
	$(FPGA_COMPARE) --lanes 8 --rows 2 --cols 2 --dtypes bf16 --designs baseline,tensordash --router router2 \
		--out $(FPGA_OUT)/lanes8-2x2
	$(FPGA_COMPARE) --lanes 16 --dtypes bf16 --designs baseline,tensordash --out $(FPGA_OUT)/lanes16
	$(FPGA_COMPARE) --lanes 16 --dtypes bf16 --designs fpraker --router router2 --out $(FPGA_OUT)/lanes16-router2
	$(BIN)/python bench/fpga_units.py --out $(FPGA_OUT)/units
