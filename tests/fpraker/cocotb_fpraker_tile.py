"""cocotb test of the FPRaker tile: results and cycle counts bit-exact against the golden model."""

import cocotb
import numpy as np

from dashraker.sim.stimulus import operand_bits, training_step_passes
from dashraker.sim.tile_tb import CROSSED, PAIRED, TileTB, single_pass_batches
from fpraker_stimulus import FIVE_TERM_SIGNIFICANDS, random_bits, real_bits


def _random_passes(params, rng, count):
    """Passes over every corner: zeros, signed zeros, subnormals, Inf, NaN, 5-term values, wide spreads."""
    rows, cols, lanes = params["rows"], params["cols"], params["lanes"]
    passes = []
    for index in range(count):
        steps = int(rng.integers(1, 9))
        spread, corner = [(2, 0.0), (8, 0.3), (40, 0.5), (120, 0.2)][index % 4]
        passes.append((random_bits(rng, (rows, steps, lanes), spread, corner),
                       random_bits(rng, (cols, steps, lanes), spread, corner)))
    # every term out of bounds: a huge first product, then products 2**-100 times smaller
    huge = np.full((rows, 1, lanes), 250 << 7, np.int64)
    tiny = (40 << 7) | (rng.choice(FIVE_TERM_SIGNIFICANDS, (rows, 4, lanes)) - 128)
    ones = np.full((cols, 5, lanes), 127 << 7, np.int64)
    passes.append((np.concatenate([huge, tiny], 1), ones))
    # 5-term values only, and an all-zero pass
    five = (127 << 7) | (rng.choice(FIVE_TERM_SIGNIFICANDS, (rows, 3, lanes)) - 128)
    passes.append((five, ones[:, :3]))
    passes.append((np.zeros((rows, 2, lanes), np.int64), ones[:, :2] | 0x8000))
    return passes


def _real_passes(params, rng):
    """Slices of real training tensors: a forward and a weight-gradient pass, and random picks."""
    rows, cols, lanes = params["rows"], params["cols"], params["lanes"]
    cut = training_step_passes(rows, cols, lanes)
    bits = [(operand_bits(a, "bf16"), operand_bits(b, "bf16")) for a, b in cut]
    bits.append((real_bits(rng, (rows, 6, lanes)), real_bits(rng, (cols, 6, lanes))))
    return bits


@cocotb.test()
@cocotb.parametrize(**CROSSED)
async def random_and_corner_values(dut, idle, backpressure):
    tb = TileTB(dut, idle, backpressure)
    await tb.reset()
    rng = np.random.default_rng(tb.config["seed"])
    await tb.run_passes(single_pass_batches(_random_passes(tb.params, rng, tb.config["passes"])))


@cocotb.test()
@cocotb.parametrize(PAIRED)
async def real_training_tensors(dut, idle, backpressure):
    tb = TileTB(dut, idle, backpressure)
    await tb.reset()
    rng = np.random.default_rng(tb.config["seed"] + 3)
    await tb.run_passes(single_pass_batches(_real_passes(tb.params, rng) + _random_passes(tb.params, rng, 4)))


@cocotb.test()
async def blocks_run_back_to_back(dut):
    """Without stalls, consecutive results are exactly the later pass's cycle count apart (all blocks counted)."""
    tb = TileTB(dut)
    await tb.reset()
    passes = _random_passes(tb.params, np.random.default_rng(tb.config["seed"] + 9), 6)
    tb.check_back_to_back(await tb.run_passes(single_pass_batches(passes)))
