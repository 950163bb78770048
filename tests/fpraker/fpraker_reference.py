"""Slow scalar reference of the FPRaker arithmetic, written independently of the vectorised golden model.

It follows the prose of ``dashraker.models.fpraker``'s docstring term by term with
Python integers and exact rationals, so that the table-driven torch model is checked
against a second, straightforward reading of the same rules.
"""

import math
import struct
from fractions import Fraction

__all__ = ["naf_terms", "reference_pe", "reference_round", "reference_tile"]

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


def _wrap64(x):
    """Python int -> the 64-bit two's complement value the accumulator register holds."""
    return (x + (1 << 63)) % (1 << 64) - (1 << 63)


def reference_pe(a_row, b_row, guard_bits=3, zero_block_cycles=1):
    """a_row, b_row: lists of blocks (lists of bf16 ints). Returns (fp32 bits, [cost per block], terms, skipped).

    The frame window: E is the running maximum of the live product exponents, F = 8 * floor(E / 8), the
    64-bit accumulator U is worth U * 2**(F - 150 - G); a live step moves U to its new frame (floor) and adds
    its exact sum of floored term contributions, scaled by 2**(E - F).
    """
    g = guard_bits
    accumulator, top, frame = 0, None, None  # U, E and F; E and F are None before the first live lane
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
        step_top = max(pe_ for _, pe_, _, _ in lanes)
        top = step_top if top is None else max(top, step_top)
        new_frame = 8 * (top // 8)  # floor: a negative E has its frame below it
        if frame is not None:
            move = new_frame - frame
            accumulator = accumulator // 2 ** min(move, 63)  # floor; at 63 and beyond only the sign is left
        frame = new_frame
        step_sum = 0
        lane_terms = []
        for negative, pe_, ma, mb in lanes:
            d = top - pe_
            count = 0
            for t, s in naf_terms(ma):
                if t + 7 + 9 + g - d < 0:  # the MSB of sig_b << t falls below the unit 2**(E - 150 - G)
                    skipped += 1
                    continue
                count += 1
                step_sum += math.floor(Fraction((-1) ** negative * s * mb) * Fraction(2) ** (t + 9 + g - d))
            lane_terms.append(count)
            terms += count
        costs.append(max(1, max(lane_terms)))
        accumulator = _wrap64(accumulator + step_sum * 2 ** (top - frame))
    if nan or (pos_inf and neg_inf):
        bits = NAN
    elif pos_inf:
        bits = 0x7F800000
    elif neg_inf:
        bits = 0xFF800000
    else:
        bits = reference_round(accumulator, frame, g)
    return bits, costs, terms, skipped


def reference_round(accumulator, frame, guard_bits):
    """fp32 bits of the accumulator ``U * 2**(F - 150 - G)`` (+0 for U = 0)."""
    return _round_to_fp32(Fraction(accumulator) * Fraction(2) ** (frame - 150 - guard_bits)) if accumulator else 0


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
