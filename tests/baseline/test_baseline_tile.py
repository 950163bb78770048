"""The dense baseline tile, bit- and cycle-exact against the golden model on both simulators, with the default
fixed-point accumulator, interleaved partials (L = 6, L = 3) and the one-cycle loop (L = 1), and the fused dot
product, and the fused multiply-add lanes (L = 1 and interleaved)."""

from pathlib import Path

import pytest

from dashraker.designs import DESIGNS
from dashraker.sim.runner import configuration_cases, run_tile

COCOTB_MODULE = Path(__file__).with_name("cocotb_baseline_tile.py")
DESIGN = DESIGNS["baseline"]

CONFIGS = {
    "pe_16_bf16": dict(rows=1, cols=1, lanes=16, fmt="bf16"),
    "pe_4_bf16": dict(rows=1, cols=1, lanes=4, fmt="bf16"),
    "pe_8_bf16_loop": dict(rows=1, cols=1, lanes=8, fmt="bf16", accumulators=1),
    "tile_2x3x4_fp32_l6": dict(rows=2, cols=3, lanes=4, fmt="fp32", accumulators=6),
    "tile_2x2x2_fp32_l6": dict(rows=2, cols=2, lanes=2, fmt="fp32", accumulators=6),
    "tile_2x2x4_fp32": dict(rows=2, cols=2, lanes=4, fmt="fp32"),
    "tile_2x2x4_fp32_loop": dict(rows=2, cols=2, lanes=4, fmt="fp32", accumulators=1),
    "pe_3_bf16_l3": dict(rows=1, cols=1, lanes=3, fmt="bf16", accumulators=3),
    "tile_4x4x16_bf16": dict(rows=4, cols=4, lanes=16, fmt="bf16"),
    "pe_8_bf16_fused": dict(rows=1, cols=1, lanes=8, fmt="bf16", dot="fused"),
    "tile_2x2x3_fp32_fused": dict(rows=2, cols=2, lanes=3, fmt="fp32", dot="fused"),
    "pe_4_bf16_fma": dict(rows=1, cols=1, lanes=4, fmt="bf16", dot="fma", accumulators=1),
    "pe_2_bf16_fma_l3": dict(rows=1, cols=1, lanes=2, fmt="bf16", dot="fma", accumulators=3),
    "tile_2x2x8_bf16_fma_l6": dict(rows=2, cols=2, lanes=8, fmt="bf16", dot="fma", accumulators=6),
}


# The fused dot product and the fused multiply-add lanes on both simulators; the default (tree, fixed-point
# accumulator), the loop and the partials in a tile, and the lanes' interleaved partials on Icarus only (it
# elaborates large designs quickly), each on its smallest case: the packaged 16 lanes and the wider tiles are slow.
QUICK = {("pe_8_bf16_fused", "icarus"), ("pe_8_bf16_fused", "verilator"), ("pe_4_bf16", "icarus"),
         ("pe_8_bf16_loop", "icarus"), ("tile_2x2x2_fp32_l6", "icarus"), ("pe_4_bf16_fma", "icarus"),
         ("pe_4_bf16_fma", "verilator"), ("pe_2_bf16_fma_l3", "icarus")}


@pytest.mark.early
@pytest.mark.parametrize("name, sim_name", configuration_cases(CONFIGS, QUICK))
def test_baseline_tile(name, sim_name, build_cache):
    run_tile(DESIGN, DESIGN.params(**CONFIGS[name]), toplevel=name, test_module=COCOTB_MODULE,
             build_dir=build_cache / name, simulator=sim_name, seed=11, passes=12)
