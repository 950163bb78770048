"""The FPRaker tile as one GPU kernel (Triton): ``dashraker.models.fpraker.tile`` bit for bit, on a CUDA device.

The reference run on a GPU launches a dozen small kernels per step of a pass, one step after
another, and waits on the launches. Here each element of a Triton program is one PE of one pass
and walks the pass's steps itself, as the CPU kernel (``kernels/fpraker.py``) does on a core, with
the same arithmetic: the running maximum exponent and its frame, term contributions from the
same two small tables (or, when every term is whole, the exact products), the 64-bit
accumulator, cycles, term counts, rounding and NaN/Inf. A step's cost is the maximum over the
PEs of its pass, taken after the kernel from each PE's cycles. The accumulator's bit length
comes from the float64 exponent, as in the reference, corrected where the conversion rounded
up to the next power of two (above 2**53).

Triton, not Numba's CUDA target: the GPU machines' numba-cuda (0.30, in maintenance) fails to
launch any kernel beside their NumPy 2.5 (``np.row_stack`` is gone), while Triton comes with
their PyTorch.
"""

import functools

import torch
import triton
import triton.language as tl

from dashraker.formats import CANONICAL_NAN_BITS
from dashraker.models.fpraker.golden import TileResult, checked_arguments
from dashraker.models.kernels.fpraker import _DEAD, _MOST_SHIFT, _NONE, _OFFSET, _lane_tables

__all__ = ["tile", "tile_values"]

_BLOCK = 128  # PEs per program


@triton.jit
def _msb(magnitude):
    """The most significant set bit of positive int64 values: the float64 exponent, one less where the conversion
    rounded up to the next power of two (above 2**53), as in the reference."""
    msb = ((magnitude.to(tl.float64).to(tl.int64, bitcast=True) >> 52) & 0x7FF) - 1023
    return msb - ((magnitude >> msb) == 0).to(tl.int64)


@triton.jit
def _operands(a, b, a_row, b_row, n, shift, valid):
    """A lane's bf16 patterns of a and b, their exponent fields, and whether the lane has a product."""
    x = (tl.load(a + a_row + n, mask=valid, other=0).to(tl.int64) >> shift) & 0xFFFF
    y = (tl.load(b + b_row + n, mask=valid, other=0).to(tl.int64) >> shift) & 0xFFFF
    ex, ey = (x >> 7) & 0xFF, (y >> 7) & 0xFF
    live = (ex != 0) & (ex != 255) & (ey != 0) & (ey != 255)
    return x, y, ex, ey, live


@triton.jit
def _special(x, y, ex, ey):
    """The flag a lane raises: 1 for a NaN or Inf x 0, else 2 or 4 for an Inf product (positive, negative), else 0."""
    x_inf, y_inf = (ex == 255) & ((x & 0x7F) == 0), (ey == 255) & ((y & 0x7F) == 0)
    nan = ((ex == 255) & ~x_inf) | ((ey == 255) & ~y_inf) | (x_inf & (ey == 0)) | ((ex == 0) & y_inf)
    negative = ((x ^ y) >> 15) == 1
    return tl.where(nan, 1, tl.where(x_inf | y_inf, tl.where(negative, 4, 2), 0))


@triton.jit
def _round_accumulator(accumulator, frame, g):
    """fp32 patterns of ``accumulator * 2**(frame - 150 - G)``: RNE, FTZ, overflow to Inf (the reference's rounding;
    -2**63, whose magnitude int64 lacks, as -2**62 one frame exponent up)."""
    sign = (accumulator < 0).to(tl.int64)
    lowest = (accumulator < 0) & ((accumulator << 1) == 0)
    magnitude = tl.where(lowest, tl.full(accumulator.shape, 1 << 62, tl.int64),
                         tl.where(accumulator < 0, -accumulator, accumulator))
    exponent = frame + lowest.to(tl.int64)
    msb = _msb(tl.maximum(magnitude, 1))
    shift = msb - 23
    right = tl.maximum(shift, 0)
    kept = magnitude >> right
    rest = magnitude - (kept << right)
    half = tl.where(right > 0, tl.full(right.shape, 1, tl.int64) << tl.maximum(right - 1, 0), 0)
    up = (right > 0) & ((rest > half) | ((rest == half) & ((kept & 1) == 1)))
    significand = (kept + up.to(tl.int64)) << tl.maximum(-shift, 0)
    carry = significand >> 24
    significand = significand >> carry
    biased = exponent - 23 - g + msb + carry
    bits = (sign << 31) | (tl.minimum(tl.maximum(biased, 0), 255) << 23) | (significand & 0x7FFFFF)
    bits = tl.where(biased < 1, sign << 31, bits)
    bits = tl.where(biased > 254, (sign << 31) | 0x7F800000, bits)
    return tl.where(magnitude == 0, 0, bits)


