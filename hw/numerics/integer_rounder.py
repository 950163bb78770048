"""A wide two's complement integer rounded to an fp32 significand and exponent, in eight registered stages."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.numerics.rounding import registered_leading_zeros, round_nearest_even

__all__ = ["INTEGER_ROUNDER_LATENCY", "IntegerRounder"]

# magnitude; zeros per 16 bits; joined in groups; joined; by 64 places; by 16 places; by the rest; to nearest even
INTEGER_ROUNDER_LATENCY = 8


def _registered(m, *values):
    """Each of ``values`` registered: a pipeline stage's signals."""
    registers = [Signal(value.shape()) for value in values]
    m.d.sync += [register.eq(value) for register, value in zip(registers, values)]
    return registers


class IntegerRounder(wiring.Component):
    """Rounds ``value * 2**(top - 127 - (width - 1))`` to nearest even, with an unbounded exponent.

    Stages: sign and magnitude; the magnitude's leading and trailing zeros in each 16
    bits; those joined in groups; the groups joined (one join of all took 8.8 ns of
    routing in a 2x2x8 tile on ECP5); the leading one shifted by a multiple of 64 places
    into the top 64 (the exponent, and the leading and trailing zeros summed for the
    sticky bit); by a multiple of 16 into the top 16 (the sticky bit: ones below the
    guard place); the leading one at the top; rounding. The shift by multiples of 16 is
    two stages (up to 8 and 4 inputs per bit for a ``width`` below 512) rather than one
    24-input select per bit, which took 10.5 ns of routing in a 2x2 tile on ECP5.
    Whoever uses it maps the exponent to fp32's range (flush, overflow) and its
    specials, which travel beside the value as ``tag``.

    Parameters
    ----------
    width : int
        Bits of ``value`` (at least 40).
    exponent_bits : int
        Bits of the signed ``top``.
    tag_shape : shape
        Whatever travels with the value.
    magnitude : bool
        ``value`` is a magnitude (unsigned) and ``negative`` its sign: a wide value's negation, whose carry
        chain would bound the clock in this first stage, is then the user's to pipeline.

    Ports
    -----
    valid, value, top, tag : In
        A value, the biased exponent of its bit ``width - 1``'s place, its tag.
    negative : In(1)
        With ``magnitude``: the value is negative.
    result_valid : Out(1)
        ``INTEGER_ROUNDER_LATENCY`` clock edges after ``valid``.
    sign : Out(1)
        The value is negative.
    exponent : Out(signed(exponent_bits + 1))
        The biased exponent of the rounded magnitude (0 for a zero value).
    mantissa : Out(24)
        The rounded significand, hidden one at bit 23 (0 for a zero value).
    tag : Out(tag_shape)
        The value's tag.
    """

    def __init__(self, width, exponent_bits, tag_shape, magnitude=False):
        if not isinstance(width, int) or width < 40:
            raise ValueError(f"width must be an integer of at least 40, not {width!r}")
        self.width, self.magnitude = width, magnitude
        super().__init__({
            "valid": In(1), "value": In(width if magnitude else signed(width)), "negative": In(1),
            "top": In(signed(exponent_bits)), "tag": In(tag_shape),
            "result_valid": Out(1), "sign": Out(1), "exponent": Out(signed(exponent_bits + 1)), "mantissa": Out(24),
            "result_tag": Out(tag_shape),
        })

    def elaborate(self, platform):
        m = Module()
        width = self.width
        value = self.value
        if self.magnitude:
            negative, magnitude = self.negative, value
        else:
            negative, magnitude = value < 0, Mux(value < 0, -value, value).as_unsigned()[:width]
        sign, magnitude, top, tag, valid = _registered(m, negative, magnitude, self.top, self.tag, self.valid)
        counting = _registered(m, *_registered(m, sign, magnitude, top, tag, valid))  # beside the counts' two stages
        leading = registered_leading_zeros(m, magnitude)
        trailing = registered_leading_zeros(m, magnitude[::-1])
        sign, counted, top, tag, valid, zeros, trailing = _registered(m, *counting, leading, trailing)

        # The top 40 bits from the leading one's multiple of 16 places down, selected in two steps: 88 bits by the
        # multiple of 64 (``counted`` padded below: a ``width`` below 88 holds fewer), then 40 of those by 16.
        grouped, places, span, exponent, sign, tag, valid = _registered(
            m, (Cat(Const(0, 48), counted) << Cat(Const(0, 6), zeros[6:]))[width - 40:width + 48], zeros[:6],
            trailing + zeros, Mux(zeros == width, 0, top - zeros), sign, tag, valid)
        coarse, fine, sticky, exponent, sign, tag, valid = _registered(
            m, (grouped << Cat(Const(0, 4), places[4:]))[48:88], places[:4], span < width - 25, exponent, sign, tag,
            valid)
        normalised, exponent, sign, tag, valid = _registered(
            m, Cat(sticky, (coarse << fine)[15:40]), exponent, sign, tag, valid)
        mantissa, rounded_exponent = round_nearest_even(m, normalised[2:], exponent,
                                                        guard=normalised[1], sticky=normalised[0])
        m.d.sync += [self.sign.eq(sign), self.exponent.eq(rounded_exponent), self.mantissa.eq(mantissa),
                     self.result_tag.eq(tag), self.result_valid.eq(valid)]
        return m
