"""The fixed-point accumulator of a PE: a pass's fp32 sums added exactly in a wide frame, rounded once (SPEC 2)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring

from dashraker.formats import FIXED_POINT_FRAME
from dashraker.hw.numerics.accumulator import ACCUMULATOR_SIGNATURE
from dashraker.hw.numerics.float import FP32_LAYOUT, canonical_nan, significand
from dashraker.hw.numerics.rounding import registered_leading_zeros, round_nearest_even

__all__ = ["FixedPointAccumulator", "FIXED_ACCUMULATOR_LATENCY"]

# Cycles from a pass's last sum entering to its result: aligning, negating, the add
# loop, then six rounding stages and the result register.
FIXED_ACCUMULATOR_LATENCY = 10

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

        # Rounding, stage 1: sign and magnitude; stage 2: the magnitude's leading and trailing zeros in each
        # 16 bits; stage 3: those joined into its leading and trailing zeros.
        sign = Signal()
        magnitude = Signal(width)
        kind = Signal(range(4))
        rounding = Signal()  # the pass's valid, stage by stage
        m.d.sync += [sign.eq(passed < 0), magnitude.eq(Mux(passed < 0, -passed, passed)), kind.eq(passed_kind),
                     rounding.eq(passed_valid)]
        chunked_sign, chunked, chunked_kind, chunked_valid = _registered(m, sign, magnitude, kind, rounding)
        chunked_zeros = registered_leading_zeros(m, magnitude)
        chunked_trailing = registered_leading_zeros(m, magnitude[::-1])
        counted_sign, counted, counted_kind, counted_valid, zeros, trailing = _registered(
            m, chunked_sign, chunked, chunked_kind, chunked_valid, chunked_zeros, chunked_trailing)

        # Stage 4: the leading one shifted into the top 16 places; the sticky bit: ones below the guard
        # bit (the leading one's place - 24), so more than 25 places from the top after the shift.
        coarse = Signal(40)
        fine = Signal(4)
        sticky = Signal()
        exponent = Signal(signed(10))
        coarse_sign = Signal()
        coarse_kind = Signal(range(4))
        coarse_valid = Signal()
        m.d.sync += [coarse.eq((counted << Cat(Const(0, 4), zeros[4:]))[width - 40:]), fine.eq(zeros[:4]),
                     sticky.eq(trailing + zeros < width - 25),
                     exponent.eq(Mux(counted == 0, 0, width - 1 + lsb + 127 - zeros)),
                     coarse_sign.eq(counted_sign), coarse_kind.eq(counted_kind), coarse_valid.eq(counted_valid)]

        # Stage 5: the leading one at the top: 24 bits, the guard bit, the sticky bit.
        normalised = Signal(26)
        normalised_exponent = Signal(signed(10))
        normalised_sign = Signal()
        normalised_kind = Signal(range(4))
        normalised_valid = Signal()
        m.d.sync += [normalised.eq(Cat(sticky, (coarse << fine)[15:40])), normalised_exponent.eq(exponent),
                     normalised_sign.eq(coarse_sign), normalised_kind.eq(coarse_kind),
                     normalised_valid.eq(coarse_valid)]

        # Stage 6: to nearest even (a zero total, positive, keeps exponent 0: +0.0); then the result register.
        mantissa, rounded_exponent = round_nearest_even(m, normalised[2:], normalised_exponent,
                                                        guard=normalised[1], sticky=normalised[0])
        rounded = Signal(FP32_LAYOUT)
        rounded_kind = Signal(range(4))
        rounded_valid = Signal()
        m.d.sync += [rounded.sign.eq(normalised_sign), rounded.exp.eq(rounded_exponent),
                     rounded.frac.eq(mantissa[:23]),
                     rounded_kind.eq(normalised_kind), rounded_valid.eq(normalised_valid)]
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


def _registered(m, *values):
    """Each of ``values`` registered: a pipeline stage's signals."""
    registers = [Signal.like(value) for value in values]
    m.d.sync += [register.eq(value) for register, value in zip(registers, values)]
    return registers


def _kind(specials):
    """What a pass's sticky specials make of its result: NONE, NAN, POS_INF or NEG_INF."""
    both = specials.pos_inf & specials.neg_inf
    return Mux(specials.nan | both, NAN,
               Mux(specials.pos_inf, POS_INF, Mux(specials.neg_inf, NEG_INF, Mux(specials.out, NAN, NONE))))