# every integer argument as it comes: one compiled kernel for all shapes, not one per divisibility by 16
@triton.jit(do_not_specialize=["passes", "rows", "cols", "steps", "lanes", "shift", "g", "zero_block_cycles",
                               "patterns"])
def _tile(a, b, packed, floored, counts, bits, pe_cycles, terms, live_terms, passes, rows, cols, steps, lanes, shift,
          g, zero_block_cycles, patterns, NONE: tl.constexpr, DEAD: tl.constexpr, OFFSET: tl.constexpr,
          MOST_SHIFT: tl.constexpr, NAN_BITS: tl.constexpr, BLOCK: tl.constexpr):
    """Element ``p * R * C + r * C + c`` runs PE (r, c) of pass p: fills ``bits[p, r, c]`` (fp32 pattern),
    ``pe_cycles[p, :, r * C + c]`` (its cost of each step), and its in-bound and live-lane terms."""
    pe = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = pe < passes * rows * cols
    p, r, c = pe // (rows * cols), (pe // cols) % rows, pe % cols
    span = 26 + g
    accumulator = tl.zeros((BLOCK,), tl.int64)  # U, in units of 2**(F - 150 - G)
    running = tl.full((BLOCK,), NONE, tl.int64)  # E, NONE before the pass's first live lane
    frame = tl.full((BLOCK,), NONE, tl.int64)  # F = E & ~7
    special = tl.zeros((BLOCK,), tl.int64)
    in_bound = tl.zeros((BLOCK,), tl.int64)
    live_total = tl.zeros((BLOCK,), tl.int64)
    for s in range(steps):
        a_row, b_row = ((p * rows + r) * steps + s) * lanes, ((p * cols + c) * steps + s) * lanes
        top = tl.full((BLOCK,), NONE, tl.int64)
        bottom = tl.full((BLOCK,), -NONE, tl.int64)  # the smallest live product exponent
        for n in range(lanes):
            x, y, ex, ey, live = _operands(a, b, a_row, b_row, n, shift, valid)
            special |= _special(x, y, ex, ey)
            top = tl.where(live, tl.maximum(top, ex - 127 + ey), top)
            bottom = tl.where(live, tl.minimum(bottom, ex - 127 + ey), bottom)
        busy = top > DEAD  # a live lane: else E, F and the accumulator stay as they are
        running = tl.where(busy, tl.maximum(top, running), running)
        top = running
        # the frame moves up by a multiple of 8 (on the first live step, U is 0 and it does not matter)
        accumulator = accumulator >> tl.minimum(running - (running & OFFSET) - frame, MOST_SHIFT)
        frame = running - (running & OFFSET)
        total = tl.zeros((BLOCK,), tl.int64)  # the step's exact sum, in units of 2**(E - 150 - G)
        whole = top - bottom <= 9 + g  # every term of every lane whole: the exact products
        most = tl.full((BLOCK,), 1, tl.int64)
        for n in range(lanes):
            x, y, ex, ey, live = _operands(a, b, a_row, b_row, n, shift, valid)
            index = x & 0x7F
            partner = tl.where(((x ^ y) >> 15) == 1, -1, 1) * (128 + (y & 0x7F))
            distance = top - (ex - 127 + ey)
            all_terms = tl.load(counts + index, mask=valid & live, other=0)
            fields = tl.load(packed + index * span + tl.minimum(distance, span - 1), mask=valid & live & ~whole,
                             other=0)
            cut = tl.load(floored + (partner + 255) * patterns + ((fields >> 3) & 0x1FFF), mask=valid & live & ~whole,
                          other=0).to(tl.int64)
            exact = (partner * (128 + index)) << tl.minimum(tl.maximum(9 + g - distance, 0), 62)
            found = tl.where(live, tl.where(whole, all_terms, fields & 7), 0)
            total += tl.where(live, tl.where(whole, exact, partner * (fields >> 16) + cut), 0)
            in_bound += found
            live_total += all_terms
            most = tl.maximum(most, found)
        tl.store(pe_cycles + (p * steps + s) * rows * cols + r * cols + c,
                 tl.where(busy, most, zero_block_cycles).to(tl.int8), mask=valid)
        accumulator += total << (running & OFFSET)  # into the frame, by the offset E - F (0 without a live lane)
    # the pass's special result, if any (flags sticky over its steps), else the rounded accumulator
    out = _round_accumulator(accumulator, frame, g)
    out = tl.where((special & 2) != 0, 0x7F800000, out)
    out = tl.where((special & 4) != 0, tl.full((BLOCK,), 0xFF800000, tl.int64), out)
    out = tl.where(((special & 1) != 0) | ((special & 6) == 6), NAN_BITS, out)
    tl.store(bits + pe, out.to(tl.int32), mask=valid)
    tl.store(terms + pe, in_bound, mask=valid)
    tl.store(live_terms + pe, live_total, mask=valid)


