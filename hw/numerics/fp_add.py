"""IEEE binary32 adder, combinational: round to nearest even, FTZ/DAZ, canonical NaN (SPEC section 2)."""

from amaranth.hdl import C, Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.numerics.float import FP32_LAYOUT, canonical_nan, classify, significand
from dashraker.hw.numerics.rounding import leading_zeros, round_nearest_even

__all__ = ["FPAdder"]

# Far path: the 24-bit significand, then guard, round and sticky.
_WIDTH = 27
# Close path: the 24-bit significand and one bit below it (operands at most one place apart).
_CLOSE = 25


class FPAdder(wiring.Component):
    """``sum = a + b`` in IEEE binary32.

    Subnormal inputs are read as zeros of their sign, tiny results flush to a zero
    of the result's sign (an exact sum of normals below 2**-126 needs no rounding,
    so tininess before and after rounding agree), any NaN and Inf - Inf give
    0x7FC00000, and x + (-x) is +0. Purely combinational: latency 0.

    Two paths run side by side so that no path has both a long alignment shift and a
    long normalisation shift (the adder sits in the accumulator's one-cycle loop):

    * the close path takes subtractions of operands whose exponents differ by at most
      one and that cancel at least the leading bit: exact, so it normalises by the
      leading-zero count and needs no rounding;
    * the far path takes everything else: it aligns by the exponent difference with
      a sticky bit, and its sum needs at most one place of normalisation either way
      before rounding.

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

        # Order by exponent alone (a on a tie); both differences are computed at once.
        a_minus_b = Signal(signed(9))
        b_minus_a = Signal(signed(9))
        m.d.comb += [a_minus_b.eq(a.exp - b.exp), b_minus_a.eq(b.exp - a.exp)]
        a_big = a_minus_b >= 0
        distance = Signal(8)
        big_exp = Signal(8)
        big_sign = Signal()
        big_sig = Signal(24)
        small_sig = Signal(24)
        m.d.comb += [
            distance.eq(Mux(a_big, a_minus_b[:8], b_minus_a[:8])),
            big_exp.eq(Mux(a_big, a.exp, b.exp)),
            big_sign.eq(Mux(a_big, a.sign, b.sign)),
            big_sig.eq(Mux(a_big, significand(a), significand(b))),
            small_sig.eq(Mux(a_big, significand(b), significand(a))),
        ]
        subtract = a.sign ^ b.sign

        # Close path: |big - small| in a 25-bit frame, exact.
        close_big = Cat(C(0, 1), big_sig)
        close_small = Mux(a_minus_b[0], small_sig, Cat(C(0, 1), small_sig))  # odd difference: one place apart
        forward = Signal(_CLOSE + 1)
        backward = Signal(_CLOSE + 1)
        m.d.comb += [forward.eq(close_big - close_small), backward.eq(close_small - close_big)]
        negative = forward[_CLOSE]  # only when the exponents are equal
        close = Signal(_CLOSE)
        m.d.comb += close.eq(Mux(negative, backward[:_CLOSE], forward[:_CLOSE]))
        close_zeros = leading_zeros(m, close)
        close_normalized = Signal(_CLOSE)
        close_exp = Signal(signed(10))
        m.d.comb += [
            close_normalized.eq(close << close_zeros),
            close_exp.eq(big_exp - close_zeros),
        ]
        use_close = subtract & (distance <= 1) & ~close[_CLOSE - 1]

        # Far path: both alignments are computed beside the ordering, from the raw differences.
        aligned = Mux(a_big, _align(significand(b), a_minus_b[:8]), _align(significand(a), b_minus_a[:8]))
        big_ext = Cat(C(0, 3), big_sig)
        total = Signal(_WIDTH + 1)
        m.d.comb += total.eq(Mux(subtract, big_ext - aligned, big_ext + aligned))

        # At most one place of normalisation: right on a carry out, left after a one-bit cancellation.
        normalized = Signal(_WIDTH)
        far_exp = Signal(signed(10))
        with m.If(total[_WIDTH]):
            m.d.comb += [normalized.eq(Cat(total[0] | total[1], total[2:])), far_exp.eq(big_exp + 1)]
        with m.Elif(total[_WIDTH - 1]):
            m.d.comb += [normalized.eq(total[:_WIDTH]), far_exp.eq(big_exp)]
        with m.Else():
            m.d.comb += [normalized.eq(Cat(C(0, 1), total[: _WIDTH - 1])), far_exp.eq(big_exp - 1)]
        far_mantissa, far_rounded_exp = round_nearest_even(
            m, normalized[3:], far_exp, guard=normalized[2], sticky=normalized[:2].any()
        )

        # Range checks from the exponents before rounding, beside the rounding carry chain:
        # only the far path rounds, and an exact result below 2**-126 stays below it.
        rounds_up = far_rounded_exp != far_exp
        overflow = ~use_close & ((far_exp >= 255) | ((far_exp == 254) & rounds_up))
        underflow = Mux(use_close, close_exp <= 0, far_exp <= 0)
        sign = Mux(use_close, big_sign ^ negative, big_sign)

        with m.If(a_nan | b_nan | (a_inf & b_inf & (a.sign != b.sign))):
            m.d.comb += self.sum.eq(canonical_nan())
        with m.Elif(a_inf | b_inf):
            m.d.comb += self.sum.eq(Mux(a_inf, a.as_value(), b.as_value()))
        with m.Elif(a_zero & b_zero):
            m.d.comb += self.sum.sign.eq(a.sign & b.sign)
        with m.Elif(use_close & (close == 0)):
            pass  # exact cancellation: +0
        with m.Elif(overflow):
            m.d.comb += [self.sum.sign.eq(sign), self.sum.exp.eq(255)]
        with m.Elif(underflow):
            m.d.comb += self.sum.sign.eq(sign)  # flush to zero
        with m.Else():
            m.d.comb += [
                self.sum.sign.eq(sign),
                self.sum.exp.eq(Mux(use_close, close_exp[:8], far_rounded_exp[:8])),
                self.sum.frac.eq(Mux(use_close, close_normalized[1:24], far_mantissa[:23])),
            ]
        return m


def _align(significand, distance):
    """The 24-bit ``significand`` shifted right by ``distance`` into the far path's 27-bit frame.

    Bits shifted below the frame collapse into its sticky LSB, computed from a mask
    of the distance beside the shifter; 27 places or more leave only the sticky bit.
    """
    places = distance[:5]
    shifted = (Cat(C(0, 3), significand) >> places)[1:_WIDTH]
    below = Cat(*(places >= position + 3 for position in range(24)))
    sticky = (significand & below).any()
    return Mux(distance[5:].any(), significand.any(), Cat(sticky, shifted))
