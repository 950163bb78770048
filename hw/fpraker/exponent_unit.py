"""The FPRaker exponent unit: a step's alignment exponent ``M`` and every lane's distance to it."""

from amaranth.hdl import Module, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.designs import FPRAKER
from dashraker.hw.fpraker.lane import DISTANCE_BITS
from dashraker.hw.fpraker.rounder import EXPONENT_BITS

__all__ = ["ExponentUnit"]


class ExponentUnit(wiring.Component):
    """Step alignment (combinational): ``M = max(max_exponent, Ea)`` over what exists, and each lane's distance.

    Parameters
    ----------
    lanes : int
        Lanes N of the PE.

    Ports
    -----
    max_exponent : In(signed(12)), any_live : In(1)
        The step's maximum product exponent over its live lanes and whether any lane is live.
    acc_exponent : In(signed(12)), acc_nonempty : In(1)
        The accumulator's reference exponent ``Ea`` and whether it holds a value.
    exponents : In(ArrayLayout(signed(12), lanes))
        Per-lane product exponents ``Pe``.
    top : Out(signed(12))
        ``M``; the accumulator's exponent when the step has no live lane.
    distances : Out(ArrayLayout(signed(14), lanes))
        ``M - Pe`` per lane.
    """

    def __init__(self, lanes):
        FPRAKER.params(lanes=lanes)
        self.lanes = lanes
        super().__init__({
            "max_exponent": In(signed(EXPONENT_BITS)),
            "any_live": In(1),
            "acc_exponent": In(signed(EXPONENT_BITS)),
            "acc_nonempty": In(1),
            "exponents": In(data.ArrayLayout(signed(EXPONENT_BITS), lanes)),
            "top": Out(signed(EXPONENT_BITS)),
            "distances": Out(data.ArrayLayout(signed(DISTANCE_BITS), lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        acc_larger = self.acc_nonempty & (~self.any_live | (self.acc_exponent > self.max_exponent))
        m.d.comb += self.top.eq(Mux(acc_larger, self.acc_exponent, self.max_exponent))
        for lane in range(self.lanes):
            m.d.comb += self.distances[lane].eq(self.top - self.exponents[lane])
        return m
