"""The fixed-point accumulator of a PE: a pass's fp32 sums added exactly in a wide frame, rounded once (SPEC 2)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring

from dashraker.formats import FIXED_POINT_FRAME
from dashraker.hw.numerics.accumulator import ACCUMULATOR_SIGNATURE
from dashraker.hw.numerics.float import FP32_LAYOUT, canonical_nan, significand
from dashraker.hw.numerics.integer_rounder import INTEGER_ROUNDER_LATENCY, IntegerRounder

__all__ = ["FixedPointAccumulator", "FIXED_ACCUMULATOR_LATENCY"]

# Cycles from a pass's last sum entering to its result: aligning, negating, the add
# loop, then the rounding stages and the result register.
FIXED_ACCUMULATOR_LATENCY = 3 + INTEGER_ROUNDER_LATENCY + 1
EXPONENT_BITS = 9  # signed biased exponents of the frame's places (the top is below 255)

# What a pass's specials make of its result; NONE: its rounded sum.
SPECIALS = data.StructLayout({"nan": 1, "pos_inf": 1, "neg_inf": 1, "out": 1})
NONE, NAN, POS_INF, NEG_INF = range(4)


class FixedPointAccumulator(wiring.Component):
    """Adds the sums of a pass exactly in a two's complement frame and rounds the total once to fp32.

    The frame (``FIXED_POINT_FRAME``: 128 bits, least significant bit 2^-64) is the
    golden ``models.baseline.fixed_point_accumulate``'s. A registered shifter aligns
    each sum to the frame (bits below it dropped, towards zero) and a second stage
    negates it where it is negative, so the frame's add is the only one-cycle loop
    (about 110 MHz alone on ECP5, where the fp32 adder's loop gave 44). A pass's total
    goes through six registered rounding stages: magnitude; leading and trailing
    zeros of each 16 bits, then of the whole; normalisation by 16 places, then by the
    rest; rounding to nearest even.
    IEEE's specials stay sticky over the pass: a NaN or Infs of both signs give the
    canonical NaN, an Inf of one sign that Inf; without them, a sum of 2^63 or more in
    magnitude or a running total leaving the frame gives the canonical NaN.

    Its ports are the ``Accumulator``'s, so ``MacUnit`` takes either.

    Attributes
    ----------
    latency : int
        Cycles from a pass's last sum on ``sum`` to its ``result`` (``FIXED_ACCUMULATOR_LATENCY``).

    Ports
    -----
    valid, last, sum, result, result_valid
        As ``Accumulator``'s.
    """

    def __init__(self):
        self.latency = FIXED_ACCUMULATOR_LATENCY
        super().__init__(ACCUMULATOR_SIGNATURE)

    def elaborate(self, platform):
        m = Module()
        width, lsb = FIXED_POINT_FRAME
        top = width + 126 + lsb  # biased exponent of the frame's limit 2^(width - 1 + lsb)
        # The frame lies inside fp32's normal numbers, so a rounded total neither overflows nor flushes.
        assert -126 <= lsb and top < 255
        value = self.sum

        # Align: the significand times 2^(exp - 150 - lsb), a right shift of it placed above the frame
        # (an exponent past the frame wraps the distance: its sum is marked out anyway).
        shifted = Signal(width)
        shifted_sign = Signal()
        shifted_specials = Signal(SPECIALS)
        shifted_flags = Signal(2)  # (valid, last) beside the data, stage by stage
        distance = Signal(range(width + 150 + lsb + 1))
        special = value.exp == 255
        m.d.comb += distance.eq(width + 150 + lsb - value.exp)
        m.d.sync += [
            shifted.eq((Cat(Const(0, width), significand(value)) >> distance)[:width]),
            shifted_sign.eq(value.sign),
            shifted_specials.eq(Cat(special & (value.frac != 0), special & (value.frac == 0) & ~value.sign,
                                    special & (value.frac == 0) & value.sign, ~special & (value.exp >= top))),
            shifted_flags.eq(Cat(self.valid, self.last)),
        ]

        # Negate where negative: a carry chain of its own, out of the loop.
        aligned = Signal(signed(width))
        aligned_specials = Signal(SPECIALS)
        aligned_valid, aligned_last = aligned_flags = Signal(2)
        m.d.sync += [aligned.eq(Mux(shifted_sign, -shifted, shifted)), aligned_specials.eq(shifted_specials),
                     aligned_flags.eq(shifted_flags)]

        # The loop: the running total and the pass's sticky specials; the pass's last sum hands them on.
        total = Signal(signed(width))
        total_specials = Signal(SPECIALS)
        added = Signal(signed(width + 1))
        specials = Signal(SPECIALS)
        m.d.comb += added.eq(total + aligned)
        for name in ("nan", "pos_inf", "neg_inf"):
            m.d.comb += specials[name].eq(total_specials[name] | aligned_specials[name])
        # a carry into the sign bit: the running total left the frame
        m.d.comb += specials.out.eq(total_specials.out | aligned_specials.out | (added[width] != added[width - 1]))
        passed = Signal(signed(width))
        passed_kind = Signal(range(4))
        passed_valid = Signal()
        m.d.sync += passed_valid.eq(aligned_valid & aligned_last)
        with m.If(aligned_valid & aligned_last):
            m.d.sync += [total.eq(0), total_specials.eq(0), passed.eq(added[:width]),
                         passed_kind.eq(_kind(specials))]
        with m.Elif(aligned_valid):
            m.d.sync += [total.eq(added[:width]), total_specials.eq(specials)]

        # Rounding: six registered stages (``IntegerRounder``), the pass's kind beside the value.
        m.submodules.rounder = rounder = IntegerRounder(width, EXPONENT_BITS, range(4))
        m.d.comb += [rounder.valid.eq(passed_valid), rounder.value.eq(passed), rounder.top.eq(top),
                     rounder.tag.eq(passed_kind)]
        rounded = Signal(FP32_LAYOUT)
        m.d.comb += [rounded.sign.eq(rounder.sign), rounded.exp.eq(rounder.exponent), rounded.frac.eq(rounder.mantissa[:23])]
        rounded_kind, rounded_valid = rounder.result_tag, rounder.result_valid
        m.d.sync += self.result_valid.eq(rounded_valid)
        with m.If(rounded_valid):
            with m.Switch(rounded_kind):
                with m.Case(NONE):
                    m.d.sync += self.result.eq(rounded)
                with m.Case(NAN):
                    m.d.sync += self.result.eq(canonical_nan())
                with m.Case(POS_INF):
                    m.d.sync += self.result.eq(Cat(Const(0, 23), Const(255, 8), Const(0, 1)))
                with m.Case(NEG_INF):
                    m.d.sync += self.result.eq(Cat(Const(0, 23), Const(255, 8), Const(1, 1)))
        return m


def _kind(specials):
    """What a pass's sticky specials make of its result: NONE, NAN, POS_INF or NEG_INF."""
    both = specials.pos_inf & specials.neg_inf
    return Mux(specials.nan | both, NAN,
               Mux(specials.pos_inf, POS_INF, Mux(specials.neg_inf, NEG_INF, Mux(specials.out, NAN, NONE))))
