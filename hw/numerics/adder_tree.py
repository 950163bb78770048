"""Pipelined balanced tree of fp32 adders (SPEC section 2)."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.numerics.float import FP32_LAYOUT
from dashraker.hw.numerics.fp_add import ADDER_CUTS, FPAdder
from dashraker.hw.numerics.pipeline import delayed

__all__ = ["AdderTree", "tree_levels"]


def tree_levels(lanes):
    """Number of adder levels that reduce ``lanes`` operands to one."""
    return (lanes - 1).bit_length()


class AdderTree(wiring.Component):
    """Sums ``lanes`` fp32 operands, neighbours pairwise level by level, one pipelined adder per level.

    An odd operand at the end of a level passes up unchanged (through as many
    registers as an adder has), so lane i is leaf i and the order of additions is the
    golden model's (``models.baseline.adder_tree``).

    Parameters
    ----------
    lanes : int
        Number of operands, at least 1.
    stages : int
        Pipeline stages of each adder (``FPAdder``), 1 to 3; 1 is a combinational
        adder and a register per level.

    Attributes
    ----------
    latency : int
        Cycles from ``operands`` to ``sum``: ``ceil(log2(lanes)) * stages``.

    Ports
    -----
    operands : In(ArrayLayout(FP32_LAYOUT, lanes))
        The addends; lane i is leaf i.
    sum : Out(FP32_LAYOUT)
        Their sum, ``latency`` cycles later.
    """

    def __init__(self, lanes, stages=1):
        if not isinstance(lanes, int) or lanes < 1:
            raise ValueError(f"Adder tree lanes must be a positive integer, not {lanes!r}")
        if stages not in ADDER_CUTS or stages < 1:
            raise ValueError(f"Adder tree stages must be one of 1 to 5, not {stages!r}")
        self.lanes, self.stages = lanes, stages
        self.latency = tree_levels(lanes) * stages
        super().__init__({
            "operands": In(data.ArrayLayout(FP32_LAYOUT, lanes)),
            "sum": Out(FP32_LAYOUT),
        })

    def elaborate(self, platform):
        m = Module()
        level = [self.operands[lane] for lane in range(self.lanes)]
        for depth in range(tree_levels(self.lanes)):
            sums = []
            for index in range(0, len(level), 2):
                if index + 1 < len(level):
                    adder = m.submodules[f"add{depth}_{index // 2}"] = FPAdder(self.stages)
                    m.d.comb += [adder.a.eq(level[index]), adder.b.eq(level[index + 1])]
                    sums.append(adder.sum)
                else:
                    sums.append(delayed(m, level[index], self.stages, f"level{depth}_{index // 2}_"))
            level = sums
        m.d.comb += self.sum.eq(level[0])
        return m
