"""End-of-pass rounding of the FPRaker accumulator window to fp32 (the golden model's ``_round_window``)."""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.designs import FPRAKER
from dashraker.hw.numerics.float import FP32_LAYOUT, canonical_nan
from dashraker.hw.numerics.rounding import leading_zeros, round_nearest_even

__all__ = ["EXPONENT_BITS", "accumulator_layout", "Rounder"]

EXPONENT_BITS = 12  # signed reference exponents: products reach 381, windows a little more


def accumulator_layout(guard_bits):
    """The accumulator of a PE: window ``S`` (25 + G signed bits), reference exponent ``Ea``, non-empty flag,
    and the pass's sticky special flags."""
    return data.StructLayout({
        "window": signed(25 + guard_bits),
        "exponent": signed(EXPONENT_BITS),
        "nonempty": 1,
        "nan": 1,
        "pos_inf": 1,
        "neg_inf": 1,
    })


class Rounder(wiring.Component):
    """Rounds ``S * 2**(Ea - 150 - G)`` to fp32 (combinational).

    Round to nearest even with an unbounded exponent, then FTZ (biased exponent
    below 1 gives a zero of the window's sign) and overflow to Inf; an empty
    accumulator gives +0; NaN / Inf flags override (Inf of both signs is NaN).

    Parameters
    ----------
    guard_bits : int
        G, the guard bits below the fp32 significand in the window (0..7).

    Ports
    -----
    accumulator : In(accumulator_layout(guard_bits))
        A PE's accumulator at the end of a pass.
    result : Out(FP32_LAYOUT)
        Its fp32 value.
    """

    def __init__(self, guard_bits):
        FPRAKER.params(guard_bits=guard_bits)
        self.guard_bits = guard_bits
        super().__init__({
            "accumulator": In(accumulator_layout(guard_bits)),
            "result": Out(FP32_LAYOUT),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.guard_bits
        acc = self.accumulator
        width = 25 + g
        magnitude = Signal(width)
        m.d.comb += magnitude.eq(Mux(acc.window < 0, -acc.window, acc.window))
        zeros = leading_zeros(m, magnitude)
        normalised = Signal(width)
        m.d.comb += normalised.eq(magnitude << zeros)
        sticky = normalised[:g].any() if g else Const(0)
        exponent = Signal(signed(EXPONENT_BITS + 2))
        m.d.comb += exponent.eq(acc.exponent + 1 - zeros)
        mantissa, biased = round_nearest_even(m, normalised[g + 1:], exponent, guard=normalised[g], sticky=sticky)
        sign = acc.window < 0
        with m.If(acc.nan | (acc.pos_inf & acc.neg_inf)):
            m.d.comb += self.result.as_value().eq(canonical_nan())
        with m.Elif(acc.pos_inf | acc.neg_inf):
            m.d.comb += [self.result.sign.eq(acc.neg_inf), self.result.exp.eq(0xFF)]
        with m.Elif(~acc.nonempty):
            m.d.comb += self.result.as_value().eq(0)
        with m.Elif(biased < 1):
            m.d.comb += self.result.sign.eq(sign)
        with m.Elif(biased > 254):
            m.d.comb += [self.result.sign.eq(sign), self.result.exp.eq(0xFF)]
        with m.Else():
            m.d.comb += [self.result.sign.eq(sign), self.result.exp.eq(biased), self.result.frac.eq(mantissa)]
        return m
