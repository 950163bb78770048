"""TensorDash RTL in Amaranth's simulator: the row scheduler and the tile against the reference model."""

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from amaranth.sim import Simulator

from dashraker.designs import TENSORDASH
from dashraker.designs.tensordash import SCHEDULERS
from dashraker.hw.tensordash import Scheduler
from dashraker.models import interconnect
from dashraker.models import tensordash as td
from dashraker.models.numerics import fp32_bits
from dashraker.sim import codec
from dashraker.sim.amaranth_streams import stream_get, stream_put
from dashraker.sim.stimulus import operand_bits

sys.path.insert(0, str(Path(__file__).parent))
from tensordash_stimulus import operands  # noqa: E402


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("lanes, pattern", [(16, "T<2,5>"), (8, "T<2,5>"), (6, "(0,0),(1,0),(1,-1),(1,2),(2,1)")])
def test_scheduler_first_cycle_matches_reference(lanes, pattern, scheduler):
    lookahead = interconnect.pattern_lookahead(pattern)
    dut = Scheduler(lanes, lookahead, pattern, scheduler)
    rng = np.random.default_rng(lanes)
    windows = rng.random((300, 1, lookahead + 1, lanes)) < rng.random((300, 1, 1, 1))
    sched = td.schedule(windows, pattern, lookahead, scheduler)
    step, lane = sched.source
    weights = 1 << np.arange(lanes)

    async def testbench(ctx):
        for p, window in enumerate(windows[:, 0]):
            for s in range(lookahead + 1):
                ctx.set(dut.window[s], int(window[s] @ weights))
            taken = window.copy()
            for i in range(lanes):
                select = ctx.get(dut.select[i])
                assert select["valid"] == (sched.select[p, 0, 0, i] >= 0), (p, i)
                if select["valid"]:
                    assert select["index"] == sched.select[p, 0, 0, i], (p, i)
                    taken[step[p, 0, 0, i], lane[p, 0, 0, i]] = False
            for s in range(lookahead + 1):
                assert ctx.get(dut.remaining[s]) == int(taken[s] @ weights), (p, s)

    sim = Simulator(dut)
    sim.add_testbench(testbench)
    sim.run()


def run_tile(tile, a, b, sizes=None, idle=0.0, backpressure=0.0, seed=0):
    """Drive ``tile`` with the passes of (a, b); returns (result payloads, clock edge of each result)."""
    bits = codec.step_transfers(tile.steps.payload.shape(), operand_bits(a, tile.format),
                                operand_bits(b, tile.format), sizes)
    rng = np.random.default_rng(seed)
    received = {}

    async def source(ctx):
        await stream_put(ctx, tile.steps, codec.to_ints(bits), rng, idle)

    async def sink(ctx):
        received["results"] = await stream_get(ctx, tile.results, a.shape[0], rng, backpressure)

    sim = Simulator(tile)
    sim.add_clock(1e-6)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run()
    return received["results"]


def check_tile(tile, a, b, results):
    sched = td.schedule(a.numpy(), tile.pattern, tile.lookahead, tile.scheduler)  # zero as the scheduler defines it
    expected = fp32_bits(td.tile_outputs(sched, a, b, tile.format, tile.accumulators, tile.dot)).numpy()
    layout = tile.results.payload.shape()
    got = codec.decode(layout, codec.from_ints(results, layout.size))
    np.testing.assert_array_equal(got["cycles"], sched.cycles, err_msg="RTL cycles against the reference's")
    np.testing.assert_array_equal(got["outputs"], expected)
    return sched.cycles


def test_tile_back_to_back_passes_take_reference_cycles():
    tile = TENSORDASH.tile(TENSORDASH.params(rows=2, cols=1, lanes=8, fmt="fp32"))
    a, b = operands("random75", passes=6, rows=2, cols=1, steps=9, lanes=8, fmt="fp32", seed=3)
    a[2] = 0  # an all-zero pass
    results, times = run_tile(tile, a, b)
    cycles = check_tile(tile, a, b, results)
    # Full chunks keep the window full: results come exactly the passes' cycles apart.
    assert np.diff(times).tolist() == cycles[1:].tolist()


@pytest.mark.slow  # minutes in Amaranth's simulator; the quick cocotb cases stall and split chunks on both simulators
def test_tile_with_partial_chunks_and_stalls():
    tile = TENSORDASH.tile(TENSORDASH.params(rows=2, cols=2, lanes=4, pattern="(0,0),(1,0),(1,1)", lookahead=1))
    a, b = operands("random50", passes=8, rows=2, cols=2, steps=5, lanes=4, fmt="bf16", seed=5)
    a[:, :, 1] = torch.where(torch.arange(4) < 2, a[:, :, 1], 0)
    sizes = itertools.cycle([1, 2, 2, 1, 1])
    results, _ = run_tile(tile, a, b, sizes=sizes, idle=0.3, backpressure=0.4, seed=7)
    check_tile(tile, a, b, results)


@pytest.mark.parametrize("steps", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(4, marks=pytest.mark.slow)])
def test_tile_with_short_passes_and_stalls(steps):
    """Passes shorter than the window, chunks of 1..H+1 steps, and stalls holding decisions whose steps are freed."""
    tile = TENSORDASH.tile(TENSORDASH.params(rows=2, cols=2, lanes=8))
    a, b = operands("random75", passes=12, rows=2, cols=2, steps=steps, lanes=8, fmt="bf16", seed=steps)
    sizes = itertools.cycle([3, 1, 2, 3, 3, 2, 1])
    results, _ = run_tile(tile, a, b, sizes=sizes, idle=0.2, backpressure=0.5, seed=steps)
    check_tile(tile, a, b, results)


@pytest.mark.slow  # minutes each on the 2-core machine; the quick cocotb cases run both allocators' tiles
@pytest.mark.parametrize("scheduler", [name for name in SCHEDULERS if name != "greedy"])
def test_allocator_tile_with_stalls_takes_its_reference_cycles(scheduler):
    """The separable allocators' tile: outputs and cycles of their own reference model, full chunks back to back
    (results exactly the passes' cycles apart), then partial chunks with idle and backpressure."""
    tile = TENSORDASH.tile(TENSORDASH.params(rows=2, cols=1, lanes=8, scheduler=scheduler))
    a, b = operands("random50", passes=6, rows=2, cols=1, steps=9, lanes=8, fmt="bf16", seed=11)
    a[2] = 0
    results, times = run_tile(tile, a, b)
    cycles = check_tile(tile, a, b, results)
    assert np.diff(times).tolist() == cycles[1:].tolist()
    results, _ = run_tile(tile, a, b, sizes=itertools.cycle([3, 1, 2]), idle=0.3, backpressure=0.4, seed=2)
    check_tile(tile, a, b, results)
