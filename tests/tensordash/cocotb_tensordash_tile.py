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

    def passes(self, case, seed):
        c = self.config
        return operands(case, c["passes"], c["rows"], c["cols"], c["steps"], c["lanes"], c["format"], seed)

    async def run_cases(self, cases, sizes=None):
        """Stream every case's passes back to back, check each result; returns the reference cycles in order."""
        c = self.config
        batches = [(case, *self.passes(case, c["seed"] + index)) for index, case in enumerate(cases)]
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


@cocotb.test()
async def sparsity_cases_back_to_back(dut):
    """Full chunks, no stalls: every case agrees, and results arrive exactly a pass's cycles apart."""
    config = tb_config()
    tb = TileTB(dut, config, stall=0.0)
    await tb.reset()
    cycles = await tb.run_cases(CASES)
    arrivals = np.round(np.array(tb.sink.times) / PERIOD_NS).astype(int)
    assert np.diff(arrivals).tolist() == cycles[1:], "the tile idled between scheduled cycles"
    dut._log.info(f"{len(cycles)} passes: bit-exact, RTL cycles == reference cycles, {sum(cycles)} cycles back to back")


@cocotb.test()
async def stalls_and_partial_chunks(dut):
    """Random idle/backpressure and chunks of 1..H+1 steps change nothing but timing."""
    config = tb_config()
    tb = TileTB(dut, config, stall=0.3)
    await tb.reset()
    rng = random.Random(config["seed"])
    sizes = (rng.randint(1, config["lookahead"] + 1) for _ in itertools.count())
    cases = ["random50", "random90", "zero_row", "relu_gradients"]
    cycles = await tb.run_cases(cases, sizes)
    dut._log.info(f"{len(cycles)} passes with stalls: bit-exact, RTL cycles == reference cycles")


@cocotb.test()
async def special_values(dut):
    """Inf/NaN/signed zeros/subnormals: subnormal scheduled values count as zeros (DAZ) and are skipped."""
    config = tb_config()
    tb = TileTB(dut, config, stall=0.0)
    await tb.reset()
    c = config
    gen = np.random.default_rng(c["seed"])
    special = np.array([0.0, -0.0, 1e-40, -1e-40, np.inf, -np.inf, np.nan, 3.0e38, 1.0, -2.5], np.float32)
    a = torch.from_numpy(gen.choice(special, (c["passes"], c["rows"], c["steps"], c["lanes"])))
    b = torch.from_numpy(gen.choice(special, (c["passes"], c["cols"], c["steps"], c["lanes"])))
    a, b = quantize(a, c["format"]), quantize(b, c["format"])
    tb.source.send(chunks(a, b, c["lookahead"], c["format"]))
    sched = td.schedule((a != 0).numpy(), c["pattern"], c["lookahead"])
    want = fp32_bits(td.tile_outputs(sched, a, b, c["format"])).numpy()
    for p in range(a.shape[0]):
        sums, cycles = decode_result(await tb.sink.recv(), c["rows"], c["cols"])
        assert cycles == sched.cycles[p] and np.array_equal(sums, want[p]), f"special pass {p}"
