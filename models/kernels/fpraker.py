"""Fused Numba kernel of the FPRaker tile: ``dashraker.models.fpraker.tile`` bit for bit, at the mapper's volumes.

The reference (``models/fpraker/golden.py``, whose docstring states the arithmetic) runs each
step as a dozen array passes over every lane of every PE; this kernel walks passes, steps and
PEs in one compiled loop. A lane's contribution at alignment distance ``d`` splits into the
terms that stay whole (shifted left, together an exact multiple of ``b``) and at most four
that are floored one by one; both come from small tables (``_lane_tables``) instead of the
reference's 2**16 x (26 + G) table, which does not fit the caches, or a loop over the terms,
whose early exit the branch predictor cannot guess.

The mapper needs a pass's cycles and terms, not its outputs: ``tile_cycles`` gives them without the
accumulator. A PE's step is decided by its lanes' distances below the running maximum; while every
live lane is near enough to keep all of its terms (the common case: the lowest live exponents of the
row and of the column bound it), a lane's in-bound terms are its terms, and only the other steps
read the table of in-bound terms. It takes the mapper's stream sets and each pass's sets, decodes a
set once however many passes read it, and walks the passes in blocks of steps that stay in cache.
"""

import functools

import numba
import numpy as np
import torch
from numba.cpython.unsafe.numbers import leading_zeros  # numba's count-leading-zeros intrinsic (numba is pinned)

from dashraker.formats import CANONICAL_NAN_BITS
from dashraker.models.fpraker.golden import ACCUMULATOR_BITS, FRAME_BITS, TileResult, checked_arguments, encode_terms

__all__ = ["tile", "tile_values", "tile_cycles", "nonzero_values"]

_NONE = -(1 << 24)  # exponent of lanes without a product and E before a pass's first live lane, as in the reference
_DEAD = _NONE // 2  # product exponents below this have no product
_FLOORED = 7  # a floored term is shifted right by 1..7 (by more, it is out of bounds)
_OFFSET = (1 << FRAME_BITS) - 1  # E & _OFFSET is the offset D of the running maximum E in its frame F = E & ~_OFFSET
_MOST_SHIFT = ACCUMULATOR_BITS - 1  # frame moves clamp to it: U (an int64) becomes 0 or -1
_LOWEST = -(1 << _MOST_SHIFT)  # the int64 without a magnitude
_FAR = -_NONE  # above every exponent: the lowest live exponent of a row or column without one
_BLOCK = 1024  # steps decoded at a time by the cost-only kernel: a side's arrays in 128 kB each at 4 rows of 8 lanes


@functools.lru_cache(maxsize=None)
def _lane_tables(g):
    """Tables of a lane's contribution ``sum floor(s * p * 2**(t + 9 + G - d))`` over the in-bound terms of ``a``.

    ``packed[i * (26 + G) + d]``, for ``a = 128 + i`` and ``d = 0 .. 25 + G`` (larger distances clamp
    to 25 + G, where no term is in bound), holds ``whole << 16 | pattern << 3 | in-bound terms``:
    ``whole`` sums the terms that are not floored, ``s * 2**(t + 9 + G - d)``, so they contribute
    ``p * whole``; ``pattern`` numbers the signs and right shifts (1 .. 7) of the floored ones,
    which contribute ``floored[(p + 255) * patterns + pattern]`` for a signed ``p`` in -255 .. 255.
    Also returns the number of patterns and each significand's total term count.
    """
    positions, signs, counts = (x.numpy().tolist() for x in encode_terms(torch.arange(128, 256)))
    whole_shift, span = 9 + g, 26 + g
    patterns = {0: 0}  # (plus shifts, minus shifts) as bit masks -> number
    packed = np.zeros(128 * span, np.int64)
    for i in range(128):
        for d in range(span):
            whole = plus = minus = found = 0
            for t, s in zip(positions[i][: counts[i]], signs[i]):
                if d > t + 16 + g:  # out of bounds, and so are the later terms
                    break
                found += 1
                if t + whole_shift >= d:
                    whole += s << (t + whole_shift - d)
                elif s > 0:
                    plus |= 1 << (d - whole_shift - t - 1)
                else:
                    minus |= 1 << (d - whole_shift - t - 1)
            pattern = patterns.setdefault(plus | minus << _FLOORED, len(patterns))
            packed[i * span + d] = (whole << 16) | (pattern << 3) | found
    partner = np.arange(-255, 256)
    floored = np.zeros((partner.size, len(patterns)), np.int16)  # |sum| < 256; the small type keeps it in cache
    for key, pattern in patterns.items():
        for shift in range(1, _FLOORED + 1):
            for s, mask in ((1, key), (-1, key >> _FLOORED)):
                if mask >> (shift - 1) & 1:
                    floored[:, pattern] += ((s * partner) >> shift).astype(np.int16)
    return packed, floored.reshape(-1), len(patterns), np.array(counts, np.int64)


