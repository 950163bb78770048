"""cocotb test of the dense baseline tile: results bit-exact and cycle-exact against the golden model."""

import random

import cocotb
import numpy as np
import torch
from cocotb.triggers import RisingEdge

from dashraker.models.baseline import dense_tile
from dashraker.models.numerics import fp32_bits, fp32_from_bits, quantize, to_bf16_bits
from dashraker.sim.payload import step_payloads, unpack_array
from dashraker.sim.runner import tb_config
from dashraker.sim.stimulus import training_step_passes
from dashraker.sim.streams import TB, StreamSink, StreamSource


def _bits(values, fmt):
    values = torch.as_tensor(np.asarray(values, dtype=np.float32))
    return (to_bf16_bits(values) if fmt == "bf16" else fp32_bits(quantize(values, fmt))).numpy()


class TileTB(TB):
    def __init__(self, dut, config, stall):
        super().__init__(dut)
        self.config = config
        self.width = 16 if config["format"] == "bf16" else 32
        self.source = StreamSource(dut, "steps", dut.clk, stall=stall, seed=config["seed"])
        self.sink = StreamSink(dut, "results", dut.clk, stall=stall, seed=config["seed"] + 1)

    async def run_passes(self, passes):
        """Stream every pass, compare each result with the golden model; returns (accept, result) times."""
        for a, b in passes:
            fmt = self.config["format"]
            self.source.send(step_payloads(_bits(a, fmt), _bits(b, fmt), self.width))
        for index, (a, b) in enumerate(passes):
            got = unpack_array(await self.sink.recv(), 32, (a.shape[0], b.shape[0]))
            want = fp32_bits(dense_tile(torch.from_numpy(a), torch.from_numpy(b), self.config["format"])).numpy()
            assert np.array_equal(got, want), (
                f"pass {index}: {int((got != want).sum())} PE results differ\n"
                f"got  {[hex(v) for v in got.ravel()[:8]]}\nwant {[hex(v) for v in want.ravel()[:8]]}")
        await self.source.wait()


def _random_passes(config, rng, count):
    rows, cols, lanes = config["rows"], config["cols"], config["lanes"]
    passes = []
    for index in range(count):
        steps = int(rng.integers(1, 13))
        a = rng.standard_normal((rows, steps, lanes)).astype(np.float32) * 10.0 ** rng.integers(-3, 4)
        b = rng.standard_normal((cols, steps, lanes)).astype(np.float32)
        if index % 3 == 1:  # ReLU-like zeros and exact cancellations
            a = np.maximum(a, 0)
            b[:, :, 1::2] = -b[:, :, 0::2][:, :, : b[:, :, 1::2].shape[2]]
        passes.append((a, b))
    special = np.array([0.0, -0.0, 1e-40, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1.0], np.float32)
    passes.append((rng.choice(special, (rows, 3, lanes)), rng.choice(special, (cols, 3, lanes))))
    return passes


@cocotb.test()
async def random_and_special_values(dut):
    config = tb_config()
    tb = TileTB(dut, config, stall=0.0)
    await tb.reset()
    await tb.run_passes(_random_passes(config, np.random.default_rng(config["seed"]), config["passes"]))


@cocotb.test()
async def real_training_tensors_with_stalls(dut):
    config = tb_config()
    tb = TileTB(dut, config, stall=0.3)
    await tb.reset()
    await tb.run_passes(training_step_passes(config["rows"], config["cols"], config["lanes"], forward_tiles=2))


@cocotb.test()
async def cycle_exact_pass_timing(dut):
    """Without stalls a pass of S steps is accepted in S consecutive cycles; its result follows ``latency`` cycles after."""
    config = tb_config()
    tb = TileTB(dut, config, stall=0.0)
    await tb.reset()
    rng = np.random.default_rng(config["seed"] + 7)
    passes = [(rng.standard_normal((config["rows"], steps, config["lanes"])).astype(np.float32),
               rng.standard_normal((config["cols"], steps, config["lanes"])).astype(np.float32)) for steps in (5, 1, 9)]
    await tb.run_passes(passes)
    for _ in range(2):
        await RisingEdge(dut.clk)
    period = 10
    accepted = np.round(np.array(tb.source.times) / period)
    assert np.all(np.diff(accepted) == 1), f"steps were not accepted back to back: {accepted}"
    last_steps = np.cumsum([a.shape[1] for a, _ in passes]) - 1
    latency = np.round(np.array(tb.sink.times) / period) - accepted[last_steps]
    assert np.all(latency == config["latency"]), f"result latency {latency}, expected {config['latency']}"


@cocotb.test()
async def sustained_stream(dut):
    """A long stream of back-to-back passes, checked like the others and timed (simulated cycles per second)."""
    import json
    import time

    config = tb_config()
    tb = TileTB(dut, config, stall=0.0)
    await tb.reset()
    rng = np.random.default_rng(config["seed"] + 3)
    steps, count = 16, config.get("stream_passes", 4)
    passes = [(rng.standard_normal((config["rows"], steps, config["lanes"])).astype(np.float32),
               rng.standard_normal((config["cols"], steps, config["lanes"])).astype(np.float32)) for _ in range(count)]
    start = time.perf_counter()
    await tb.run_passes(passes)
    seconds = time.perf_counter() - start
    if "speed_report" in config:
        with open(config["speed_report"], "w") as report:
            json.dump({"cycles": steps * count, "seconds": seconds}, report)