@functools.lru_cache(maxsize=None)
def _tables(guard_bits, device):
    """The CPU kernel's lane tables, on ``device``."""
    packed, floored, patterns, counts = _lane_tables(guard_bits)
    return (*(torch.from_numpy(x).to(device) for x in (packed, floored, counts)), patterns)


def tile(a_bits, b_bits, guard_bits, zero_block_cycles, device="cuda"):
    """Run passes of an R x C FPRaker tile on a CUDA ``device``: the reference ``tile``'s arguments, checks and
    ``TileResult`` (on ``device``).

    ``a_bits``: bf16 patterns [passes, rows, steps, lanes] (term-serial, shared along rows);
    ``b_bits``: [passes, cols, steps, lanes] (bit-parallel, shared along columns); ints (torch or numpy).
    """
    a, b = checked_arguments(a_bits, b_bits, guard_bits, zero_block_cycles)
    return _run(a.to(device).contiguous(), b.to(device).contiguous(), 0, guard_bits, zero_block_cycles)


def tile_values(a_values, b_values, guard_bits, zero_block_cycles):
    """``tile`` of float32 torch tensors on a CUDA GPU holding bf16 values (the mapper's operands), read in place.

    A value's bf16 pattern is the upper half of its fp32 bits (the lower half is ignored).
    """
    a, b = checked_arguments(a_values, b_values, guard_bits, zero_block_cycles, _fp32_bits)
    return _run(a, b, 16, guard_bits, zero_block_cycles)


def _fp32_bits(values, name):
    """The fp32 bit patterns of a float32 CUDA tensor [passes, rows|cols, steps, lanes], as a contiguous int32 view."""
    if not isinstance(values, torch.Tensor) or not values.is_cuda or values.dtype != torch.float32 or values.dim() != 4:
        raise TypeError(f"{name} must be a float32 CUDA tensor [passes, rows|cols, steps, lanes], not {values!r:.60}")
    return values.contiguous().view(torch.int32)


def _run(a, b, shift, guard_bits, zero_block_cycles):
    """The kernel on contiguous CUDA tensors whose bf16 patterns are their elements shifted right by ``shift``."""
    passes, rows, steps, lanes = a.shape
    cols = b.shape[1]
    on = {"device": a.device}
    bits = torch.zeros((passes, rows, cols), dtype=torch.int32, **on)
    pe_cycles = torch.zeros((passes, steps, rows * cols), dtype=torch.int8, **on)
    terms = torch.zeros((passes, rows * cols), dtype=torch.int64, **on)
    live_terms = torch.zeros((passes, rows * cols), dtype=torch.int64, **on)
    if bits.numel():
        packed, floored, counts, patterns = _tables(guard_bits, a.device)
        with torch.cuda.device(a.device):
            _tile[(triton.cdiv(bits.numel(), _BLOCK),)](
                a, b, packed, floored, counts, bits, pe_cycles, terms, live_terms, passes, rows, cols, steps, lanes,
                shift, guard_bits, zero_block_cycles, patterns, NONE=_NONE, DEAD=_DEAD, OFFSET=_OFFSET,
                MOST_SHIFT=_MOST_SHIFT, NAN_BITS=CANONICAL_NAN_BITS,
                BLOCK=_BLOCK)
    step_cycles = pe_cycles.amax(-1).to(torch.int64)
    terms, live_terms = terms.sum(-1), live_terms.sum(-1)
    return TileResult(bits.view(torch.float32), step_cycles.sum(-1), terms, live_terms - terms, step_cycles,
                      pe_cycles.sum((1, 2), dtype=torch.int64))