def _as_bits(bits, name):
    """``bits`` as a uint16 array (a uint16 array, strided or not, as it is), refused as the reference refuses it."""
    if isinstance(bits, torch.Tensor):
        bits = bits.numpy()
    bits = np.asarray(bits)
    if bits.dtype.kind in "fc":
        raise TypeError(f"{name} must hold bf16 bit patterns as integers, not {bits.dtype}")
    if bits.ndim != 4:
        raise ValueError(f"{name} must have shape [passes, rows|cols, steps, lanes], got {bits.shape}")
    if bits.dtype != np.uint16 and bits.size and (bits.min() < 0 or bits.max() > 0xFFFF):
        raise ValueError(f"{name} holds values outside 0..0xFFFF; expected bf16 bit patterns")
    return bits if bits.dtype == np.uint16 else bits.astype(np.uint16)


def tile(a_bits, b_bits, guard_bits, zero_block_cycles):
    """Run passes of an R x C FPRaker tile: the reference ``tile``'s arguments, checks and ``TileResult``.

    ``a_bits``: bf16 patterns [passes, rows, steps, lanes] (term-serial, shared along rows);
    ``b_bits``: [passes, cols, steps, lanes] (bit-parallel, shared along columns); ints
    (torch or numpy; a uint16 array is used as it is).
    """
    a, b = checked_arguments(a_bits, b_bits, guard_bits, zero_block_cycles, _as_bits)
    return _run(a, b, 0, guard_bits, zero_block_cycles)


def tile_values(a_values, b_values, guard_bits, zero_block_cycles):
    """``tile`` of float32 NumPy arrays holding bf16 values (the mapper's operands), read in place.

    A value's bf16 pattern is the upper half of its fp32 bits (the lower half is ignored), so the
    mapper needs no converted copy of its operands.
    """
    a, b = checked_arguments(a_values, b_values, guard_bits, zero_block_cycles, _fp32_bits)
    return _run(a, b, 16, guard_bits, zero_block_cycles)


def tile_cycles(a_values, b_values, guard_bits, zero_block_cycles, a_pick=None, b_pick=None):
    """``tile_values``' cost without its outputs (what the mapper needs), as NumPy arrays: ``cycles``, ``terms``,
    ``skipped_terms`` and ``pe_cycles`` [passes], ``step_cycles`` [passes, steps].

    Pass p runs ``a_values[a_pick[p]]`` against ``b_values[b_pick[p]]`` (by default each pass its own): the mapper
    gives its stream sets and each pass's sets, so that a set is decoded once however many passes read it.
    """
    checked_arguments(a_values[:0], b_values[:0], guard_bits, zero_block_cycles, _fp32_bits)  # all but the passes
    picks = [np.arange(len(values)) if pick is None else np.asarray(pick) for values, pick in
             ((a_values, a_pick), (b_values, b_pick))]
    for (name, values), pick in zip((("a_pick", a_values), ("b_pick", b_values)), picks):
        if pick.ndim != 1 or pick.dtype.kind not in "iu" or len(pick) != len(picks[0]):
            raise ValueError(f"{name} must be a 1-D integer array as long as the other pick, not {pick!r:.60}")
        if len(pick) and (pick.min() < 0 or pick.max() >= len(values)):
            raise ValueError(f"{name} picks outside the {len(values)} sets it picks from")
    passes, steps = len(picks[0]), a_values.shape[2]
    step_cycles = np.zeros((passes, steps), np.int64)
    terms, skipped, pe_cycles = (np.zeros(passes, np.int64) for _ in range(3))
    _cycles(_fp32_bits(a_values, "a_bits"), picks[0].astype(np.int64), _fp32_bits(b_values, "b_bits"),
            picks[1].astype(np.int64), 16, zero_block_cycles, *_term_tables(guard_bits), step_cycles, terms, skipped,
            pe_cycles)
    return {"cycles": step_cycles.sum(1), "terms": terms, "skipped_terms": skipped, "pe_cycles": pe_cycles,
            "step_cycles": step_cycles}


