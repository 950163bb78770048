"""The multiply-accumulate datapath of one PE: N multipliers, the fp32 adder tree, the accumulator (or an
accumulator per lane before the tree)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import FUSED_GUARD_BITS, float_format
from dashraker.hw.numerics.accumulator import Accumulator, accumulator_latency, check_contexts
from dashraker.hw.numerics.adder_tree import AdderTree, tree_levels
from dashraker.hw.numerics.fixed_accumulator import FIXED_ACCUMULATOR_LATENCY, FixedPointAccumulator
from dashraker.hw.numerics.float import FP32_LAYOUT, FloatLayout
from dashraker.hw.numerics.fp_mul import FPMultiplier
from dashraker.hw.numerics.fused_dot import ExactMultiplier, FusedTree, fused_latency
from dashraker.hw.numerics.pipeline import delayed

__all__ = ["MacUnit", "mac_latency", "mac_stages", "ADDER_STAGES"]

# Stages of every adder once the accumulator is interleaved: the fewest that clock >= 115 MHz alone on
# ECP5-85k speed grade 6 (docs/results/fpga-history.md, "What bounds the clock"; 4 stages: 99 MHz).
ADDER_STAGES = 5


def mac_stages(fmt, accumulators):
    """Pipeline stages ``(multiplier, adder tree, accumulator)`` of a ``MacUnit``.

    With one accumulator the combinational adder's one-cycle loop sets the clock, so
    the multipliers and the tree keep one register each (fp32 multipliers a second
    after the significand product); with L > 1 partials every unit is cut to the
    stages that clock above 115 MHz alone (adders 5, bf16 multipliers 3, fp32 ones
    4), the adders to at most L - 1 so that the accumulator's loop holds.
    The fixed-point accumulator (L = 0) has no fp32 adder: its stage count is 0.
    """
    fp32 = float_format(fmt).precision > 8
    if accumulators == 1:
        return 1 + fp32, 1, 0
    if accumulators == 0:
        return 3 + fp32, ADDER_STAGES, 0
    adder = min(accumulators - 1, ADDER_STAGES)
    return 3 + fp32, max(adder, 1), adder


def mac_latency(lanes, fmt, accumulators, dot):
    """Cycles from a step entering a ``MacUnit`` to the result of the pass it ends: its operand registers, then
    the ``mac_stages`` (with ``dot="fma"`` the same stages, the lanes' accumulators before the tree), or with
    ``dot="fused"`` the fused dot product's (``fused_latency``) and the fixed-point accumulator's."""
    if dot == "fused":
        return 1 + fused_latency(lanes) + FIXED_ACCUMULATOR_LATENCY
    multiplier, tree, accumulator = mac_stages(fmt, accumulators)
    accumulated = FIXED_ACCUMULATOR_LATENCY if accumulators == 0 else accumulator_latency(accumulators, accumulator)
    return 1 + multiplier + tree_levels(lanes) * tree + accumulated


class MacUnit(wiring.Component):
    """Accumulates, step by step, the adder-tree sum of N lane products (SPEC section 2).

    Pipeline: the operand registers, the multipliers (``FPMultiplier``), one pipelined adder per tree level
    (``AdderTree``), then the accumulator, as the golden ``models.baseline.accumulate``.
    With L >= 1 it is the ``Accumulator``: the tree sum of the pass's t-th valid
    step goes to partial t mod L, the L partials are combined by a balanced fp32
    tree at the end of the pass. With L = 1 this is the one-cycle loop
    ``acc = (acc + sum0) + sum1 ...`` of a combinational adder (about 45 MHz on
    ECP5-85k); with L > 1 every adder is pipelined (``mac_stages``); L = 6 is the
    smallest L whose loop takes the 5-stage adder that clocks above 115 MHz alone.
    With L = 0, the designs' default (``--accumulators``), it is the
    ``FixedPointAccumulator``, a quarter of L = 6's LUTs and closer to fp64 (docs/numerics.md,
    "Accumulation order"), with every adder of the tree pipelined. A pass's result
    appears on ``result`` with ``result_valid`` high ``latency`` cycles after its
    ``last`` step entered; a step may enter every cycle.

    The unit registers the step it reads (``a``, ``b``, ``valid``, ``last``) before
    its multipliers: in a tile, an operand shared along a row or a column then reaches
    each PE's multiplier blocks from a register of that PE, placed beside them, rather
    than from one register wired to every PE (on ECP5 that route bounded a 2 x 2 tile
    at 81 MHz).

    Parameters
    ----------
    lanes : int
        Lanes N (multipliers), at least 1.
    fmt : "bf16" | "fp32"
        Operand format.
    accumulators : int
        Interleaved partial fp32 accumulators L, or 0 for the fixed-point accumulator.
    dot : "tree" | "fused" | "fma"
        The step's sum: the fp32 adder tree, or the fused dot product (SPEC section 2,
        amended 2026-11-27): an ``ExactMultiplier`` per lane (``mul{i}``) and the
        ``FusedTree`` (``dot``), whose unrounded step sums the fixed-point accumulator
        (L = 0 only) adds; or a fused multiply-add per lane (amended 2026-12-06; bf16,
        L >= 1): lane i's exact product goes straight into its own ``Accumulator``
        (``accumulate{i}``, L partials through the adder of ``mac_stages``; L = 1 the
        one-cycle loop ``acc = fl(acc + a * b)``), and the lanes' pass results into the
        ``AdderTree`` (``tree``), lane i at leaf i.
    guard_bits : int
        With ``dot="fused"``, the window's places below the products' 2p bits (``FusedTree``).
    contexts : int
        Pass streams accumulated, 1 or 2, whose steps alternate cycle by cycle (a two-thread
        TensorDash tile's, SPEC section 3): the accumulators' contexts (``Accumulator``,
        ``FixedPointAccumulator``); the multipliers and the step's sum serve both as they come.

    Attributes
    ----------
    latency : int
        ``mac_latency(lanes, fmt, accumulators, dot)``: with L = 1, ``3 + ceil(log2(lanes))``
        (fp32 one more).

    Ports
    -----
    valid : In(1)
        A step is on ``a``/``b``.
    last : In(1)
        The step is the last of a pass.
    a, b : In(ArrayLayout(FloatLayout(fmt), lanes))
        The lane operands of the step.
    result : Out(FP32_LAYOUT)
        The accumulated sum of the last pass.
    result_valid : Out(1)
        ``result`` holds a new pass result (high for one cycle per pass; ``result`` keeps it until the next).
    """

    def __init__(self, lanes, fmt, accumulators, dot, guard_bits=FUSED_GUARD_BITS, contexts=1):
        if not isinstance(lanes, int) or lanes < 1:
            raise ValueError(f"MAC lanes must be a positive integer, not {lanes!r}")
        if not isinstance(accumulators, int) or accumulators < 0:
            raise ValueError(f"MAC accumulators must be a non-negative integer, not {accumulators!r}")
        if dot not in ("tree", "fused", "fma"):
            raise ValueError(f"MAC dot must be 'tree', 'fused' or 'fma', not {dot!r}")
        if dot == "fused" and accumulators != 0:
            raise ValueError(f"the fused dot product adds into the fixed-point accumulator (accumulators 0), "
                             f"not {accumulators} fp32 accumulators")
        if dot == "fma" and (accumulators == 0 or float_format(fmt).precision > 8):
            raise ValueError(f"a fused multiply-add lane takes bf16 operands into at least one fp32 accumulator, "
                             f"not {fmt} into {accumulators}")
        check_contexts("MAC", contexts)
        self.lanes, self.accumulators, self.dot, self.guard_bits = lanes, accumulators, dot, guard_bits
        self.contexts = contexts
        self.format = float_format(fmt)
        self.latency = mac_latency(lanes, self.format, accumulators, dot)
        operands = data.ArrayLayout(FloatLayout(self.format), lanes)
        super().__init__({
            "valid": In(1),
            "last": In(1),
            "a": In(operands),
            "b": In(operands),
            "result": Out(FP32_LAYOUT),
            "result_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        a, b = Signal.like(self.a, name="a_registered"), Signal.like(self.b, name="b_registered")
        m.d.sync += [a.eq(self.a), b.eq(self.b)]
        if self.dot == "fma":
            return self._fma_lanes(m, a, b)
        if self.dot == "fused":
            m.submodules.dot = dot = FusedTree(self.lanes, self.format, self.guard_bits)
            m.submodules.accumulate = accumulate = FixedPointAccumulator(dot.magnitude_bits, self.contexts)
            for lane in range(self.lanes):
                mul = m.submodules[f"mul{lane}"] = ExactMultiplier(self.format)
                m.d.comb += [mul.a.eq(a[lane]), mul.b.eq(b[lane]), dot.products[lane].eq(mul.product)]
            stages, step_sum = 1 + fused_latency(self.lanes), accumulate.addend.eq(dot.addend)
        else:
            multiplier, tree_stages, accumulator = mac_stages(self.format, self.accumulators)
            m.submodules.tree = tree = AdderTree(self.lanes, tree_stages)
            m.submodules.accumulate = accumulate = (
                FixedPointAccumulator(contexts=self.contexts) if self.accumulators == 0
                else Accumulator(self.accumulators, accumulator, self.contexts))
            for lane in range(self.lanes):
                mul = m.submodules[f"mul{lane}"] = FPMultiplier(self.format, multiplier)
                m.d.comb += [mul.a.eq(a[lane]), mul.b.eq(b[lane]), tree.operands[lane].eq(mul.product)]
            stages, step_sum = 1 + multiplier + tree.latency, accumulate.sum.eq(tree.sum)

        # valid/last travel beside the data: the operand registers, the multipliers and the step's sum.
        m.d.comb += [
            accumulate.valid.eq(delayed(m, self.valid, stages, "valid")),
            accumulate.last.eq(delayed(m, self.last, stages, "last")),
            step_sum,
            self.result.eq(accumulate.result),
            self.result_valid.eq(accumulate.result_valid),
        ]
        return m

    def _fma_lanes(self, m, a, b):
        """Each lane's exact product into its own accumulator; at a pass's end the lanes' results into the tree.
        Every lane's accumulator finishes a pass in the same cycle and keeps its result until the next pass's, so
        the tree's sum stands from ``result_valid`` to the next."""
        multiplier, tree_stages, accumulator = mac_stages(self.format, self.accumulators)
        m.submodules.tree = tree = AdderTree(self.lanes, tree_stages)
        valid = delayed(m, self.valid, 1 + multiplier, "valid")
        last = delayed(m, self.last, 1 + multiplier, "last")
        for lane in range(self.lanes):
            mul = m.submodules[f"mul{lane}"] = FPMultiplier(self.format, multiplier)
            accumulate = m.submodules[f"accumulate{lane}"] = Accumulator(self.accumulators, accumulator, self.contexts)
            m.d.comb += [mul.a.eq(a[lane]), mul.b.eq(b[lane]), accumulate.valid.eq(valid), accumulate.last.eq(last),
                         accumulate.sum.eq(mul.product), tree.operands[lane].eq(accumulate.result)]
            if lane == 0:
                m.d.comb += self.result_valid.eq(delayed(m, accumulate.result_valid, tree.latency, "result_valid"))
        m.d.comb += self.result.eq(tree.sum)
        return m
