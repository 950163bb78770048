"""Normalisation and rounding helpers shared by the FP units."""

from amaranth.hdl import Cat, Const, Mux, Signal, signed

__all__ = ["leading_zeros", "registered_leading_zeros", "round_nearest_even"]


def leading_zeros(m, value):
    """A signal counting the leading zeros of ``value`` (its width when all zero).

    Built as a balanced tree (each node joins the counts of its two halves), so its
    depth grows with log2 of the width instead of a priority chain per bit.
    """
    return _count(m, value, *_bits_joined(m, _padded(m, value)))


def registered_leading_zeros(m, value, chunk=16):
    """``leading_zeros`` of ``value`` two cycles later.

    The counts of each ``chunk`` bits (a power of two) are registered, then joined in
    groups (the larger half of the tree's levels above them) and registered, then the
    groups joined: a 512-bit count joined from its chunks in one cycle took 5 LUT
    levels and 8.8 ns of routing in a 2x2x8 tile on ECP5.
    """
    chunks = _joined_registered(m, [(Const(0, 0), ~bit) for bit in _padded(m, value)], chunk, "chunk")
    levels = len(chunks).bit_length() - 1
    groups = _joined_registered(m, chunks, 1 << (levels + 1) // 2, "group")
    return _count(m, value, *_join(m, groups))


def _joined_registered(m, nodes, size, name):
    """Each ``size`` of ``nodes`` joined (``_join``) and registered: a pipeline stage of the tree."""
    joined = []
    for start in range(0, len(nodes), size):
        zeros, empty = _join(m, nodes[start:start + size])
        index = start // size
        register = Signal(len(zeros), name=f"{name}{index}_zeros"), Signal(name=f"{name}{index}_empty")
        m.d.sync += [register[0].eq(zeros), register[1].eq(empty)]
        joined.append(register)
    return joined


def _count(m, value, zeros, empty):
    """The leading zeros of ``value`` as a signal, from the tree's count and all-zero flag."""
    result = Signal(range(len(value) + 1))
    m.d.comb += result.eq(Mux(empty, len(value), zeros))
    return result


def _bits_joined(m, bits):
    """``_join`` over single bits: (leading zeros, all zero) of a power-of-two wide value."""
    return _join(m, [(Const(0, 0), ~bit) for bit in bits])


def _padded(m, value):
    """``value`` widened to a power of two with ones below its LSB (they never add leading zeros beyond its
    width), as a signal: a bit of an expression such as ``x[::-1]`` holds the whole expression."""
    width = len(value)
    padded = Signal(1 << max(0, (width - 1).bit_length()), name="lz_bits")
    m.d.comb += padded.eq(Cat(Const((1 << (len(padded) - width)) - 1, len(padded) - width), value))
    return padded


def _join(m, nodes):
    """(leading zeros, all zero) of a power-of-two count of equal power-of-two wide parts, from each part's
    (leading zeros, all zero), least significant part first; the count is exact unless all are zero.

    Every third level's nodes are signals: as expressions, every level holds the one below twice, and Amaranth
    walks expressions as trees (2**depth copies of the leaves: minutes of elaboration for a 384-bit
    accumulator); a signal per node instead costs a Signal for every bit (tens of seconds for a tile's PEs).
    """
    if len(nodes) == 1:
        return nodes[0]
    half = len(nodes) // 2
    high_zeros, high_empty = _join(m, nodes[half:])
    low_zeros, low_empty = _join(m, nodes[:half])
    zeros = Mux(high_empty, Cat(low_zeros, Const(1, 1)), Cat(high_zeros, Const(0, 1)))
    empty = high_empty & low_empty
    if (len(nodes).bit_length() - 1) % _LEVELS_PER_SIGNAL:
        return zeros, empty
    node = Signal(len(zeros), name="lz_zeros"), Signal(name="lz_empty")
    m.d.comb += [node[0].eq(zeros), node[1].eq(empty)]
    return node


_LEVELS_PER_SIGNAL = 3  # a leaf is held 2**3 times at most by the signal three levels up


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
