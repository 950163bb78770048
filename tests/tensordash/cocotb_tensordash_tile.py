"""cocotb test of the TensorDash tile: results bit-exact against the golden model, cycles equal to the reference model's.

A two-thread tile takes pass k of a stream on thread k mod 2's port (``TileTB``); without stalls its results come on
the cycles the reference model ends the passes (``models.threads.pass_ends``, the descriptor's ``Cost.ends``), as a
one-thread tile's back to back.
"""

import itertools
import random

import cocotb
import numpy as np

from dashraker.formats import float_format
from dashraker.sim.stimulus import operand_bits
from dashraker.sim.tile_tb import CROSSED, PAIRED, TileTB
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
@cocotb.parametrize((("idle", "backpressure"), [(0.3, 0.0), (0.0, 0.3), (0.3, 0.3)]))
async def stalls_and_partial_chunks(dut, idle, backpressure):
    """Random idle/backpressure and chunks of 1..H+1 steps change nothing but timing."""
    tb = TileTB(dut, idle, backpressure)
    await tb.reset()
    rng = random.Random(tb.config["seed"])
    sizes = (rng.randint(1, tb.params["lookahead"] + 1) for _ in itertools.count())
    await tb.run_passes(_case_batches(tb, CASES), sizes, names=CASES)


@cocotb.test()
@cocotb.parametrize(**CROSSED)
async def special_values(dut, idle, backpressure):
    """Inf/NaN/signed zeros/subnormals: subnormal scheduled values count as zeros (DAZ) and are skipped."""
    tb = TileTB(dut, idle, backpressure)
    await tb.reset()
    c, p = tb.config, tb.params
    gen = np.random.default_rng(c["seed"])
    special = np.array([0.0, -0.0, 1e-40, -1e-40, np.inf, -np.inf, np.nan, 3.0e38, 1.0, -2.5], np.float32)
    a, b = (operand_bits(gen.choice(special, (c["passes"], count, c["steps"], p["lanes"])), p["fmt"])
            for count in (p["rows"], p["cols"]))
    await tb.run_passes([(a, b)], names=["special"])


@cocotb.test()
async def subnormal_cases(dut):
    """Issue 17: a scheduled subnormal is a zero (DAZ) -- skipped against a -Inf partner, its step skipped."""
    tb = TileTB(dut)
    await tb.reset()
    p = tb.params
    shift = float_format(p["fmt"]).width - 16  # the bf16 patterns, as the same values in fp32

    def batch(steps):
        return (np.zeros((1, p["rows"], steps, p["lanes"]), np.int64),
                np.zeros((1, p["cols"], steps, p["lanes"]), np.int64))

    inf_a, inf_b = batch(1)
    inf_a[..., 0], inf_b[..., 0] = 0x807F << shift, 0xFF80 << shift
    skip_a, skip_b = batch(8)
    skip_a[:, :, 0], skip_a[0, 0, 1, 0], skip_b[...] = 0x3F80 << shift, 0x0001 << shift, 0x3F80 << shift
    run = await tb.run_passes([(inf_a, inf_b), (skip_a, skip_b)], names=["subnormal x -inf", "subnormal step"])
    # Only step 0 is non-zero once the subnormal counts as zero: each cycle consumes H+1 steps (3 cycles at H=2).
    assert run.cycles.tolist() == [1, -(-8 // (p["lookahead"] + 1))], run.cycles
    assert (tb.design.golden(p, inf_a, inf_b)[0] == 0).all()


@cocotb.test()
@cocotb.parametrize(PAIRED)
async def short_passes(dut, idle, backpressure):
    """Passes of 1, 2, H+1 and H+2 steps: a chunk ends passes and starts others, a window holds several passes' ends.

    Without stalls every chunk holds H+1 steps and every batch a multiple of H+1, so
    passes (even of one step, a result each cycle) run back to back; with stalls the
    chunks hold 1..H+1 steps and the sink's backpressure holds decisions whose steps
    the window has already freed.
    """
    tb = TileTB(dut, idle, backpressure)
    await tb.reset()
    c, p = tb.config, tb.params
    width = p["lookahead"] + 1
    rng = random.Random(c["seed"])
    sizes = None if idle == 0 else (rng.randint(1, width) for _ in itertools.count())
    lengths = [1, 2, width, width + 1]
    batches = [tuple(operand_bits(x, p["fmt"]) for x in operands("random50", 2 * width, p["rows"], p["cols"], steps,
                                                                 p["lanes"], p["fmt"], c["seed"] + steps))
               for steps in lengths]
    run = await tb.run_passes(batches, sizes, names=[f"{steps}-step passes" for steps in lengths])
    if idle == backpressure == 0:
        tb.check_back_to_back(run)


@cocotb.test()
@cocotb.parametrize(PAIRED)
async def uneven_streams(dut, idle, backpressure):
    """Passes of uneven lengths, dense and all zero, one per batch: with two threads each thread's passes run while
    the other's are longer or done (its cycles idle), and the odd last pass runs alone on thread 0.

    Without stalls (chunks of H+1 steps, every pass a multiple of them) each pass's result comes a fixed time after
    the model ends it (``tb.ends``): the tile's latency after the cycle it is decided on, the first chunk decided
    ``threads`` cycles after it is accepted (the window's loop of one register per thread).
    """
    tb = TileTB(dut, idle, backpressure)
    await tb.reset()
    c, p = tb.config, tb.params
    width = p["lookahead"] + 1
    plan = [("random0", 6), ("random50", 1), ("random100", 1), ("random0", 8), ("random50", 1), ("random100", 2),
            ("random0", 2), ("random25", 1), ("random75", 3)]
    batches = [tuple(operand_bits(x, p["fmt"]) for x in operands(case, 1, p["rows"], p["cols"], chunks * width,
                                                                 p["lanes"], p["fmt"], c["seed"] + index))
               for index, (case, chunks) in enumerate(plan)]
    rng = random.Random(c["seed"])
    sizes = None if idle == 0 else (rng.randint(1, width) for _ in itertools.count())
    run = await tb.run_passes(batches, sizes, names=[f"{case} x{chunks * width}" for case, chunks in plan])
    if idle == backpressure == 0:
        tb.check_back_to_back(run)
        fill = run.arrivals[0] - tb.ends(run)[0] - tb.latency - tb.accepted()[0]
        assert fill == p["threads"], f"the first chunk decided {fill} cycles after its transfer, not {p['threads']}"
