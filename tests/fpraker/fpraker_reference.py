"""Slow scalar reference of the FPRaker arithmetic, written independently of the vectorised golden model.

It follows the prose of ``dashraker.models.fpraker``'s docstring term by term with
Python integers and exact rationals, so that the table-driven torch model is checked
against a second, straightforward reading of the same rules.
"""

import math
import struct
from fractions import Fraction

__all__ = ["naf_terms", "reference_pe", "reference_tile"]

NAN = 0x7FC00000


def naf_terms(x):
    """Non-adjacent form of a non-negative int by the textbook digit loop, MSB first: [(t, sign)]."""
    digits = []
    t = 0
    while x:
        if x & 1:
            d = 2 - (x & 3)
            x -= d
            digits.append((t, d))
        x >>= 1
        t += 1
    return digits[::-1]


def _fields(bits):
    return (bits >> 15) & 1, (bits >> 7) & 0xFF, (bits & 0x7F) | 0x80


def _round_to_fp32(value):
    """Exact rational -> fp32 bits: RNE with unbounded exponent, FTZ after rounding, overflow to Inf."""
    if value == 0:
        return 0
    sign = 1 if value < 0 else 0
    mag = abs(value)
    e = math.floor(math.log2(mag))
    while Fraction(2) ** e > mag:
        e -= 1
    while Fraction(2) ** (e + 1) <= mag:
        e += 1
    scaled = mag / Fraction(2) ** (e - 23)  # in [2**23, 2**24)
    q = math.floor(scaled)
    rest = scaled - q
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and q % 2 == 1):
        q += 1
    if q == 1 << 24:
        q >>= 1
        e += 1
    biased = e + 127
    if biased < 1:
        return sign << 31
    if biased > 254:
        return (sign << 31) | 0x7F800000
    return (sign << 31) | (biased << 23) | (q & 0x7FFFFF)


def reference_pe(a_row, b_row, guard_bits=3, zero_block_cycles=1):
    """a_row, b_row: lists of blocks (lists of bf16 ints). Returns (fp32 bits, [cost per block], terms, skipped)."""
    g = guard_bits
    window, exponent, empty = 0, 0, True
    nan = pos_inf = neg_inf = False
    costs, terms, skipped = [], 0, 0
    for a_block, b_block in zip(a_row, b_row):
        lanes = []
        for a, b in zip(a_block, b_block):
            (sa, ea, ma), (sb, eb, mb) = _fields(a), _fields(b)
            a_zero, b_zero = ea == 0, eb == 0
            a_inf, b_inf = ea == 255 and ma == 0x80, eb == 255 and mb == 0x80
            a_nan, b_nan = ea == 255 and ma != 0x80, eb == 255 and mb != 0x80
            if a_nan or b_nan or (a_inf and b_zero) or (a_zero and b_inf):
                nan = True
            elif a_inf or b_inf:
                if sa ^ sb:
                    neg_inf = True
                else:
                    pos_inf = True
            elif not (a_zero or b_zero):
                lanes.append((sa ^ sb, ea + eb - 127, ma, mb))
        if not lanes:
            costs.append(zero_block_cycles)
            continue
        top = max(pe for _, pe, _, _ in lanes)
        if not empty:
            top = max(top, exponent)
        total = window >> (top - exponent) if not empty else 0
        lane_terms = []
        for negative, pe_, ma, mb in lanes:
            d = top - pe_
            count = 0
            for t, s in naf_terms(ma):
                msb_position = t + 7 + (9 + g - d)  # bit index of sig_b's MSB in the window
                if msb_position < 0:
                    skipped += 1
                    continue
                count += 1
                signed = (-1) ** negative * s * mb
                shift = t + 9 + g - d
                total += signed << shift if shift >= 0 else signed >> -shift
            lane_terms.append(count)
            terms += count
        costs.append(max(1, max(lane_terms)))
        carry = 0
        while not (-(1 << (24 + g)) <= total >> carry < (1 << (24 + g))):
            carry += 1
        window, exponent = total >> carry, top + carry
        empty = window == 0
    if nan or (pos_inf and neg_inf):
        bits = NAN
    elif pos_inf:
        bits = 0x7F800000
    elif neg_inf:
        bits = 0xFF800000
    elif empty:
        bits = 0
    else:
        bits = _round_to_fp32(Fraction(window) * Fraction(2) ** (exponent - 150 - g))
    return bits, costs, terms, skipped


def reference_tile(a_bits, b_bits, guard_bits=3, zero_block_cycles=1):
    """a_bits [rows][steps][lanes], b_bits [cols][steps][lanes] -> (outputs bits [rows][cols], block costs, terms, skipped)."""
    outputs, costs, terms, skipped = [], None, 0, 0
    for a_row in a_bits:
        out_row = []
        for b_col in b_bits:
            bits, pe_costs, pe_terms, pe_skipped = reference_pe(a_row, b_col, guard_bits, zero_block_cycles)
            out_row.append(bits)
            costs = pe_costs if costs is None else [max(x, y) for x, y in zip(costs, pe_costs)]
            terms += pe_terms
            skipped += pe_skipped
        outputs.append(out_row)
    return outputs, costs, terms, skipped


def fp32_value(bits):
    """Python float of fp32 bits (for readable failure messages)."""
    return struct.unpack("<f", struct.pack("<I", bits))[0]
