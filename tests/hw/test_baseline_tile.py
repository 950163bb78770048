"""The dense baseline tile, bit- and cycle-exact against the golden model on both simulators."""

from pathlib import Path

import pytest

from dashraker.hw.baseline import Tile
from dashraker.sim.runner import run_cocotb

COCOTB_MODULE = Path(__file__).with_name("cocotb_tile.py")

CONFIGS = {
    "pe_16_bf16": dict(rows=1, cols=1, lanes=16, fmt="bf16"),
    "tile_2x3x4_fp32": dict(rows=2, cols=3, lanes=4, fmt="fp32"),
    "tile_4x4x16_bf16": dict(rows=4, cols=4, lanes=16, fmt="bf16"),
}


@pytest.mark.parametrize("name", [
    "pe_16_bf16",
    "tile_2x3x4_fp32",
    pytest.param("tile_4x4x16_bf16", marks=pytest.mark.slow),
])
def test_baseline_tile(name, simulator, build_cache):
    params = CONFIGS[name]
    config = {"rows": params["rows"], "cols": params["cols"], "lanes": params["lanes"], "format": params["fmt"],
              "latency": Tile(**params).latency, "seed": 11, "passes": 12}
    run_cocotb(lambda: Tile(**params), toplevel=name, test_module=COCOTB_MODULE,
               build_dir=build_cache / name, simulator=simulator, config=config)
