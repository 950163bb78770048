"""The fp32 accumulator of a PE: L interleaved partial sums through one pipelined adder (SPEC section 2)."""

import operator
from functools import reduce

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.numerics.adder_tree import AdderTree, tree_levels
from dashraker.hw.numerics.float import FP32_LAYOUT
from dashraker.hw.numerics.fp_add import ADDER_CUTS, FPAdder
from dashraker.hw.numerics.pipeline import delayed

__all__ = ["Accumulator", "ACCUMULATOR_SIGNATURE", "accumulator_latency"]

# The ports every accumulator of ``MacUnit`` has (``Accumulator``, ``FixedPointAccumulator``).
ACCUMULATOR_SIGNATURE = wiring.Signature({
    "valid": In(1),
    "last": In(1),
    "sum": In(FP32_LAYOUT),
    "result": Out(FP32_LAYOUT),
    "result_valid": Out(1),
})


def accumulator_latency(accumulators, stages):
    """Cycles from a pass's last sum entering an ``Accumulator`` to its result."""
    return stages + (accumulators > 1) + tree_levels(accumulators) * max(stages, 1) + 1


class Accumulator(wiring.Component):
    """Accumulates the sums of a pass into L interleaved fp32 partials, combined at the end of the pass.

    The pass's t-th sum (counting valid ones only) is added to partial t mod L; every
    partial starts the pass at +0.0 and adds its sums in order. One adder with P
    pipeline stages (P < L) serves all partials: its a input, registered a cycle
    ahead so that no multiplexer stands before the adder's first stage, is +0 for
    the pass's first L sums, else partial t mod L (forwarded from the adder's output
    when it is written back in that cycle); its sum is written back P cycles after
    it entered, and the next sum for the same partial comes at least L >= P + 1
    valid sums later, so it never reads a stale partial. P cycles after the pass's last
    sum entered, every partial is captured (that sum bypassed in) into a register
    that feeds a balanced fp32 tree over the L partials (``AdderTree``, neighbours
    pairwise, as the golden ``models.baseline.accumulate``) and cleared to +0.0, so a partial the pass never
    used (a pass shorter than L) adds +0.0; the next pass's first write comes a cycle
    later at the earliest. Passes may be of any length and follow each other with
    or without idle cycles between sums.

    With L = 1 and P = 0 this is the one-cycle loop ``acc = acc + sum`` (through the
    operand register): the order of SPEC section 2 before its 2026-11 amendment,
    which caps the clock at the combinational adder's delay.

    Parameters
    ----------
    accumulators : int
        Partials L, at least 1.
    stages : int
        Pipeline stages P of the adders (``FPAdder``), 0 to min(L - 1, 5); the
        combining tree's adders have ``max(P, 1)``.

    Attributes
    ----------
    latency : int
        Cycles from a pass's last sum on ``sum`` to its ``result``:
        ``P + 1 + ceil(log2(L)) * max(P, 1) + 1``, one fewer for L = 1 (no capture
        register) (``accumulator_latency``).

    Ports
    -----
    valid : In(1)
        A sum is on ``sum``.
    last : In(1)
        It is the last of its pass.
    sum : In(FP32_LAYOUT)
        The sum to accumulate (a step's adder-tree sum).
    result : Out(FP32_LAYOUT)
        The accumulated sum of the last pass.
    result_valid : Out(1)
        ``result`` holds a new pass result (high for one cycle per pass; ``result`` keeps it until the next).
    """

    def __init__(self, accumulators, stages):
        if not isinstance(accumulators, int) or accumulators < 1:
            raise ValueError(f"Accumulators must be a positive integer, not {accumulators!r}")
        if stages not in ADDER_CUTS or stages >= accumulators:
            raise ValueError(f"Accumulator stages must be one of {', '.join(map(str, ADDER_CUTS))} and fewer than the "
                             f"{accumulators} accumulators, not {stages!r}")
        self.accumulators, self.stages = accumulators, stages
        self.latency = accumulator_latency(accumulators, stages)
        super().__init__(ACCUMULATOR_SIGNATURE)

    def elaborate(self, platform):
        m = Module()
        count = self.accumulators
        m.submodules.add = add = FPAdder(self.stages)
        m.submodules.combine = combine = AdderTree(count, max(self.stages, 1))

        # The partial of the entering sum, and whether every partial has had a sum this pass; their values
        # for the next cycle's sum.
        index = Signal(range(max(count, 2)))  # a bit at least: Verilator refuses zero-width vectors
        filled = Signal()
        wraps = index == count - 1
        next_index = Mux(self.valid, Mux(self.last | wraps, 0, index + 1), index)
        next_filled = Mux(self.valid, ~self.last & (filled | wraps), filled)
        m.d.sync += [index.eq(next_index), filled.eq(next_filled)]

        # The partial, valid and last flags of the sum coming out of the adder.
        out_index = delayed(m, index, self.stages, "out_index")
        out_valid = delayed(m, self.valid, self.stages, "out_valid")
        out_last = delayed(m, self.last, self.stages, "out_last")
        writes = [out_valid & (out_index == partial) for partial in range(count)]

        # The next sum's a operand, registered a cycle ahead: +0 while the pass fills the partials, else its
        # partial as written back this cycle. An AND-OR multiplexer: the index's spare codes select nothing.
        partials = [Signal(FP32_LAYOUT, name=f"partial{partial}") for partial in range(count)]
        stored = reduce(operator.or_, (Mux(next_index == partial, value.as_value(), 0)
                                       for partial, value in enumerate(partials)))
        operand = Signal(FP32_LAYOUT)
        m.d.sync += operand.eq(Mux(next_filled, Mux(out_valid & (out_index == next_index), add.sum, stored), 0))
        m.d.comb += [add.a.eq(operand), add.b.eq(self.sum)]
        for partial, write in zip(partials, writes):
            with m.If(write):
                m.d.sync += partial.eq(add.sum)
        with m.If(out_valid & out_last):
            m.d.sync += [partial.eq(0) for partial in partials]

        # The pass's partials, its last sum bypassed in; registered before the tree when there is one.
        captured = [Mux(write, add.sum, partial) for partial, write in zip(partials, writes)]
        capture = out_valid & out_last
        if count > 1:
            registers = [Signal(FP32_LAYOUT, name=f"captured{partial}") for partial in range(count)]
            with m.If(capture):
                m.d.sync += [register.eq(value) for register, value in zip(registers, captured)]
            captured, capture = registers, delayed(m, capture, 1, "capture")
        m.d.comb += [combine.operands[partial].eq(value) for partial, value in enumerate(captured)]

        done = delayed(m, capture, combine.latency, "done")
        m.d.sync += self.result_valid.eq(done)
        with m.If(done):
            m.d.sync += self.result.eq(combine.sum)
        return m
