"""cocotb test of the TensorDash tile: results bit-exact against the golden model, cycles equal to the reference model's."""

import itertools
import random

import cocotb
import numpy as np
import torch

from dashraker.models import tensordash as td
from dashraker.models.numerics import fp32_bits, quantize
from dashraker.sim.runner import tb_config
from dashraker.sim.streams import TB, StreamSink, StreamSource
from tensordash_stimulus import CASES, chunks, decode_result, operands

PERIOD_NS = 10


class TileTB(TB):
    def __init__(self, dut, config, stall):
        super().__init__(dut, period_ns=PERIOD_NS)
        self.config = config
        self.source = StreamSource(dut, "steps", dut.clk, stall=stall, seed=config["seed"])
        self.sink = StreamSink(dut, "results", dut.clk, stall=stall, seed=config["seed"] + 1)

    def case_batches(self, cases):
        """(case, scheduled, partner) operands of each named stimulus case."""
        c = self.config
        return [(case, *operands(case, c["passes"], c["rows"], c["cols"], c["steps"], c["lanes"], c["format"],
                                 c["seed"] + index)) for index, case in enumerate(cases)]

    async def run_batches(self, batches, sizes=None):
        """Stream every batch's passes back to back, check each result; returns the reference cycles in order."""
        c = self.config
        for _, a, b in batches:
            self.source.send(chunks(a, b, c["lookahead"], c["format"], sizes))
        all_cycles = []
        for case, a, b in batches:
            sched = td.schedule((a != 0).numpy(), c["pattern"], c["lookahead"])
            want = fp32_bits(td.tile_outputs(sched, a, b, c["format"])).numpy()
            for p in range(a.shape[0]):
                sums, cycles = decode_result(await self.sink.recv(), c["rows"], c["cols"])
                assert cycles == sched.cycles[p], f"{case} pass {p}: RTL {cycles} cycles, reference {sched.cycles[p]}"
                assert np.array_equal(sums, want[p]), (
                    f"{case} pass {p}: {int((sums != want[p]).sum())} PE results differ\n"
                    f"got  {[hex(v) for v in sums.ravel()[:8]]}\nwant {[hex(v) for v in want[p].ravel()[:8]]}")
            all_cycles.extend(sched.cycles.tolist())
            self.dut._log.info(f"{case}: {a.shape[0]} passes, {a.shape[2]} steps each, cycles {sched.cycles.tolist()}: "
                               "outputs and cycles agree")
        await self.source.wait()
        return all_cycles


async def _started(dut, stall):
    tb = TileTB(dut, tb_config(), stall)
    await tb.reset()
    return tb


@cocotb.test()
async def sparsity_cases_back_to_back(dut):
    """Full chunks, no stalls: every case agrees, and results arrive exactly a pass's cycles apart."""
    tb = await _started(dut, stall=0.0)
    cycles = await tb.run_batches(tb.case_batches(CASES))
    arrivals = np.round(np.array(tb.sink.times) / PERIOD_NS).astype(int)
    assert np.diff(arrivals).tolist() == cycles[1:], "the tile idled between scheduled cycles"
    dut._log.info(f"{len(cycles)} passes: bit-exact, RTL cycles == reference cycles, {sum(cycles)} cycles back to back")


@cocotb.test()
async def stalls_and_partial_chunks(dut):
    """Random idle/backpressure and chunks of 1..H+1 steps change nothing but timing."""
    tb = await _started(dut, stall=0.3)
    rng = random.Random(tb.config["seed"])
    sizes = (rng.randint(1, tb.config["lookahead"] + 1) for _ in itertools.count())
    cycles = await tb.run_batches(tb.case_batches(["random50", "random90", "zero_row", "relu_gradients"]), sizes)
    dut._log.info(f"{len(cycles)} passes with stalls: bit-exact, RTL cycles == reference cycles")


@cocotb.test()
async def special_values(dut):
    """Inf/NaN/signed zeros/subnormals: subnormal scheduled values count as zeros (DAZ) and are skipped."""
    tb = await _started(dut, stall=0.0)
    c = tb.config
    gen = np.random.default_rng(c["seed"])
    special = np.array([0.0, -0.0, 1e-40, -1e-40, np.inf, -np.inf, np.nan, 3.0e38, 1.0, -2.5], np.float32)
    a = quantize(torch.from_numpy(gen.choice(special, (c["passes"], c["rows"], c["steps"], c["lanes"]))), c["format"])
    b = quantize(torch.from_numpy(gen.choice(special, (c["passes"], c["cols"], c["steps"], c["lanes"]))), c["format"])
    await tb.run_batches([("special", a, b)])
