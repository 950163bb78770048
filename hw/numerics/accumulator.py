"""The fp32 accumulator of a PE: L interleaved partial sums through one pipelined adder (SPEC section 2)."""

import operator
from functools import reduce

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.numerics.adder_tree import AdderTree, tree_levels
from dashraker.hw.numerics.float import FP32_LAYOUT
from dashraker.hw.numerics.fp_add import ADDER_CUTS, FPAdder
from dashraker.hw.numerics.pipeline import delayed

__all__ = ["Accumulator", "ACCUMULATOR_SIGNATURE", "CONTEXTS", "accumulator_latency", "check_contexts", "context_copies"]

# Accumulator contexts: one per pass stream, the streams' sums interleaved cycle by cycle (SPEC section 3, threads).
CONTEXTS = (1, 2)

# The ports every accumulator of ``MacUnit`` has (``Accumulator``, ``FixedPointAccumulator``).
ACCUMULATOR_SIGNATURE = wiring.Signature({
    "valid": In(1),
    "last": In(1),
    "sum": In(FP32_LAYOUT),
    "result": Out(FP32_LAYOUT),
    "result_valid": Out(1),
})


def check_contexts(owner, contexts):
    """``ValueError`` naming ``owner`` unless ``contexts`` is one of ``CONTEXTS``."""
    if isinstance(contexts, bool) or contexts not in CONTEXTS:
        raise ValueError(f"{owner} contexts must be one of {CONTEXTS}, not {contexts!r}")


def context_copies(m, registers, contexts):
    """What an accumulate loop reads of its state ``registers``: the registers themselves with one context; with two,
    a copy of each a cycle behind (``<name>_other``), the loop's registers doubled in series (C-slow). The two
    contexts' sums come on alternate cycles, so on each cycle the copies hold the entering sum's context and the
    registers written the other's, which the copies take next; a cycle that changes nothing writes the copies back."""
    if contexts == 1:
        return list(registers)
    copies = []
    for register in registers:
        copy = Signal(register.shape(), name=f"{Value.cast(register).name}_other")
        m.d.sync += copy.eq(register)
        copies.append(copy)
    return copies


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

    Two contexts (a two-thread TensorDash tile's PE, SPEC section 3) accumulate two pass streams
    whose sums come on alternate cycles (each context's on every other cycle, valid or not):
    the partials, the partial index and the fill flag are doubled in series (``context_copies``),
    the adder and the combining tree shared. A context's next sum for a partial then enters at
    least 2L >= P + 2 cycles after its previous one, so its write-back is in the registers when
    the operand is read and no forwarding is needed; the one-cycle loop becomes a loop of two
    registers.

    Parameters
    ----------
    accumulators : int
        Partials L, at least 1.
    stages : int
        Pipeline stages P of the adders (``FPAdder``), 0 to min(L - 1, 5); the
        combining tree's adders have ``max(P, 1)``.
    contexts : int
        Pass streams accumulated, 1 or 2 (``CONTEXTS``); with 2 their sums alternate cycle by cycle.

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

    def __init__(self, accumulators, stages, contexts=1):
        if not isinstance(accumulators, int) or accumulators < 1:
            raise ValueError(f"Accumulators must be a positive integer, not {accumulators!r}")
        if stages not in ADDER_CUTS or stages >= accumulators:
            raise ValueError(f"Accumulator stages must be one of {', '.join(map(str, ADDER_CUTS))} and fewer than the "
                             f"{accumulators} accumulators, not {stages!r}")
        check_contexts("Accumulator", contexts)
        self.accumulators, self.stages, self.contexts = accumulators, stages, contexts
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
        index_now, filled_now = context_copies(m, [index, filled], self.contexts)
        wraps = index_now == count - 1
        updated_index = Mux(self.valid, Mux(self.last | wraps, 0, index_now + 1), index_now)
        updated_filled = Mux(self.valid, ~self.last & (filled_now | wraps), filled_now)
        m.d.sync += [index.eq(updated_index), filled.eq(updated_filled)]
        # with two contexts the next cycle's sum is the other context's, held in the registers written
        next_index, next_filled = (updated_index, updated_filled) if self.contexts == 1 else (index, filled)

        # The partial, valid and last flags of the sum coming out of the adder.
        out_index = delayed(m, index_now, self.stages, "out_index")
        out_valid = delayed(m, self.valid, self.stages, "out_valid")
        out_last = delayed(m, self.last, self.stages, "out_last")
        writes = [out_valid & (out_index == partial) for partial in range(count)]

        # The next sum's a operand, registered a cycle ahead: +0 while the pass fills the partials, else its
        # partial as written back this cycle. An AND-OR multiplexer: the index's spare codes select nothing.
        partials = [Signal(FP32_LAYOUT, name=f"partial{partial}") for partial in range(count)]
        stored = reduce(operator.or_, (Mux(next_index == partial, value.as_value(), 0)
                                       for partial, value in enumerate(partials)))
        operand = Signal(FP32_LAYOUT)
        forwarded = Mux(out_valid & (out_index == next_index), add.sum, stored) if self.contexts == 1 else stored
        m.d.sync += operand.eq(Mux(next_filled, forwarded, 0))
        m.d.comb += [add.a.eq(operand), add.b.eq(self.sum)]
        if self.contexts == 1:
            for partial, write in zip(partials, writes):
                with m.If(write):
                    m.d.sync += partial.eq(add.sum)
            with m.If(out_valid & out_last):
                m.d.sync += [partial.eq(0) for partial in partials]
            outs = partials
        else:
            outs = self._write_contexts(m, partials, writes, add.sum, out_valid & out_last)

        # The pass's partials, its last sum bypassed in; registered before the tree when there is one.
        captured = [Mux(write, add.sum, partial) for partial, write in zip(outs, writes)]
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

    def _write_contexts(self, m, partials, writes, value, clear):
        """Two contexts' partials: ``partials`` hold the next cycle's sum's context, their copies (``_other``) this
        cycle's. The adder's output belongs to the sum that entered P cycles ago: this cycle's context for an even P,
        the next cycle's for an odd one; that context takes ``value`` into its written partial (+0.0 into all at the
        end of its pass) as it moves to the other register of each pair, the other context moves as it is. Returns
        where the output's context is this cycle."""
        others = [Signal(FP32_LAYOUT, name=f"partial{partial}_other") for partial in range(len(partials))]
        outs, moved = (others, partials) if self.stages % 2 == 0 else (partials, others)
        for here, there, write in zip(outs, moved, writes):
            m.d.sync += [here.eq(there), there.eq(Mux(clear, 0, Mux(write, value, here)))]
        return outs