@functools.lru_cache(maxsize=None)
def _term_tables(g):
    """``_lane_tables``' in-bound term counts ``found[i, d]`` (int32), each significand's terms, and the
    largest distance ``d`` at which every significand keeps all of its terms."""
    packed, _, _, counts = _lane_tables(g)
    found = (packed & 7).astype(np.int32).reshape(128, -1)
    kept = (found == counts[:, None]).all(0)
    return found, counts.astype(np.int32), int(np.argmin(kept)) - 1


def nonzero_values(values):
    """Per pass, the non-zero values of a float32 NumPy array [passes, ...] (``np.count_nonzero`` over all but the
    first axis, in one pass without a boolean copy): the scheduled values FPRaker encodes into terms."""
    return _nonzero(np.ascontiguousarray(values, np.float32).reshape(len(values), -1).view(np.uint32))


@numba.njit(nogil=True, cache=True)
def _nonzero(bits):
    counts = np.zeros(bits.shape[0], np.int64)
    for p in range(bits.shape[0]):
        for i in range(bits.shape[1]):
            counts[p] += (bits[p, i] & 0x7FFFFFFF) != 0  # +0 and -0 are zero, NaN is not
    return counts


def _fp32_bits(values, name):
    """The fp32 bit patterns of a float32 NumPy array [passes, rows|cols, steps, lanes], as a uint32 view."""
    if not isinstance(values, np.ndarray) or values.dtype != np.float32 or values.ndim != 4:
        raise TypeError(f"{name} must be a float32 NumPy array [passes, rows|cols, steps, lanes], not {values!r:.60}")
    return values.view(np.uint32)


def _run(a, b, shift, guard_bits, zero_block_cycles):
    """The kernel on operands whose bf16 patterns are their elements shifted right by ``shift``."""
    passes, rows, steps, _ = a.shape
    bits = np.zeros((passes, rows, b.shape[1]), np.uint32)
    step_cycles = np.zeros((passes, steps), np.int64)
    terms = np.zeros(passes, np.int64)
    skipped = np.zeros(passes, np.int64)
    pe_cycles = np.zeros(passes, np.int64)
    tables = _lane_tables(guard_bits)
    _tile(a, b, shift, guard_bits, zero_block_cycles, *tables, bits, step_cycles, terms, skipped, pe_cycles)
    return TileResult(torch.from_numpy(bits.view(np.float32)), torch.from_numpy(step_cycles.sum(1)),
                      torch.from_numpy(terms), torch.from_numpy(skipped), torch.from_numpy(step_cycles),
                      torch.from_numpy(pe_cycles))


@numba.njit(nogil=True, cache=True, inline="always")
def _exponent(x):
    """The exponent field of a bf16 pattern, and whether the value is live (finite and non-zero)."""
    e = (x >> 7) & 0xFF
    return e, (e != 0) & (e != 255)


