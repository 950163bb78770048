"""Normalisation and rounding helpers shared by the FP units."""

from amaranth.hdl import Signal, signed

__all__ = ["leading_zeros", "round_nearest_even"]


def leading_zeros(m, value):
    """A signal counting the leading zeros of ``value`` (its width when all zero)."""
    width = len(value)
    count = Signal(range(width + 1), init=width)
    m.d.comb += count.eq(width)
    for bit in range(width):  # later (higher) bits take priority
        with m.If(value[bit]):
            m.d.comb += count.eq(width - 1 - bit)
    return count


def round_nearest_even(m, mantissa, exponent, *, guard, sticky):
    """Round a normalised significand (hidden one at its MSB) to nearest, ties to even.

    Returns ``(mantissa, exponent)`` of the same widths; a carry out of the
    significand renormalises it and increments the exponent.
    """
    width = len(mantissa)
    rounded = Signal(width + 1)
    m.d.comb += rounded.eq(mantissa + (guard & (sticky | mantissa[0])))
    out_mantissa = Signal(width)
    out_exponent = Signal(signed(len(exponent) + 1))
    with m.If(rounded[width]):
        m.d.comb += [out_mantissa.eq(rounded[1:]), out_exponent.eq(exponent + 1)]
    with m.Else():
        m.d.comb += [out_mantissa.eq(rounded[:width]), out_exponent.eq(exponent)]
    return out_mantissa, out_exponent
