"""A TensorDash operand mux: every lane's value picked from the window by its select (SPEC section 3)."""

from functools import reduce
from operator import or_

from amaranth.hdl import Cat, Module, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.numerics import FloatLayout
from dashraker.hw.tensordash.scheduler import check_parameters

__all__ = ["OperandMux", "staging_layout", "picks_layout", "picks", "one_hot_mux"]


def staging_layout(lanes, lookahead, fmt):
    """Operand values of the window's H+1 steps, one lane array per step."""
    return data.ArrayLayout(data.ArrayLayout(FloatLayout(fmt), lanes), lookahead + 1)


def picks_layout(lanes, pattern):
    """Every lane's select as one-hot bits over the pattern's entries (bit k: entry k; none: the lane is idle)."""
    return data.ArrayLayout(unsigned(len(pattern)), lanes)


def picks(select, pattern):
    """A lane's ``select_layout`` value as its one-hot ``picks_layout`` bits."""
    return Cat(select.valid & (select.index == k) for k in range(len(pattern)))


def one_hot_mux(selects, values):
    """The value whose one-hot select is high (0 where none is), as an AND-OR.

    With selects straight from registers each output bit is a small AND-OR of data
    and select bits; a binary select decoded beside the data is folded into every
    bit's logic by synthesis (on ECP5 about four times the LUTs of an 8-input mux).
    """
    return reduce(or_, (Cat(value) & select.replicate(len(Cat(value))) for select, value in zip(selects, values)))


class OperandMux(wiring.Component):
    """N lanes, each an ``len(pattern)``-input mux over the window.

    Lane i takes the value at window slot ``(ds, (i + dl) mod N)`` of the pattern
    entry k whose bit ``picks[i][k]`` is high, or +0 when it issues nothing (an idle
    lane adds +0 to the tree). The same component serves both operands: once per row
    for the scheduled operand (its values are broadcast to the row's PEs) and once
    per PE for the partner operand (its column's window), both driven by the row
    scheduler's selects, registered one-hot. Its outputs go to the PEs' ``MacUnit``,
    whose operand registers take them.

    Parameters
    ----------
    lanes, lookahead, pattern
        As ``Scheduler``.
    fmt : "bf16" | "fp32"
        Operand format.

    Ports
    -----
    picks : In(picks_layout(lanes, pattern))
        The row scheduler's selects, one-hot (from registers).
    window : In(staging_layout(lanes, lookahead, fmt))
        The operand's values at the window's H+1 steps.
    operands : Out(ArrayLayout(FloatLayout(fmt), lanes))
        The picked values (combinational).
    """

    def __init__(self, lanes, lookahead, pattern, fmt):
        self.pattern = check_parameters(lanes, lookahead, pattern)
        self.lanes, self.lookahead = lanes, lookahead
        self.format = float_format(fmt)
        super().__init__({
            "picks": In(picks_layout(lanes, self.pattern)),
            "window": In(staging_layout(lanes, lookahead, self.format)),
            "operands": Out(data.ArrayLayout(FloatLayout(self.format), lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        for lane in range(self.lanes):
            sources = [self.window[step][(lane + offset) % self.lanes] for step, offset in self.pattern]
            m.d.comb += self.operands[lane].eq(one_hot_mux(self.picks[lane], sources))
        return m
