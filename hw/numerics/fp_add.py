"""IEEE binary32 adder, combinational or pipelined: round to nearest even, FTZ/DAZ, canonical NaN (SPEC section 2)."""

from types import SimpleNamespace

from amaranth.hdl import C, Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.numerics.float import FP32_LAYOUT, canonical_nan, classify, significand
from dashraker.hw.numerics.pipeline import Cuts
from dashraker.hw.numerics.rounding import leading_zeros, round_nearest_even

__all__ = ["FPAdder", "ADDER_CUTS"]

# Far path: the 24-bit significand, then guard, round and sticky.
_WIDTH = 27
# Close path: the 24-bit significand and one bit below it (operands at most one place apart).
_CLOSE = 25

# The registers of each stage count: after the exponent comparison and the ordering ("order"), after the
# alignment and the close path's subtraction ("align"), after the far path's addition and the close path's
# leading-zero count ("add"), after the normalisation and rounding ("round"), at the output.
ADDER_CUTS = {0: (), 1: ("output",), 2: ("add", "output"), 3: ("align", "add", "output"),
              4: ("align", "add", "round", "output"), 5: ("order", "align", "add", "round", "output")}


class FPAdder(wiring.Component):
    """``sum = a + b`` in IEEE binary32.

    Subnormal inputs are read as zeros of their sign, tiny results flush to a zero
    of the result's sign (an exact sum of normals below 2**-126 needs no rounding,
    so tininess before and after rounding agree), any NaN and Inf - Inf give
    0x7FC00000, and x + (-x) is +0.

    Two paths run side by side so that no path has both a long alignment shift and a
    long normalisation shift:

    * the close path takes subtractions of operands whose exponents differ by at most
      one and that cancel at least the leading bit: exact, so it normalises by the
      leading-zero count and needs no rounding;
    * the far path takes everything else: it aligns by the exponent difference with
      a sticky bit, and its sum needs at most one place of normalisation either way
      before rounding.

    With ``stages`` > 0 the adder is pipelined: one register at its output, a second
    after the far path's addition and the close path's leading-zero count, a third
    after the alignment and the close path's subtraction, a fourth between the
    normalisation and rounding and the range checks, a fifth after the exponent
    comparison and the ordering (``ADDER_CUTS``). Every stage count gives the same bits; a new pair of addends
    enters every cycle.

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 (combinational, as a one-cycle accumulator loop needs) to 5.

    Attributes
    ----------
    latency : int
        Cycles from ``a``/``b`` to ``sum``: ``stages``.

    Ports
    -----
    a, b : In(FP32_LAYOUT)
        Addends.
    sum : Out(FP32_LAYOUT)
        The rounded sum.
    """

    def __init__(self, stages=0):
        if stages not in ADDER_CUTS:
            raise ValueError(f"FP adder stages must be one of {', '.join(map(str, ADDER_CUTS))}, not {stages!r}")
        self.latency = stages
        super().__init__({"a": In(FP32_LAYOUT), "b": In(FP32_LAYOUT), "sum": Out(FP32_LAYOUT)})

    def elaborate(self, platform):
        m = Module()
        cuts = Cuts(m, ADDER_CUTS[self.latency])
        special = _special_cases(self.a, self.b)
        special, ordered = _cross(cuts, "order", special, self._order(m))
        special, paths = _cross(cuts, "align", special, self._paths(m, ordered))
        special, added = _cross(cuts, "add", special, self._add(m, paths))
        special, normalized = _cross(cuts, "round", special, self._normalize_and_round(m, added))
        (result,) = cuts.cross("output", sum=self._result(m, special, normalized))
        m.d.comb += self.sum.eq(result)
        return m

    def _order(self, m):
        """Order by exponent alone (a on a tie); both differences are computed at once."""
        a, b = self.a, self.b
        a_minus_b = Signal(signed(9))
        b_minus_a = Signal(signed(9))
        m.d.comb += [a_minus_b.eq(a.exp - b.exp), b_minus_a.eq(b.exp - a.exp)]
        a_big = a_minus_b >= 0
        a_sig, b_sig = significand(a), significand(b)
        distance = Signal(8)
        big_exp = Signal(8)
        big_sign = Signal()
        big_sig = Signal(24)
        small_sig = Signal(24)
        m.d.comb += [
            distance.eq(Mux(a_big, a_minus_b[:8], b_minus_a[:8])),
            big_exp.eq(Mux(a_big, a.exp, b.exp)),
            big_sign.eq(Mux(a_big, a.sign, b.sign)),
            big_sig.eq(Mux(a_big, a_sig, b_sig)),
            small_sig.eq(Mux(a_big, b_sig, a_sig)),
        ]
        return dict(a_minus_b=a_minus_b, b_minus_a=b_minus_a, distance=distance, big_exp=big_exp, big_sign=big_sign,
                    big_sig=big_sig, small_sig=small_sig, a_sig=a_sig, b_sig=b_sig, subtract=a.sign ^ b.sign)

    def _paths(self, m, v):
        """The close path's difference, |big - small| in a 25-bit frame, exact; the far path's alignment, both
        computed beside the ordering from the raw differences."""
        a_big = v.a_minus_b >= 0
        close_big = Cat(C(0, 1), v.big_sig)
        close_small = Mux(v.a_minus_b[0], v.small_sig, Cat(C(0, 1), v.small_sig))  # odd difference: one place apart
        forward = Signal(_CLOSE + 1)
        backward = Signal(_CLOSE + 1)
        m.d.comb += [forward.eq(close_big - close_small), backward.eq(close_small - close_big)]
        negative = forward[_CLOSE]  # only when the exponents are equal
        close = Signal(_CLOSE)
        m.d.comb += close.eq(Mux(negative, backward[:_CLOSE], forward[:_CLOSE]))
        aligned = Mux(a_big, _align(v.b_sig, v.a_minus_b[:8]), _align(v.a_sig, v.b_minus_a[:8]))
        return dict(big_exp=v.big_exp, big_sign=v.big_sign, big_sig=v.big_sig, subtract=v.subtract,
                    near=v.distance <= 1, negative=negative, close=close, aligned=aligned)

    def _add(self, m, v):
        """The close path's leading-zero count; the far path's sum."""
        close_zeros = leading_zeros(m, v.close)
        use_close = v.subtract & v.near & ~v.close[_CLOSE - 1]
        big_ext = Cat(C(0, 3), v.big_sig)
        total = Signal(_WIDTH + 1)
        m.d.comb += total.eq(Mux(v.subtract, big_ext - v.aligned, big_ext + v.aligned))
        return dict(big_exp=v.big_exp, big_sign=v.big_sign, negative=v.negative, close=v.close,
                    close_zeros=close_zeros, use_close=use_close, total=total)

    def _normalize_and_round(self, m, v):
        """The close path normalised by its leading zeros; the far path's at most one place of normalisation (right
        on a carry out, left after a one-bit cancellation), then its rounding."""
        close_normalized = Signal(_CLOSE)
        close_exp = Signal(signed(10))
        m.d.comb += [
            close_normalized.eq(v.close << v.close_zeros),
            close_exp.eq(v.big_exp - v.close_zeros),
        ]
        total = v.total
        normalized = Signal(_WIDTH)
        far_exp = Signal(signed(10))
        with m.If(total[_WIDTH]):
            m.d.comb += [normalized.eq(Cat(total[0] | total[1], total[2:])), far_exp.eq(v.big_exp + 1)]
        with m.Elif(total[_WIDTH - 1]):
            m.d.comb += [normalized.eq(total[:_WIDTH]), far_exp.eq(v.big_exp)]
        with m.Else():
            m.d.comb += [normalized.eq(Cat(C(0, 1), total[: _WIDTH - 1])), far_exp.eq(v.big_exp - 1)]
        far_mantissa, far_rounded_exp = round_nearest_even(
            m, normalized[3:], far_exp, guard=normalized[2], sticky=normalized[:2].any()
        )
        return dict(big_sign=v.big_sign, negative=v.negative, use_close=v.use_close, cancelled=v.close == 0,
                    close_normalized=close_normalized, close_exp=close_exp, far_exp=far_exp,
                    far_mantissa=far_mantissa, far_rounded_exp=far_rounded_exp)

    def _result(self, m, special, v):
        """The sum: a special case's, or the chosen path's after the range checks. The checks read the exponents
        before rounding, beside the rounding carry chain: only the far path rounds, and an exact result below
        2**-126 stays below it."""
        rounds_up = v.far_rounded_exp != v.far_exp
        overflow = ~v.use_close & ((v.far_exp >= 255) | ((v.far_exp == 254) & rounds_up))
        underflow = Mux(v.use_close, v.close_exp <= 0, v.far_exp <= 0)
        sign = Mux(v.use_close, v.big_sign ^ v.negative, v.big_sign)

        result = Signal(FP32_LAYOUT)
        with m.If(special.nan):
            m.d.comb += result.eq(canonical_nan())
        with m.Elif(special.inf):
            m.d.comb += [result.sign.eq(special.inf_sign), result.exp.eq(255)]
        with m.Elif(special.zero):
            m.d.comb += result.sign.eq(special.zero_sign)
        with m.Elif(v.use_close & v.cancelled):
            pass  # exact cancellation: +0
        with m.Elif(overflow):
            m.d.comb += [result.sign.eq(sign), result.exp.eq(255)]
        with m.Elif(underflow):
            m.d.comb += result.sign.eq(sign)  # flush to zero
        with m.Else():
            m.d.comb += [
                result.sign.eq(sign),
                result.exp.eq(Mux(v.use_close, v.close_exp[:8], v.far_rounded_exp[:8])),
                result.frac.eq(Mux(v.use_close, v.close_normalized[1:24], v.far_mantissa[:23])),
            ]
        return result


def _special_cases(a, b):
    """Whether the sum is NaN, an infinity (and its sign) or a zero of two zeros (and its sign)."""
    a_zero, a_inf, a_nan = classify(a)
    b_zero, b_inf, b_nan = classify(b)
    return SimpleNamespace(nan=a_nan | b_nan | (a_inf & b_inf & (a.sign != b.sign)), inf=a_inf | b_inf,
                           inf_sign=Mux(a_inf, a.sign, b.sign), zero=a_zero & b_zero, zero_sign=a.sign & b.sign)


def _cross(cuts, cut, special, values):
    """The special cases (a namespace) and a stage's ``values`` (a dict, in the cut's order) as seen after ``cut``,
    both as namespaces."""
    crossed = dict(zip([*vars(special), *values], cuts.cross(cut, **vars(special), **values)))
    return (SimpleNamespace(**{name: crossed[name] for name in vars(special)}),
            SimpleNamespace(**{name: crossed[name] for name in values}))


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