@numba.njit(nogil=True, cache=True)
def _tile(a, b, shift, g, zero_block_cycles, packed, floored, patterns, counts, bits, step_cycles, terms, skipped,
          pe_cycles):
    """Fill ``bits`` [P, R, C] (fp32 patterns), ``step_cycles`` [P, S], ``terms``, ``skipped`` and ``pe_cycles`` [P];
    the operands' bf16 patterns are ``a >> shift`` and ``b >> shift``."""
    passes, rows, steps, lanes = a.shape
    cols = b.shape[1]
    span = 26 + g
    # one step's operands, decoded once for all the PEs that share them
    a_exp = np.empty((rows, lanes), np.int64)  # ea - 127, _NONE unless live
    a_neg = np.empty((rows, lanes), np.bool_)
    a_row = np.empty((rows, lanes), np.int64)  # the significand's first entry in ``packed``
    a_terms = np.empty((rows, lanes), np.int64)  # all its terms, 0 unless live
    a_value = np.empty((rows, lanes), np.int64)  # signed significand, 0 unless live
    b_exp = np.empty((cols, lanes), np.int64)  # eb, _NONE unless live
    b_value = np.empty((cols, lanes), np.int64)  # signed significand, 0 unless live
    accumulator = np.empty((rows, cols), np.int64)  # U, in units of 2**(F - 150 - G)
    running = np.empty((rows, cols), np.int64)  # E, _NONE before the pass's first live lane
    frames = np.empty((rows, cols), np.int64)  # F = E & ~7
    nan = np.empty((rows, cols), np.bool_)
    pos_inf = np.empty((rows, cols), np.bool_)
    neg_inf = np.empty((rows, cols), np.bool_)
    for p in range(passes):
        _start_pass(accumulator, running, frames, nan, pos_inf, neg_inf)
        in_bound = 0
        live_terms = 0
        for s in range(steps):
            special = _decode_rows(a, p, s, shift, span, counts, a_exp, a_neg, a_row, a_terms, a_value)
            special |= _decode_cols(b, p, s, shift, b_exp, b_value)
            if special:
                _note_specials(a[p, :, s], b[p, :, s], shift, nan, pos_inf, neg_inf)
            step_cost = 0
            for r in range(rows):
                for c in range(cols):
                    top = _NONE
                    bottom = -_NONE  # the smallest live product exponent
                    for n in range(lanes):
                        e = a_exp[r, n] + b_exp[c, n]
                        top = max(top, e)
                        bottom = min(bottom, e if e > _DEAD else -_NONE)
                    if top < _DEAD:  # no live lane: the accumulator stays as it is
                        step_cost = max(step_cost, zero_block_cycles)
                        pe_cycles[p] += zero_block_cycles
                        continue
                    top = max(top, running[r, c])  # the running maximum E of the pass's product exponents
                    frame = top & ~_OFFSET
                    # the frame moves up by a multiple of 8 (on the first live step, U is 0 and it does not matter)
                    accumulator[r, c] >>= min(frame - frames[r, c], _MOST_SHIFT)
                    running[r, c], frames[r, c] = top, frame
                    total = np.int64(0)  # the step's exact sum, in units of 2**(E - 150 - G)
                    most = 1
                    if top - bottom <= 9 + g:  # every term of every lane whole: the exact products
                        for n in range(lanes):
                            product = a_value[r, n] * b_value[c, n]
                            total += product << max(9 + g - (top - (a_exp[r, n] + b_exp[c, n])), 0)
                            found = a_terms[r, n] if product != 0 else 0
                            in_bound += found
                            live_terms += found
                            most = max(most, found)
                    else:
                        for n in range(lanes):
                            # lanes without a product are far below ``top``: no term in bound, nothing added
                            entry = packed[a_row[r, n] + min(top - (a_exp[r, n] + b_exp[c, n]), span - 1)]
                            partner = -b_value[c, n] if a_neg[r, n] else b_value[c, n]
                            pattern = (partner + 255) * patterns + ((entry >> 3) & 0x1FFF)
                            total += partner * (entry >> 16) + floored[pattern]
                            in_bound += entry & 7
                            most = max(most, entry & 7)
                            live_terms += a_terms[r, n] if b_value[c, n] != 0 else 0
                    step_cost = max(step_cost, most)
                    pe_cycles[p] += most
                    accumulator[r, c] += total << (top & _OFFSET)  # into the frame, by the offset E - F
            step_cycles[p, s] = step_cost
        terms[p] = in_bound
        skipped[p] = live_terms - in_bound
        _round_outputs(accumulator, frames, g, nan, pos_inf, neg_inf, bits[p])


@numba.njit(nogil=True, cache=True, inline="always")
def _start_pass(accumulator, running, frames, nan, pos_inf, neg_inf):
    """Every PE's state as a pass starts: U = 0, no running maximum or frame yet, no special met."""
    accumulator[:] = 0
    running[:] = _NONE
    frames[:] = _NONE
    nan[:] = False
    pos_inf[:] = False
    neg_inf[:] = False


@numba.njit(nogil=True, cache=True, inline="always")
def _operand(pattern, shift):
    """A bf16 operand (``pattern >> shift``): its bits, exponent field, whether it is live, its signed significand
    (0 unless live)."""
    x = np.int64(pattern >> shift)
    e, live = _exponent(x)
    return x, e, live, (-1 if x >> 15 else 1) * (128 + (x & 0x7F)) if live else 0


@numba.njit(nogil=True, cache=True, inline="always")
def _decode_rows(a, p, s, shift, span, counts, a_exp, a_neg, a_row, a_terms, a_value):
    """Decode step ``s`` of pass ``p``'s row operands (bf16 patterns ``a >> shift``); whether one is inf or NaN."""
    special = False
    for r in range(a.shape[1]):
        for n in range(a.shape[3]):
            x, e, live, a_value[r, n] = _operand(a[p, r, s, n], shift)
            special |= e == 255
            a_exp[r, n] = e - 127 if live else _NONE
            a_neg[r, n] = x >> 15 == 1
            a_row[r, n] = (x & 0x7F) * span
            a_terms[r, n] = counts[x & 0x7F] if live else 0
    return special


