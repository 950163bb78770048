"""The multiply-accumulate datapath of one PE: N multipliers, the fp32 adder tree, the fp32 accumulator."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.numerics.adder_tree import AdderTree, tree_levels
from dashraker.hw.numerics.float import FP32_LAYOUT, FloatLayout
from dashraker.hw.numerics.fp_add import FPAdder
from dashraker.hw.numerics.fp_mul import FPMultiplier

__all__ = ["MacUnit", "mac_latency"]


def mac_latency(lanes, fmt="bf16"):
    """Cycles from a step entering a ``MacUnit`` to its accumulated result."""
    return 2 + _multiplier_stages(fmt) + tree_levels(lanes)


def _multiplier_stages(fmt):
    """fp32 multipliers take a register inside (``FPMultiplier(registered=True)``); bf16 ones need none."""
    return int(float_format(fmt).precision > 8)


class MacUnit(wiring.Component):
    """Accumulates, step by step, the adder-tree sum of N lane products into an fp32 accumulator.

    Pipeline: one register after the multipliers (fp32 ones have a second inside, after
    the significand product), one per adder-tree level, then the
    accumulator, whose adder closes a one-cycle loop so that steps accumulate in
    order (``acc = (acc + sum0) + sum1 ...``, as the golden model). The accumulator
    starts at +0.0 and is cleared after the step flagged ``last``, whose result
    appears on ``result`` with ``result_valid`` high ``latency`` enabled cycles after
    it entered. All state advances only while ``en`` is high.

    Parameters
    ----------
    lanes : int
        Lanes N (multipliers), at least 1.
    fmt : "bf16" | "fp32"
        Operand format.

    Attributes
    ----------
    latency : int
        ``2 + ceil(log2(lanes))``, one more for fp32 (``mac_latency``).

    Ports
    -----
    en : In(1)
        Pipeline enable.
    valid : In(1)
        A step is on ``a``/``b`` (ignored while ``en`` is low).
    last : In(1)
        The step is the last of a pass.
    a, b : In(ArrayLayout(FloatLayout(fmt), lanes))
        The lane operands of the step.
    result : Out(FP32_LAYOUT)
        The accumulated sum of the last pass.
    result_valid : Out(1)
        ``result`` holds a new pass result (held while ``en`` is low).
    """

    def __init__(self, lanes, fmt="bf16"):
        if not isinstance(lanes, int) or lanes < 1:
            raise ValueError(f"MAC lanes must be a positive integer, not {lanes!r}")
        self.lanes = lanes
        self.format = float_format(fmt)
        self.latency = mac_latency(lanes, self.format)
        operands = data.ArrayLayout(FloatLayout(self.format), lanes)
        super().__init__({
            "en": In(1),
            "valid": In(1),
            "last": In(1),
            "a": In(operands),
            "b": In(operands),
            "result": Out(FP32_LAYOUT),
            "result_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.tree = tree = AdderTree(self.lanes)
        m.submodules.accumulate = add = FPAdder()
        m.d.comb += tree.en.eq(self.en)

        for lane in range(self.lanes):
            mul = m.submodules[f"mul{lane}"] = FPMultiplier(self.format, registered=_multiplier_stages(self.format))
            m.d.comb += [mul.a.eq(self.a[lane]), mul.b.eq(self.b[lane])]
            if mul.latency:
                m.d.comb += mul.en.eq(self.en)
            with m.If(self.en):
                m.d.sync += tree.operands[lane].eq(mul.product)

        # valid/last travel beside the data: through the multipliers' stages, then one per tree level.
        valid, last = self.valid, self.last
        for stage in range(self.latency - 1):
            valid_reg = Signal(name=f"valid{stage}")
            last_reg = Signal(name=f"last{stage}")
            with m.If(self.en):
                m.d.sync += [valid_reg.eq(valid), last_reg.eq(last)]
            valid, last = valid_reg, last_reg

        accumulator = Signal(FP32_LAYOUT)
        m.d.comb += [add.a.eq(accumulator), add.b.eq(tree.sum)]
        with m.If(self.en):
            m.d.sync += self.result_valid.eq(valid & last)
            with m.If(valid):
                m.d.sync += accumulator.eq(add.sum)
                with m.If(last):
                    m.d.sync += [accumulator.eq(0), self.result.eq(add.sum)]
        return m
