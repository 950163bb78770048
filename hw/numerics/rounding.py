"""Normalisation and rounding helpers shared by the FP units."""

from amaranth.hdl import Cat, Const, Mux, Signal, signed

__all__ = ["leading_zeros", "round_nearest_even"]


def leading_zeros(m, value):
    """A signal counting the leading zeros of ``value`` (its width when all zero).

    Built as a balanced tree (each node joins the counts of its two halves), so its
    depth grows with log2 of the width instead of a priority chain per bit.
    """
    width = len(value)
    padded = 1 << max(0, (width - 1).bit_length())
    # Pad with ones below the LSB: they never add leading zeros beyond the width.
    zeros, empty = _zeros_and_empty(Cat(Const((1 << (padded - width)) - 1, padded - width), value))
    result = Signal(range(width + 1))
    m.d.comb += result.eq(Mux(empty, width, zeros))
    return result


def _zeros_and_empty(bits):
    """(leading zeros, all zero) of a power-of-two wide value; the count is exact unless it is all zero."""
    if len(bits) == 1:
        return Const(0, 0), ~bits[0]
    half = len(bits) // 2
    high_zeros, high_empty = _zeros_and_empty(bits[half:])
    low_zeros, low_empty = _zeros_and_empty(bits[:half])
    return Mux(high_empty, Cat(low_zeros, Const(1, 1)), Cat(high_zeros, Const(0, 1))), high_empty & low_empty


def round_nearest_even(m, mantissa, exponent, *, guard, sticky):
    """Round a normalised significand (hidden one at its MSB) to nearest, ties to even.

    Returns ``(mantissa, exponent)`` of the same widths; a carry out of the
    significand renormalises it and increments the exponent. The carry is known
    from the significand being all ones, beside the increment's carry chain, so the
    exponent does not wait for that chain.
    """
    width = len(mantissa)
    increment = guard & (sticky | mantissa[0])
    rounded = Signal(width)
    m.d.comb += rounded.eq(mantissa + increment)
    carry = mantissa.all() & increment
    out_mantissa = Signal(width)
    out_exponent = Signal(signed(len(exponent) + 1))
    with m.If(carry):
        m.d.comb += [out_mantissa.eq(1 << (width - 1)), out_exponent.eq(exponent + 1)]
    with m.Else():
        m.d.comb += [out_mantissa.eq(rounded), out_exponent.eq(exponent)]
    return out_mantissa, out_exponent