@numba.njit(nogil=True, cache=True, inline="always")
def _decode_cols(b, p, s, shift, b_exp, b_value):
    """Decode step ``s`` of pass ``p``'s column operands; whether one is inf or NaN."""
    special = False
    for c in range(b.shape[1]):
        for n in range(b.shape[3]):
            _, e, live, b_value[c, n] = _operand(b[p, c, s, n], shift)
            b_exp[c, n] = e if live else _NONE
            special |= e == 255
    return special


@numba.njit(nogil=True, cache=True, inline="always")
def _round_outputs(accumulator, frames, g, nan, pos_inf, neg_inf, bits):
    """A pass's outputs ``bits`` [R, C]: each accumulator rounded to fp32, or the special it met."""
    for r in range(accumulator.shape[0]):
        for c in range(accumulator.shape[1]):
            out = _round_accumulator(accumulator[r, c], frames[r, c], g)
            if pos_inf[r, c]:
                out = 0x7F800000
            if neg_inf[r, c]:
                out = 0xFF800000
            if nan[r, c] or (pos_inf[r, c] and neg_inf[r, c]):
                out = CANONICAL_NAN_BITS
            bits[r, c] = out


@numba.njit(nogil=True, cache=True)
def _note_specials(a, b, shift, nan, pos_inf, neg_inf):
    """Mark the PEs whose lanes of this step meet NaN, Inf x 0, or an Inf product of either sign (sticky)."""
    for r in range(a.shape[0]):
        for c in range(b.shape[0]):
            for n in range(a.shape[1]):
                x, y = np.int64(a[r, n] >> shift), np.int64(b[c, n] >> shift)
                ex, ey = (x >> 7) & 0xFF, (y >> 7) & 0xFF
                x_inf, y_inf = ex == 255 and x & 0x7F == 0, ey == 255 and y & 0x7F == 0
                lane_nan = (ex == 255 and not x_inf) or (ey == 255 and not y_inf) or (x_inf and ey == 0) or (
                    ex == 0 and y_inf)
                if lane_nan:
                    nan[r, c] = True
                elif x_inf or y_inf:
                    if (x >> 15) != (y >> 15):
                        neg_inf[r, c] = True
                    else:
                        pos_inf[r, c] = True


@numba.njit(nogil=True, cache=True)
def _round_accumulator(accumulator, frame, g):
    """fp32 pattern of ``accumulator * 2**(frame - 150 - G)``: RNE, FTZ, overflow to Inf (the reference's rounding;
    -2**63, whose magnitude int64 lacks, as -2**62 one frame exponent up)."""
    if accumulator == 0:
        return 0
    sign = 1 if accumulator < 0 else 0
    magnitude = -accumulator if accumulator < 0 else accumulator
    exponent = frame
    if accumulator == _LOWEST:
        magnitude, exponent = np.int64(1) << 62, frame + 1
    msb = 63 - leading_zeros(np.uint64(magnitude))
    shift = msb - 23
    right = max(shift, 0)
    kept = magnitude >> right
    rest = magnitude - (kept << right)
    up = 0
    if right > 0:
        half = np.int64(1) << (right - 1)
        if rest > half or (rest == half and kept & 1 == 1):
            up = 1
    significand = (kept + up) << max(-shift, 0)
    carry = significand >> 24
    significand >>= carry
    biased = exponent - 23 - g + msb + carry
    if biased < 1:
        return sign << 31
    if biased > 254:
        return (sign << 31) | 0x7F800000
    return (sign << 31) | (biased << 23) | (significand & 0x7FFFFF)


