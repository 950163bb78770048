"""cocotb test of the dense baseline tile: results bit-exact and cycle-exact against the golden model."""

import json
import time

import cocotb
import numpy as np

from dashraker.sim.stimulus import operand_bits, training_step_passes
from dashraker.sim.tile_tb import CROSSED, PAIRED, TileTB, single_pass_batches


def _batches(tb, passes):
    """Passes of fp32 values as operand bits of the tile's format, each its own batch (they differ in steps)."""
    fmt = tb.params["fmt"]
    return single_pass_batches((operand_bits(a, fmt), operand_bits(b, fmt)) for a, b in passes)


def _random_passes(tb, rng, count):
    """Passes of 1, L - 1, L and L + 1 steps (L interleaved accumulators), then of random lengths."""
    rows, cols, lanes = tb.params["rows"], tb.params["cols"], tb.params["lanes"]
    accumulators = max(tb.params["accumulators"], 1)  # the fixed-point accumulator (0) has no partials
    lengths = sorted({1, max(accumulators - 1, 1), accumulators, accumulators + 1})
    passes = []
    for index in range(count):
        steps = lengths[index] if index < len(lengths) else int(rng.integers(1, 13))
        a = rng.standard_normal((rows, steps, lanes)).astype(np.float32) * 10.0 ** rng.integers(-3, 4)
        b = rng.standard_normal((cols, steps, lanes)).astype(np.float32)
        if index % 3 == 1:  # ReLU-like zeros and exact cancellations
            a = np.maximum(a, 0)
            b[:, :, 1::2] = -b[:, :, 0::2][:, :, : b[:, :, 1::2].shape[2]]
        passes.append((a, b))
    special = np.array([0.0, -0.0, 1e-40, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1.0, 2.0**-64, 2.0**64],
                       np.float32)  # with 2^+-64: products beyond fp32's range, tiny ones flushed
    passes.append((rng.choice(special, (rows, 3, lanes)), rng.choice(special, (cols, 3, lanes))))
    return passes


def _dense_passes(tb, rng, steps, count):
    """``count`` passes of each number of ``steps``, normal values without zeros."""
    rows, cols, lanes = tb.params["rows"], tb.params["cols"], tb.params["lanes"]
    return [(rng.standard_normal((rows, s, lanes)).astype(np.float32),
             rng.standard_normal((cols, s, lanes)).astype(np.float32)) for s in steps for _ in range(count)]


@cocotb.test()
@cocotb.parametrize(**CROSSED)
async def random_and_special_values(dut, idle, backpressure):
    tb = TileTB(dut, idle, backpressure)
    await tb.reset()
    rng = np.random.default_rng(tb.config["seed"])
    await tb.run_passes(_batches(tb, _random_passes(tb, rng, tb.config["passes"])))


@cocotb.test()
@cocotb.parametrize(PAIRED)
async def real_training_tensors(dut, idle, backpressure):
    tb = TileTB(dut, idle, backpressure)
    await tb.reset()
    p = tb.params
    await tb.run_passes(_batches(tb, training_step_passes(p["rows"], p["cols"], p["lanes"], forward_tiles=2)))


@cocotb.test()
async def cycle_exact_pass_timing(dut):
    """Without stalls a pass of S steps is accepted in S consecutive cycles; its result follows ``latency`` cycles
    after, so results are the passes' steps apart."""
    tb = TileTB(dut)
    await tb.reset()
    passes = _dense_passes(tb, np.random.default_rng(tb.config["seed"] + 7), (5, 1, 9), 1)
    run = await tb.run_passes(_batches(tb, passes))
    accepted = tb.accepted()
    assert np.all(np.diff(accepted) == 1), f"steps were not accepted back to back: {accepted}"
    last_steps = np.cumsum([a.shape[1] for a, _ in passes]) - 1  # one step per transfer
    latency = run.arrivals - accepted[last_steps]
    assert np.all(latency == tb.latency), f"result latency {latency}, expected {tb.latency}"
    tb.check_back_to_back(run)


@cocotb.test()
async def sustained_stream(dut):
    """A long stream of back-to-back passes, checked like the others and timed (simulated cycles per second)."""
    tb = TileTB(dut)
    await tb.reset()
    steps, count = 16, tb.config.get("stream_passes", 4)
    passes = _dense_passes(tb, np.random.default_rng(tb.config["seed"] + 3), (steps,), count)
    start = time.perf_counter()
    tb.check_back_to_back(await tb.run_passes(_batches(tb, passes)))
    seconds = time.perf_counter() - start
    if "speed_report" in tb.config:
        with open(tb.config["speed_report"], "w") as report:
            json.dump({"cycles": steps * count, "seconds": seconds}, report)
