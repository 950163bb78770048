"""A TensorDash operand mux: every lane's value picked from the window by its select, registered (SPEC section 3)."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.numerics import FloatLayout
from dashraker.hw.tensordash.scheduler import check_parameters, select_layout
from dashraker.models.tensordash import DEFAULT_PATTERN

__all__ = ["OperandMux", "staging_layout"]


def staging_layout(lanes, lookahead, fmt):
    """Operand values of the window's H+1 steps, one lane array per step."""
    return data.ArrayLayout(data.ArrayLayout(FloatLayout(fmt), lanes), lookahead + 1)


class OperandMux(wiring.Component):
    """N lanes, each an ``len(pattern)``-input mux over the window, followed by a register.

    Lane i takes the value at window slot ``(ds, (i + dl) mod N)`` of pattern entry
    ``select[i].index``, or +0 when it issues nothing (an idle lane adds +0 to the
    tree). The same component serves both operands: once per row for the scheduled
    operand (its values are broadcast to the row's PEs) and once per PE for the
    partner operand (its column's window), both driven by the row scheduler's selects.

    Parameters
    ----------
    lanes, lookahead, pattern
        As ``Scheduler``.
    fmt : "bf16" | "fp32"
        Operand format.

    Ports
    -----
    en : In(1)
        Register enable.
    select : In(ArrayLayout(select_layout(pattern), lanes))
        The row scheduler's selects.
    window : In(staging_layout(lanes, lookahead, fmt))
        The operand's values at the window's H+1 steps.
    operands : Out(ArrayLayout(FloatLayout(fmt), lanes))
        The picked values, registered (one enabled cycle after ``select`` and ``window``).
    """

    def __init__(self, lanes=16, lookahead=2, pattern=DEFAULT_PATTERN, fmt="bf16"):
        self.pattern = check_parameters(lanes, lookahead, pattern)
        self.lanes, self.lookahead = lanes, lookahead
        self.format = float_format(fmt)
        super().__init__({
            "en": In(1),
            "select": In(data.ArrayLayout(select_layout(self.pattern), lanes)),
            "window": In(staging_layout(lanes, lookahead, self.format)),
            "operands": Out(data.ArrayLayout(FloatLayout(self.format), lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            for lane in range(self.lanes):
                select, operand = self.select[lane], self.operands[lane]
                with m.If(select.valid):
                    with m.Switch(select.index):
                        for k, (step, offset) in enumerate(self.pattern):
                            # The last index is the default, so the case is complete (lint).
                            with m.Case(k) if k < len(self.pattern) - 1 else m.Default():
                                m.d.sync += operand.eq(self.window[step][(lane + offset) % self.lanes])
                with m.Else():
                    m.d.sync += operand.eq(0)
        return m