@numba.njit(nogil=True, cache=True)
def _cycles(a, a_pick, b, b_pick, shift, zero_block_cycles, found, counts, whole, step_cycles, terms, skipped,
            pe_cycles):
    """``_tile``'s ``step_cycles``, ``terms``, ``skipped`` and ``pe_cycles`` (zeros in, added to) without the
    accumulator, pass p on sets ``a_pick[p]`` and ``b_pick[p]``. The steps are walked in blocks of at most
    ``_BLOCK``, every pass through a block before the next: each set's block is decoded step-major into buffers
    that stay in cache, a row set's once per run of passes reading it, the column sets' at once where passes share
    them. A PE whose lanes all lie within ``whole`` of the running maximum E (bounded below by the row's and the
    column's lowest live exponents) keeps every term of its live lanes; another looks each lane's in-bound terms up
    in ``found`` at its distance."""
    _, rows, steps, lanes = a.shape
    col_sets, cols = b.shape[:2]
    passes = a_pick.size
    block = max(min(steps, _BLOCK), 1)
    shared = col_sets < passes  # the column sets' blocks decoded at once, else each as its pass reads it
    slots = col_sets if shared else 1
    a_exp = np.empty((block, rows, lanes), np.int32)  # ea - 127, _NONE unless live
    a_terms = np.empty((block, rows, lanes), np.int32)  # the significand's terms, 0 unless live
    a_low = np.empty((block, rows), np.int32)  # the lowest live exponent of a row's step, _FAR without one
    b_sets_exp = np.empty((slots, block, cols, lanes), np.int32)  # eb, _NONE unless live
    b_sets_live = np.empty((slots, block, cols, lanes), np.int32)  # -1 (all bits set) if live, else 0
    b_sets_low = np.empty((slots, block, cols), np.int32)
    marks = np.full(128, -1, np.int32)
    running = np.full((passes, rows, cols), _NONE, np.int32)  # E, _NONE before the pass's first live lane
    for first in range(0, steps, block):
        for k in range(col_sets if shared else 0):
            _decode_block(b[k], first, shift, 0, marks, b_sets_exp[k], b_sets_live[k], b_sets_low[k])
        decoded = -1
        for p in range(passes):
            if a_pick[p] != decoded:
                decoded = a_pick[p]
                _decode_block(a[decoded], first, shift, -127, counts, a_exp, a_terms, a_low)
            slot = b_pick[p] if shared else 0
            if not shared:
                _decode_block(b[b_pick[p]], first, shift, 0, marks, b_sets_exp[0], b_sets_live[0], b_sets_low[0])
            b_exp, b_live, b_low = b_sets_exp[slot], b_sets_live[slot], b_sets_low[slot]
            in_bound = skip = cycles = 0
            for s in range(min(block, steps - first)):
                step_cost = 0
                for r in range(rows):
                    for c in range(cols):
                        top = np.int32(_NONE)
                        most = np.int32(1)
                        kept = np.int32(0)  # the live lanes' terms, all kept while every lane is near the top
                        for n in range(lanes):
                            top = max(top, a_exp[s, r, n] + b_exp[s, c, n])
                            lane = a_terms[s, r, n] & b_live[s, c, n]
                            most = max(most, lane)
                            kept += lane
                        if top < _DEAD:  # no live lane: the accumulator stays as it is
                            step_cost = max(step_cost, zero_block_cycles)
                            cycles += zero_block_cycles
                            continue
                        top = max(top, running[p, r, c])
                        running[p, r, c] = top
                        found_here = kept
                        if top - (a_low[s, r] + b_low[s, c]) > whole:  # a lane may be far below: count its terms
                            most, found_here = np.int32(1), np.int32(0)
                            for n in range(lanes):
                                x = np.int32(a[decoded, r, first + s, n] >> shift)
                                d = min(top - (a_exp[s, r, n] + b_exp[s, c, n]), found.shape[1] - 1)
                                most = max(most, found[x & 0x7F, d])
                                found_here += found[x & 0x7F, d]
                        in_bound += found_here
                        skip += kept - found_here
                        step_cost = max(step_cost, most)
                        cycles += most
                step_cycles[p, first + s] = step_cost
            terms[p] += in_bound
            skipped[p] += skip
            pe_cycles[p] += cycles


@numba.njit(nogil=True, cache=True, inline="always")
def _decode_block(side, first, shift, bias, counts, exponents, significand_terms, lows):
    """Decode the block of steps from ``first`` of one stream set of one side (``side`` [rows|cols, steps, lanes],
    patterns ``side >> shift``) into [step in block, row|col, lane]: each exponent plus ``bias`` (``_NONE`` unless
    live), ``counts`` of each significand (its terms, or -1 to mark the live lanes; 0 unless live) and each step's
    lowest live exponent (``_FAR`` without one)."""
    for r in range(side.shape[0]):
        for s in range(min(exponents.shape[0], side.shape[1] - first)):
            low = np.int32(_FAR)
            for n in range(side.shape[2]):
                x = np.int32(side[r, first + s, n] >> shift)
                e, live = _exponent(x)
                exponents[s, r, n] = e + bias if live else _NONE
                significand_terms[s, r, n] = counts[x & 0x7F] if live else 0
                low = min(low, e + bias if live else _FAR)
            lows[s, r] = low
