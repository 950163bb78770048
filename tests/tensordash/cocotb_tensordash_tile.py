"""cocotb test of the TensorDash tile: results bit-exact against the golden model, cycles equal to the reference model's."""

import itertools
import random

import cocotb
import numpy as np

from dashraker.sim.stimulus import operand_bits
from dashraker.sim.tile_tb import TileTB
from tensordash_stimulus import CASES, operands


def _case_batches(tb, cases):
    """Operand bits (scheduled, partner) of each named stimulus case."""
    c, p = tb.config, tb.params
    return [tuple(operand_bits(x, p["fmt"]) for x in operands(case, c["passes"], p["rows"], p["cols"], c["steps"],
                                                               p["lanes"], p["fmt"], c["seed"] + index))
            for index, case in enumerate(cases)]


@cocotb.test()
async def sparsity_cases_back_to_back(dut):
    """Full chunks, no stalls: every case agrees, and results arrive exactly a pass's cycles apart."""
    tb = TileTB(dut)
    await tb.reset()
    run = await tb.run_passes(_case_batches(tb, CASES), names=CASES)
    tb.check_back_to_back(run)


@cocotb.test()
async def stalls_and_partial_chunks(dut):
    """Random idle/backpressure and chunks of 1..H+1 steps change nothing but timing."""
    tb = TileTB(dut, stall=0.3)
    await tb.reset()
    rng = random.Random(tb.config["seed"])
    sizes = (rng.randint(1, tb.params["lookahead"] + 1) for _ in itertools.count())
    await tb.run_passes(_case_batches(tb, CASES), sizes, names=CASES)


@cocotb.test()
@cocotb.parametrize(stall=[0.0, 0.3])
async def special_values(dut, stall):
    """Inf/NaN/signed zeros/subnormals: subnormal scheduled values count as zeros (DAZ) and are skipped."""
    tb = TileTB(dut, stall)
    await tb.reset()
    c, p = tb.config, tb.params
    gen = np.random.default_rng(c["seed"])
    special = np.array([0.0, -0.0, 1e-40, -1e-40, np.inf, -np.inf, np.nan, 3.0e38, 1.0, -2.5], np.float32)
    a, b = (operand_bits(gen.choice(special, (c["passes"], count, c["steps"], p["lanes"])), p["fmt"])
            for count in (p["rows"], p["cols"]))
    await tb.run_passes([(a, b)], names=["special"])
