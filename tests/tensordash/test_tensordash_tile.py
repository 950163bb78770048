"""The TensorDash tile on both simulators: bit-exact outputs and reference-model cycle counts on every pass."""

from pathlib import Path

import pytest

from dashraker.designs import DESIGNS
from dashraker.sim.runner import configuration_cases, run_tile

COCOTB_MODULE = Path(__file__).with_name("cocotb_tensordash_tile.py")
DESIGN = DESIGNS["tensordash"]

CONFIGS = {
    "td_2x2x8_t25_bf16": dict(rows=2, cols=2, lanes=8, lookahead=2, pattern="T<2,5>", fmt="bf16"),
    "td_2x2x16_t25_bf16": dict(rows=2, cols=2, lanes=16, lookahead=2, pattern="T<2,5>", fmt="bf16"),
    "td_1x3x8_h1_fp32": dict(rows=1, cols=3, lanes=8, lookahead=1, pattern="(0,0),(1,0),(1,-1),(1,2)", fmt="fp32"),
    "td_1x2x8_h1_fp32": dict(rows=1, cols=2, lanes=8, lookahead=1, pattern="(0,0),(1,0),(1,-1),(1,2)", fmt="fp32"),
    "td_4x4x16_t25_bf16": dict(rows=4, cols=4, lanes=16, lookahead=2, pattern="T<2,5>", fmt="bf16"),
    # The separable allocators (SPEC section 3, amended 2026-11-27): the FPGA tile's 8 lanes, and 16 lanes.
    "td_1x2x8_sep2_bf16": dict(rows=1, cols=2, lanes=8, lookahead=2, pattern="T<2,5>", fmt="bf16",
                               scheduler="separable2"),
    "td_1x1x8_sep2_bf16": dict(rows=1, cols=1, lanes=8, lookahead=2, pattern="T<2,5>", fmt="bf16",
                               scheduler="separable2"),
    "td_2x1x8_sep1_fp32": dict(rows=2, cols=1, lanes=8, lookahead=2, pattern="T<2,5>", fmt="fp32",
                               scheduler="separable1"),
    "td_2x2x16_sep2_bf16": dict(rows=2, cols=2, lanes=16, lookahead=2, pattern="T<2,5>", fmt="bf16",
                                scheduler="separable2"),
    "td_1x2x8_t25_bf16_fused": dict(rows=1, cols=2, lanes=8, lookahead=2, pattern="T<2,5>", fmt="bf16", dot="fused"),
    # Two threads (SPEC section 3, amended 2026-12-06): the fixed-point accumulator's contexts (tree and fused), the
    # fp32 partials' with adders of even and odd depths, rows' schedulers and columns' partners, an allocator.
    "td_1x1x8_t25_bf16_t2": dict(rows=1, cols=1, lanes=8, lookahead=2, pattern="T<2,5>", fmt="bf16", threads=2),
    "td_1x1x8_h1_fp32_t2": dict(rows=1, cols=1, lanes=8, lookahead=1, pattern="(0,0),(1,0),(1,-1),(1,2)", fmt="fp32",
                                threads=2),
    "td_2x2x8_t25_bf16_t2": dict(rows=2, cols=2, lanes=8, lookahead=2, pattern="T<2,5>", fmt="bf16", threads=2),
    "td_1x2x8_t25_bf16_fused_t2": dict(rows=1, cols=2, lanes=8, lookahead=2, pattern="T<2,5>", fmt="bf16",
                                       dot="fused", threads=2),
    "td_1x2x8_l3_fp32_t2": dict(rows=1, cols=2, lanes=8, lookahead=2, pattern="T<2,5>", fmt="fp32", accumulators=3,
                                threads=2),
    "td_2x1x8_l2_bf16_t2": dict(rows=2, cols=1, lanes=8, lookahead=2, pattern="T<2,5>", fmt="bf16", accumulators=2,
                                threads=2),
    "td_2x1x8_sep2_bf16_t2": dict(rows=2, cols=1, lanes=8, lookahead=2, pattern="T<2,5>", fmt="bf16",
                                  scheduler="separable2", threads=2),
}
# The quick suite runs each simulator once, on the smallest tiles that keep what it checks: Verilator the greedy
# scheduler's fp32 window of lookahead 1 with two columns of partner muxes (it compiles small designs quickly), Icarus
# a separable allocator's bf16 tile; co-simulation runs greedy's T<2,5> tile on real trace data. The fused dot
# product's MAC unit is the baseline's, whose quick cases run it on both simulators. Two threads: the smallest tile,
# of lookahead 1, on both.
QUICK = {("td_1x2x8_h1_fp32", "verilator"), ("td_1x1x8_sep2_bf16", "icarus"), ("td_1x1x8_h1_fp32_t2", "verilator"),
         ("td_1x1x8_h1_fp32_t2", "icarus")}


@pytest.mark.early
@pytest.mark.parametrize("name, sim_name", configuration_cases(CONFIGS, QUICK))
def test_tensordash_tile(name, sim_name, build_cache):
    run_tile(DESIGN, DESIGN.params(**CONFIGS[name]), toplevel=name, test_module=COCOTB_MODULE,
             build_dir=build_cache / name, simulator=sim_name, seed=5, passes=3, steps=12)
