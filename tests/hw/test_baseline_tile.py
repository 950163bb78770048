"""The dense baseline tile, bit- and cycle-exact against the golden model on both simulators."""

from pathlib import Path

import pytest

from dashraker.hw.baseline import Tile
from dashraker.sim.runner import configuration_cases, run_cocotb

COCOTB_MODULE = Path(__file__).with_name("cocotb_tile.py")

CONFIGS = {
    "pe_16_bf16": dict(rows=1, cols=1, lanes=16, fmt="bf16"),
    "tile_2x3x4_fp32": dict(rows=2, cols=3, lanes=4, fmt="fp32"),
    "tile_4x4x16_bf16": dict(rows=4, cols=4, lanes=16, fmt="bf16"),
}


QUICK = {(name, simulator) for name in ("pe_16_bf16", "tile_2x3x4_fp32") for simulator in ("icarus", "verilator")}


@pytest.mark.parametrize("name, sim_name", configuration_cases(CONFIGS, QUICK))
def test_baseline_tile(name, sim_name, build_cache):
    params = CONFIGS[name]
    config = {"rows": params["rows"], "cols": params["cols"], "lanes": params["lanes"], "format": params["fmt"],
              "latency": Tile(**params).latency, "seed": 11, "passes": 12}
    run_cocotb(lambda: Tile(**params), toplevel=name, test_module=COCOTB_MODULE,
               build_dir=build_cache / name, simulator=sim_name, config=config)
