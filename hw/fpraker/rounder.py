"""End-of-pass rounding of the FPRaker accumulator to fp32 (the golden model's ``_round_accumulator``)."""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import FPRAKER_ACCUMULATOR_BITS as ACCUMULATOR_BITS, FPRAKER_FRAME_BITS as FRAME_BITS
from dashraker.hw.checks import check_count
from dashraker.hw.fpraker.bounds import MAX_GUARD_BITS
from dashraker.hw.fpraker.decoder import EXPONENT_BITS, specials_layout

from dashraker.hw.numerics.float import FP32_LAYOUT, canonical_nan
from dashraker.hw.numerics.integer_rounder import INTEGER_ROUNDER_LATENCY, IntegerRounder

__all__ = ["ROUNDER_LATENCY", "accumulator_layout", "Rounder"]

ROUNDER_LATENCY = INTEGER_ROUNDER_LATENCY + 1  # and fp32's range and specials


def accumulator_layout():
    """A PE's accumulator at the end of a pass: ``U``, its frame ``F >> FRAME_BITS``, the pass's special products."""
    return data.StructLayout({
        "value": signed(ACCUMULATOR_BITS),
        "frame": signed(EXPONENT_BITS - FRAME_BITS),
        "specials": specials_layout(),
    })


class Rounder(wiring.Component):
    """Rounds ``U * 2**(F - 150 - G)`` to fp32 in ``ROUNDER_LATENCY`` registered stages.

    Round to nearest even with an unbounded exponent (``IntegerRounder``), then FTZ
    (biased exponent below 1 gives a zero of ``U``'s sign) and overflow to Inf; ``U = 0``
    gives +0; NaN / Inf flags override (Inf of both signs is NaN).

    Parameters
    ----------
    guard_bits : int
        G.

    Ports
    -----
    valid : In(1)
        ``accumulator`` holds a pass's accumulator.
    accumulator : In(accumulator_layout())
        A PE's accumulator at the end of a pass.
    result_valid : Out(1)
        ``ROUNDER_LATENCY`` clock edges after ``valid``.
    result : Out(FP32_LAYOUT)
        Its fp32 value.
    """

    def __init__(self, guard_bits):
        check_count("guard_bits", guard_bits, 0, MAX_GUARD_BITS)
        self.guard_bits = guard_bits
        super().__init__({
            "valid": In(1),
            "accumulator": In(accumulator_layout()),
            "result_valid": Out(1),
            "result": Out(FP32_LAYOUT),
        })

    def elaborate(self, platform):
        m = Module()
        acc = self.accumulator
        m.submodules.rounder = rounder = IntegerRounder(ACCUMULATOR_BITS, EXPONENT_BITS, specials_layout())
        top = Signal(signed(EXPONENT_BITS))  # the biased exponent of U's bit 63: F - 150 - G + 63 + 127
        m.d.comb += [
            top.eq((acc.frame << FRAME_BITS) + ACCUMULATOR_BITS - 1 + 127 - 150 - self.guard_bits),
            rounder.valid.eq(self.valid), rounder.value.eq(acc.value), rounder.top.eq(top),
            rounder.tag.eq(acc.specials),
        ]
        specials, sign, exponent = rounder.result_tag, rounder.sign, rounder.exponent
        result = Signal(FP32_LAYOUT)
        with m.If(specials.nan | (specials.pos_inf & specials.neg_inf)):
            m.d.comb += result.as_value().eq(canonical_nan())
        with m.Elif(specials.pos_inf | specials.neg_inf):
            m.d.comb += [result.sign.eq(specials.neg_inf), result.exp.eq(0xFF)]
        with m.Elif(rounder.mantissa == 0):
            pass  # +0
        with m.Elif(exponent < 1):
            m.d.comb += result.sign.eq(sign)
        with m.Elif(exponent > 254):
            m.d.comb += [result.sign.eq(sign), result.exp.eq(0xFF)]
        with m.Else():
            m.d.comb += [result.sign.eq(sign), result.exp.eq(exponent), result.frac.eq(rounder.mantissa)]
        m.d.sync += [self.result.eq(result), self.result_valid.eq(rounder.result_valid)]
        return m
