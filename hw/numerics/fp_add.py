"""IEEE binary32 adder, combinational: round to nearest even, FTZ/DAZ, canonical NaN (SPEC section 2)."""

from amaranth.hdl import C, Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.numerics.float import FP32_LAYOUT, canonical_nan, classify, significand
from dashraker.hw.numerics.rounding import leading_zeros, round_nearest_even

__all__ = ["FPAdder"]

# Working significand: 24 bits, then guard, round and sticky.
_WIDTH = 27


class FPAdder(wiring.Component):
    """``sum = a + b`` in IEEE binary32.

    Subnormal inputs are read as zeros of their sign, tiny results flush to a zero
    of the result's sign (an exact sum of normals below 2**-126 needs no rounding,
    so tininess before and after rounding agree), any NaN and Inf - Inf give
    0x7FC00000, and x + (-x) is +0. Purely combinational: latency 0.

    Ports
    -----
    a, b : In(FP32_LAYOUT)
        Addends.
    sum : Out(FP32_LAYOUT)
        The rounded sum.
    """

    def __init__(self):
        super().__init__({"a": In(FP32_LAYOUT), "b": In(FP32_LAYOUT), "sum": Out(FP32_LAYOUT)})

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        a_zero, a_inf, a_nan = classify(a)
        b_zero, b_inf, b_nan = classify(b)

        # Order the operands by magnitude so the difference of significands is never negative.
        swap = b.as_value()[:31] > a.as_value()[:31]
        big = Signal(FP32_LAYOUT)
        small = Signal(FP32_LAYOUT)
        m.d.comb += [
            big.eq(Mux(swap, b.as_value(), a.as_value())),
            small.eq(Mux(swap, a.as_value(), b.as_value())),
        ]

        # Align the smaller significand; everything shifted out collapses into the sticky bit.
        diff = Signal(8)
        shift = Signal(range(_WIDTH + 1))
        m.d.comb += [
            diff.eq(big.exp - small.exp),
            shift.eq(Mux(diff > _WIDTH, _WIDTH, diff)),
        ]
        big_ext = Cat(C(0, 3), significand(big))
        wide = Cat(C(0, _WIDTH), C(0, 3), significand(small)) >> shift
        aligned = Cat(wide[_WIDTH] | wide[:_WIDTH].any(), wide[_WIDTH + 1 : 2 * _WIDTH])

        total = Signal(_WIDTH + 1)
        with m.If(big.sign ^ small.sign):
            m.d.comb += total.eq(big_ext - aligned)
        with m.Else():
            m.d.comb += total.eq(big_ext + aligned)

        # Normalise: one step right on carry-out, otherwise left by the leading zeros.
        normalized = Signal(_WIDTH)
        exponent = Signal(signed(10))
        lz = leading_zeros(m, total[:_WIDTH])
        with m.If(total[_WIDTH]):
            m.d.comb += [
                normalized.eq(Cat(total[0] | total[1], total[2:])),
                exponent.eq(big.exp + 1),
            ]
        with m.Else():
            m.d.comb += [
                normalized.eq(total[:_WIDTH] << lz),
                exponent.eq(big.exp - lz),
            ]
        mantissa, exponent = round_nearest_even(
            m, normalized[3:], exponent, guard=normalized[2], sticky=normalized[:2].any()
        )

        with m.If(a_nan | b_nan | (a_inf & b_inf & (a.sign != b.sign))):
            m.d.comb += self.sum.eq(canonical_nan())
        with m.Elif(a_inf | b_inf):
            m.d.comb += self.sum.eq(Mux(a_inf, a.as_value(), b.as_value()))
        with m.Elif(a_zero & b_zero):
            m.d.comb += self.sum.sign.eq(a.sign & b.sign)
        with m.Elif(total == 0):
            pass  # exact cancellation: +0
        with m.Elif(exponent >= 255):
            m.d.comb += [self.sum.sign.eq(big.sign), self.sum.exp.eq(255)]
        with m.Elif(exponent <= 0):
            m.d.comb += self.sum.sign.eq(big.sign)  # flush to zero
        with m.Else():
            m.d.comb += [
                self.sum.sign.eq(big.sign),
                self.sum.exp.eq(exponent[:8]),
                self.sum.frac.eq(mantissa[:23]),
            ]
        return m
