"""Pipelined balanced tree of fp32 adders (SPEC section 2)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.numerics.float import FP32_LAYOUT
from dashraker.hw.numerics.fp_add import FPAdder

__all__ = ["AdderTree", "tree_levels"]


def tree_levels(lanes):
    """Number of adder levels that reduce ``lanes`` operands to one."""
    return (lanes - 1).bit_length()


class AdderTree(wiring.Component):
    """Sums ``lanes`` fp32 operands, neighbours pairwise level by level, one register per level.

    An odd operand at the end of a level passes up unchanged, so lane i is leaf i and
    the order of additions is the golden model's (``models.baseline.adder_tree``).
    Every register advances only while ``en`` is high.

    Parameters
    ----------
    lanes : int
        Number of operands, at least 1.

    Attributes
    ----------
    latency : int
        Cycles (with ``en`` high) from ``operands`` to ``sum``: ``ceil(log2(lanes))``.

    Ports
    -----
    en : In(1)
        Pipeline enable.
    operands : In(ArrayLayout(FP32_LAYOUT, lanes))
        The addends; lane i is leaf i.
    sum : Out(FP32_LAYOUT)
        Their sum, ``latency`` enabled cycles later.
    """

    def __init__(self, lanes):
        if not isinstance(lanes, int) or lanes < 1:
            raise ValueError(f"Adder tree lanes must be a positive integer, not {lanes!r}")
        self.lanes = lanes
        self.latency = tree_levels(lanes)
        super().__init__({
            "en": In(1),
            "operands": In(data.ArrayLayout(FP32_LAYOUT, lanes)),
            "sum": Out(FP32_LAYOUT),
        })

    def elaborate(self, platform):
        m = Module()
        level = [self.operands[lane] for lane in range(self.lanes)]
        for depth in range(self.latency):
            registers = []
            for index in range(0, len(level), 2):
                register = Signal(FP32_LAYOUT, name=f"level{depth}_{index // 2}")
                if index + 1 < len(level):
                    adder = m.submodules[f"add{depth}_{index // 2}"] = FPAdder()
                    m.d.comb += [adder.a.eq(level[index]), adder.b.eq(level[index + 1])]
                    value = adder.sum
                else:
                    value = level[index]
                with m.If(self.en):
                    m.d.sync += register.eq(value)
                registers.append(register)
            level = registers
        m.d.comb += self.sum.eq(level[0])
        return m
