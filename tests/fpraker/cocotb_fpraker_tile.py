"""cocotb test of the FPRaker tile: results and cycle counts bit-exact against the golden model."""

import cocotb
import numpy as np
import torch
from cocotb.triggers import RisingEdge

from dashraker.models.fpraker import tile as golden_tile
from dashraker.models.numerics import fp32_bits, to_bf16_bits
from dashraker.sim.payload import step_payloads, unpack_array
from dashraker.sim.runner import tb_config
from dashraker.sim.stimulus import training_step_passes
from dashraker.sim.streams import TB, StreamSink, StreamSource
from fpraker_stimulus import FIVE_TERM_SIGNIFICANDS, random_bits, real_bits

PERIOD_NS = 10


class TileTB(TB):
    def __init__(self, dut, config, stall):
        super().__init__(dut, PERIOD_NS)
        self.config = config
        self.source = StreamSource(dut, "steps", dut.clk, stall=stall, seed=config["seed"])
        self.sink = StreamSink(dut, "results", dut.clk, stall=stall, seed=config["seed"] + 1)

    async def run_passes(self, passes):
        """Stream every pass; each result and cycle count must equal the golden model's. Returns the cycles."""
        rows, cols = self.config["rows"], self.config["cols"]
        for a, b in passes:
            self.source.send(step_payloads(a, b, 16))
        cycles = []
        for index, (a, b) in enumerate(passes):
            payload = await self.sink.recv()
            got = unpack_array(payload, 32, (rows, cols))
            got_cycles = payload >> (rows * cols * 32)
            want = golden_tile(a[None], b[None], self.config["guard_bits"], self.config["zero_block_cycles"])
            want_bits = fp32_bits(want.outputs[0]).numpy()
            assert np.array_equal(got, want_bits), (
                f"pass {index}: {int((got != want_bits).sum())} PE results differ\n"
                f"got  {[hex(v) for v in got.ravel()]}\nwant {[hex(v) for v in want_bits.ravel()]}")
            assert got_cycles == int(want.cycles[0]), f"pass {index}: {got_cycles} cycles, golden {int(want.cycles[0])}"
            cycles.append(got_cycles)
        await self.source.wait()
        assert not self.sink.queue, "results beyond the passes sent"
        return cycles


def _random_passes(config, rng, count):
    """Passes over every corner: zeros, signed zeros, subnormals, Inf, NaN, 5-term values, wide spreads."""
    rows, cols, lanes = config["rows"], config["cols"], config["lanes"]
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


def _real_passes(config, rng):
    """Slices of real training tensors: a forward and a weight-gradient pass, and random picks."""
    rows, cols, lanes = config["rows"], config["cols"], config["lanes"]
    cut = training_step_passes(rows, cols, lanes)
    bits = [(to_bf16_bits(torch.from_numpy(a)).numpy(), to_bf16_bits(torch.from_numpy(b)).numpy()) for a, b in cut]
    bits.append((real_bits(rng, (rows, 6, lanes)), real_bits(rng, (cols, 6, lanes))))
    return bits


@cocotb.test()
async def random_and_corner_values(dut):
    config = tb_config()
    tb = TileTB(dut, config, stall=0.0)
    await tb.reset()
    await tb.run_passes(_random_passes(config, np.random.default_rng(config["seed"]), config["passes"]))


@cocotb.test()
async def real_training_tensors_with_stalls(dut):
    config = tb_config()
    tb = TileTB(dut, config, stall=0.3)
    await tb.reset()
    rng = np.random.default_rng(config["seed"] + 3)
    await tb.run_passes(_real_passes(config, rng) + _random_passes(config, rng, 4))


@cocotb.test()
async def blocks_run_back_to_back(dut):
    """Without stalls, consecutive results are exactly the later pass's cycle count apart (all blocks counted)."""
    config = tb_config()
    if config["zero_block_cycles"] == 0:
        return  # skipped all-zero blocks still take a clock in this RTL: the count is not the time
    tb = TileTB(dut, config, stall=0.0)
    await tb.reset()
    cycles = await tb.run_passes(_random_passes(config, np.random.default_rng(config["seed"] + 9), 6))
    for _ in range(2):
        await RisingEdge(dut.clk)
    gaps = np.diff(np.round(np.array(tb.sink.times) / PERIOD_NS)).astype(int)
    assert gaps.tolist() == cycles[1:], f"result spacing {gaps.tolist()}, pass cycles {cycles[1:]}"
