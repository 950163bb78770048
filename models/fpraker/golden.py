"""Bit-exact golden model of the FPRaker term-serial PE and tile (SPEC section 4), in torch integer ops.

Arithmetic, exactly as the RTL in ``dashraker.hw.fpraker`` does it
-------------------------------------------------------------------
Operands are bf16 bit patterns; subnormals are zeros (DAZ). Lane i of a step
holds the pair (a_i, b_i). ``a`` is the term-serial operand: its 8-bit significand
(hidden one included) is recoded into canonical signed-digit (non-adjacent) form,
at most 5 signed powers of two ``s * 2**t``, ``t`` in 0..8, processed most
significant first. ``b`` stays bit-parallel.

The accumulator is a wide fixed-point integer in a *frame* whose alignment
depends only on the operands, never on the running sum. So every exponent, shift
amount, in-bound test and cycle count of a step can be computed ahead of the
accumulator (feed-forward, pipelined in the RTL), and the RTL's only loop is one
``ACCUMULATOR_BITS``-bit add after a shift by a multiple of 8. Per pass and PE:

* A lane is *live* when both operands are finite and non-zero. Zero, Inf and NaN
  operands have no terms and take no part in the exponents.
* Product exponent of a live lane: ``Pe = ea + eb - 127`` (biased), so that the
  product is ``sig_a * sig_b * 2**(Pe - 127 - 14)``.
* Alignment exponent ``E``: the running maximum of ``Pe`` over the live lanes of
  the pass's steps so far, the current step included (undefined until the first
  live lane). Its *frame* is ``F = E & ~7`` (``8 * floor(E / 8)``, two's
  complement, so a negative ``E`` has a frame below it) and its *offset*
  ``D = E & 7`` (0..7). ``F`` moves in steps of ``2**FRAME_BITS = 8``.
* The accumulator ``U`` is an ``ACCUMULATOR_BITS`` = 64-bit two's complement
  integer worth ``U * 2**(F - 150 - G)``: the fp32 significand (24 bits) plus
  G guard bits below the frame's top exponent, and headroom above. Each pass
  starts at ``U = 0``.
* A step with at least one live lane in the PE: ``E`` becomes the maximum of its
  old value and the step's live ``Pe``; each live lane has ``d = E - Pe >= 0``.
  First the accumulator follows the frame: ``U = U >> (F - F_old)``, an
  arithmetic right shift (floor), its amount clamped to 63 (so a frame move
  beyond the accumulator leaves 0 or -1; on the pass's first live step ``U`` is
  0 anyway). Then ``U += step_sum << D`` where ``step_sum`` is the exact integer
  sum, over the live lanes and their in-bound terms ``s * 2**t``, of
  ``floor(sign * s * sig_b * 2**(t + 9 + G - d))`` with ``sign = (-1)**(sa ^ sb)``
  (the signed ``b`` shifted left, or arithmetically right with the bits below the
  unit ``2**(E - 150 - G)`` dropped). A term whose whole contribution lies below
  that unit (``d > t + 16 + G``: the MSB of ``sig_b << t`` falls below it) is
  *out of bounds*: it is skipped and contributes 0; as terms come MSB first, all
  later terms of the lane are out of bounds too.
* A step without a live lane in the PE changes nothing (``E``, ``F``, ``U`` stay).
* There is no renormalisation: ``U`` keeps every bit down to ``2**(F - 150 - G)``.
  A lane-step adds less than ``2**(32 + G)`` in magnitude (``|sig_a * sig_b| < 2**16``,
  times ``2**(9 + G)``, times ``2**D <= 2**7``), so ``|U| < 2**63`` while a pass has
  fewer than ``2**(31 - G)`` live lane-steps per PE (2.7e8 at G = 3); beyond that
  ``U`` wraps, in the RTL's register and in this model's int64 alike.
* End of pass: ``U * 2**(F - 150 - G)`` is rounded once to fp32, round-to-nearest-even
  on the exact value with an unbounded exponent; a result whose biased exponent is
  then below 1 is flushed to a zero of its sign (FTZ, tininess after rounding),
  above 254 it is an Inf of its sign. ``U == 0`` (also: no live lane in the pass)
  gives +0, so a sum that cancels to exactly 0 mid-pass simply goes on from 0.
* NaN/Inf (IEEE-consistent, sticky over the pass): a NaN operand, or Inf times
  zero, makes the result the canonical NaN 0x7FC00000; so do Infs of both signs
  (Inf - Inf). Otherwise an Inf operand times a non-zero finite or infinite one
  makes the result an Inf of the product's sign. Only the final rounding can give
  Inf from finite operands. Finite lanes are computed (and cost cycles) as usual;
  the special result overrides the accumulator at the end.

Precision: every contribution is floored at ``2**(E - 150 - G)`` with ``E`` the
running maximum so far, and the accumulator drops bits only below its frame's
unit ``2**(F - 150 - G)`` when the frame moves up. (The earlier arithmetic aligned
each step to the maximum of the step's exponents and a window renormalised back
to 25 + G bits after every step; that made the next step's alignment wait on the
previous step's sum, a one-cycle loop through the whole adder tree.)

Cycles: a PE spends on a step the maximum over its lanes of the number of
in-bound terms, at least 1; a step with no live lane in the PE costs
``zero_block_cycles`` (0 or 1). The tile runs in lockstep: a step (one step of
a pass) costs the maximum over its R x C PEs. ``terms`` / ``skipped_terms``
count, per PE and lane, the in-bound / out-of-bounds terms of live lanes.
"""

import functools
from dataclasses import dataclass, fields

import numpy as np
import torch

from dashraker.formats import FPRAKER_ACCUMULATOR_BITS, FPRAKER_FRAME_BITS, FPRAKER_MAX_TERMS
from dashraker.models.numerics import CANONICAL_NAN_BITS, fp32_from_bits

__all__ = [
    "ACCUMULATOR_BITS",
    "FRAME_BITS",
    "MAX_TERMS",
    "TileResult",
    "checked_arguments",
    "encode_terms",
    "tile",
    "pe",
]

MAX_TERMS = FPRAKER_MAX_TERMS
ACCUMULATOR_BITS = FPRAKER_ACCUMULATOR_BITS  # the accumulator U, two's complement
FRAME_BITS = FPRAKER_FRAME_BITS  # the frame F moves in steps of 2**FRAME_BITS bits
_BF16_BIAS = 127
_SIG_BITS = 8  # bf16 significand with the hidden one
_TOP_TERM = 8  # highest term position of an 8-bit significand in NAF
_NONE = -(1 << 24)  # exponent of lanes without a product: below every real one
_DEAD = _NONE // 2  # product exponents below this have no product
_CHUNK = 1 << 22  # elements per pass chunk (bounds the memory of the precomputed tensors)
_GPU_CHUNK = 1 << 26  # on a GPU: fewer, larger kernels (a few GB of GPU memory)


def encode_terms(significand):
    """Canonical signed-digit terms of 8-bit significands (any int tensor, values 0..255).

    Returns ``(positions, signs, count)``: ``positions`` and ``signs`` are int64
    tensors of shape ``[..., 5]`` listing the terms most significant first
    (``significand == sum(signs * 2**positions)``), padded with position -1 and
    sign 0; ``count`` is the number of terms. Zero has no terms.
    """
    x = torch.as_tensor(significand, dtype=torch.int64)
    if ((x < 0) | (x >= 1 << _SIG_BITS)).any():
        bad = x[(x < 0) | (x >= 1 << _SIG_BITS)][0].item()
        raise ValueError(f"significands must be 8-bit values 0..255, got {bad}")
    triple = 3 * x
    plus = (triple & ~x) >> 1  # NAF digit +1 positions
    minus = (~triple & x) >> 1  # NAF digit -1 positions
    positions = torch.full((*x.shape, MAX_TERMS), -1, dtype=torch.int64)
    signs = torch.zeros((*x.shape, MAX_TERMS), dtype=torch.int64)
    count = torch.zeros(x.shape, dtype=torch.int64)
    for t in range(_TOP_TERM, -1, -1):
        p = (plus >> t) & 1
        m = (minus >> t) & 1
        digit = p - m
        slot = torch.nn.functional.one_hot(count.clamp(max=MAX_TERMS - 1), MAX_TERMS).bool() & (digit != 0)[..., None]
        positions = torch.where(slot, t, positions)
        signs = torch.where(slot, digit[..., None], signs)
        count = count + (digit != 0)
    return positions, signs, count


@functools.lru_cache(maxsize=None)
def _tables(guard_bits, count_bits, device="cpu"):
    """Lookup table over (operands, alignment distance d = 0 .. 25 + G) for a lane of a step.

    ``packed[(((sa * 2 + sb) * 128 + ia) * 128 + ib) * (D + 1) + d]`` holds, above its low
    ``count_bits`` bits, the lane's contribution to the step sum: the sum over the in-bound
    terms ``s * 2**t`` of ``a = 128 + ia`` of ``floor(sign * s * (128 + ib) * 2**(t + 9 + G - d))``
    (sign negative when ``sa != sb``); in the low bits, the number of in-bound terms
    (``d <= t + 16 + G``). Summing packed entries over a step's lanes sums both
    fields at once, as long as the counts stay below ``2**count_bits``. At
    ``d = D = 25 + G`` every term is out of bounds, so larger distances clamp to D.
    Also returns the total term count of each significand and D. Tensors live on ``device``.
    """
    g = guard_bits
    span = 26 + g
    sig = torch.arange(1 << (_SIG_BITS - 1), 1 << _SIG_BITS)
    positions, signs, count = encode_terms(sig)  # [128, 5]
    d = torch.arange(span)
    sign = torch.tensor([1, -1, -1, 1])  # (sa, sb) = 00, 01, 10, 11
    t = positions[None, :, None, None, :]
    # [sa * 2 + sb, ia, ib, d, k]
    value = sign[:, None, None, None, None] * signs[None, :, None, None, :] * (sig[None, None, :, None, None] << (t + 9 + g).clamp(min=0))
    floored = torch.div(value, 1 << d[None, None, None, :, None], rounding_mode="floor")
    in_bound = (signs[None, :, None, None, :] != 0) & (d[None, None, None, :, None] <= t + 16 + g)
    contrib = torch.where(in_bound, floored, 0).sum(-1)
    packed = (contrib << count_bits) | in_bound.sum(-1)
    return packed.reshape(-1).to(device), count.to(device), span - 1


@dataclass
class TileResult:
    """Outputs and cost of a batch of tile passes.

    ``outputs``: fp32 [passes, rows, cols]; ``cycles``: int64 [passes];
    ``terms`` / ``skipped_terms``: in-bound / out-of-bounds terms of live lanes,
    summed over the PEs and lanes of each pass, int64 [passes];
    ``step_cycles``: int64 [passes, steps], the cost of each step;
    ``pe_cycles``: int64 [passes], the cycles each PE alone would take for each step (the
    maximum over its lanes, or the all-zero step's cost), summed over the steps and PEs.
    """

    outputs: torch.Tensor
    cycles: torch.Tensor
    terms: torch.Tensor
    skipped_terms: torch.Tensor
    step_cycles: torch.Tensor
    pe_cycles: torch.Tensor


def _as_bits(bits, name):
    if isinstance(bits, np.ndarray):
        bits = torch.from_numpy(bits.astype(np.int64))
    bits = torch.as_tensor(bits)
    if bits.is_floating_point() or bits.is_complex():
        raise TypeError(f"{name} must hold bf16 bit patterns as integers, not {bits.dtype}")
    bits = bits.to(torch.int64)
    if bits.dim() != 4:
        raise ValueError(f"{name} must have shape [passes, rows|cols, steps, lanes], got {tuple(bits.shape)}")
    if ((bits < 0) | (bits > 0xFFFF)).any():
        raise ValueError(f"{name} holds values outside 0..0xFFFF; expected bf16 bit patterns")
    return bits


class _Operand:
    """Decoded bf16 fields of one operand side: sign, exponent, significand index, classes."""

    def __init__(self, bits):
        self.sign = (bits >> 15) & 1
        self.exp = (bits >> 7) & 0xFF
        self.index = bits & 0x7F  # significand - 128
        self.zero = self.exp == 0
        self.special = self.exp == 0xFF
        self.nan = self.special & (self.index != 0)
        self.inf = self.special & (self.index == 0)
        self.live = ~self.zero & ~self.special


def _round_accumulator(accumulator, frame, guard_bits):
    """Round accumulator values ``U * 2**(F - 150 - G)`` to fp32 bit patterns (RNE, FTZ, overflow to Inf).

    ``U`` is any int64 (its magnitude may exceed 2**53, and -2**63 has none in int64: it is rounded as
    -2**62 one frame exponent up, exactly the same value).
    """
    lowest = accumulator == torch.iinfo(torch.int64).min
    sign = (accumulator < 0).to(torch.int64)
    mag = torch.where(lowest, 1 << 62, accumulator.abs())
    exponent = frame + lowest.to(torch.int64)
    msb = torch.frexp(mag.to(torch.float64)).exponent.to(torch.int64) - 1
    # above 2**53 the conversion to float64 may round up to the next power of two: take the MSB exactly (the bits
    # would come out the same, as such a U also rounds up to that power of two, but ``kept`` keeps its 24 bits)
    msb = msb - ((mag >> msb.clamp(0, 63)) == 0).to(torch.int64)
    shift = msb - 23
    right = shift.clamp(min=0)
    kept = mag >> right
    rest = mag - (kept << right)
    half = torch.where(right > 0, 1 << (right - 1).clamp(min=0), 0)
    up = (right > 0) & ((rest > half) | ((rest == half) & ((kept & 1) == 1)))
    significand = (kept + up.to(torch.int64)) << (-shift).clamp(min=0)
    carry = significand >> 24
    significand = significand >> carry
    biased = exponent - 23 - guard_bits + msb + carry
    bits = (sign << 31) | (biased.clamp(0, 255) << 23) | (significand & 0x7FFFFF)
    bits = torch.where(biased < 1, sign << 31, bits)
    bits = torch.where(biased > 254, (sign << 31) | 0x7F800000, bits)
    return torch.where(mag == 0, 0, bits)


def checked_arguments(a_bits, b_bits, guard_bits, zero_block_cycles, as_bits=_as_bits):
    """``tile``'s arguments checked, the operands converted by ``as_bits(bits, name)``: the checks of every
    implementation of ``tile`` (this model and its fused kernel), stated once."""
    if not isinstance(guard_bits, int) or guard_bits < 0:
        raise ValueError(f"guard_bits must be a non-negative integer, not {guard_bits!r}")
    if zero_block_cycles not in (0, 1):
        raise ValueError(f"zero_block_cycles must be 0 or 1, not {zero_block_cycles!r}")
    a_bits = as_bits(a_bits, "a_bits")
    b_bits = as_bits(b_bits, "b_bits")
    passes, _, steps, lanes = a_bits.shape
    if (b_bits.shape[0], b_bits.shape[2], b_bits.shape[3]) != (passes, steps, lanes):
        raise ValueError(
            f"a_bits {tuple(a_bits.shape)} and b_bits {tuple(b_bits.shape)} disagree on passes, steps or lanes"
        )
    return a_bits, b_bits


def tile(a_bits, b_bits, guard_bits, zero_block_cycles, device=None):
    """Run passes of an R x C FPRaker tile.

    ``a_bits``: bf16 patterns [passes, rows, steps, lanes] (term-serial, shared along rows);
    ``b_bits``: [passes, cols, steps, lanes] (bit-parallel, shared along columns);
    ints (torch or numpy). Returns a ``TileResult``, on ``device`` (a torch device; default:
    where ``a_bits`` is). Work is vectorised over passes, PEs, lanes and steps (the alignment is
    feed-forward); only the accumulator's shift and add run step after step.
    """
    a_bits, b_bits = checked_arguments(a_bits, b_bits, guard_bits, zero_block_cycles)
    device = torch.device(a_bits.device if device is None else device)
    a_bits, b_bits = a_bits.to(device), b_bits.to(device)
    passes, rows, steps, lanes = a_bits.shape
    per_pass = max(1, rows * b_bits.shape[1] * steps * lanes)
    chunk = max(1, (_CHUNK if device.type == "cpu" else _GPU_CHUNK) // per_pass)
    parts = [
        _tile_chunk(a_bits[p : p + chunk], b_bits[p : p + chunk], guard_bits, zero_block_cycles)
        for p in range(0, passes, chunk)
    ] or [_tile_chunk(a_bits, b_bits, guard_bits, zero_block_cycles)]
    return TileResult(*(torch.cat([getattr(part, field.name) for part in parts]) for field in fields(TileResult)))


def _tile_chunk(a_bits, b_bits, g, zero_block_cycles):
    passes, rows, steps, lanes = a_bits.shape
    count_bits = max(3, (MAX_TERMS * lanes).bit_length())
    packed_table, total_table, far = _tables(g, count_bits, str(a_bits.device))
    span = far + 1
    cols = b_bits.shape[1]
    # step-major layout [S, P, R|1, 1|C, N]: each step is one contiguous slice
    a = _Operand(a_bits.permute(2, 0, 1, 3)[:, :, :, None])
    b = _Operand(b_bits.permute(2, 0, 1, 3)[:, :, None])
    # a lane without a product gets an exponent far below every real one (< _DEAD)
    product_exp = torch.where(a.live, a.exp - _BF16_BIAS, _NONE) + torch.where(b.live, b.exp, _NONE)
    step_max = product_exp.amax(-1)  # [S, P, R, C]
    any_live = step_max > _DEAD
    table_base = (a.sign * 2 * 128 * 128 + a.index * 128) * span + (b.sign * 128 * 128 + b.index) * span
    # terms of live lanes, summed over the PEs: sum over lanes of (row terms) x (live columns)
    row_terms = torch.where(a.live, total_table[a.index], 0).sum(2)  # [S, P, 1, N]
    total = (row_terms * b.live.sum(3)).sum((2, 3))  # [S, P]

    # everything but the accumulator is feed-forward: the running maximum E of the product exponents
    # (below _DEAD until the pass's first live lane), each lane's distance to it, its table entry
    running = step_max.cummax(0).values  # E after each step [S, P, R, C]
    aligned_to = torch.where(running < _DEAD, -_NONE, running)  # nothing to align to: every lane out of bounds
    distance = (aligned_to[..., None] - product_exp).clamp_(max=far)
    lane = packed_table.take(table_base + distance)  # [S, P, R, C, N]
    del distance
    packed_sum = lane.sum(-1)
    counts = (1 << count_bits) - 1
    lane_terms = (lane & counts).amax(-1)
    del lane
    pe_cycles = torch.where(any_live, lane_terms.clamp(min=1), zero_block_cycles)
    step_cycles = pe_cycles.flatten(2).amax(-1)  # [S, P]
    terms = (packed_sum & counts).flatten(2).sum(-1)
    frame = running & ~((1 << FRAME_BITS) - 1)
    addend = (packed_sum >> count_bits) << (running - frame)  # the step's sum, moved by the offset D
    moves = (frame - torch.cat((frame[:1], frame[:-1]))).clamp_(0, ACCUMULATOR_BITS - 1)

    accumulator = torch.zeros((passes, rows, cols), dtype=torch.int64, device=a_bits.device)
    for s in range(steps):  # a step without a live lane has no move and adds 0
        accumulator = (accumulator >> moves[s]) + addend[s]

    bits = _round_accumulator(accumulator, frame[-1], g) if steps else accumulator
    if bool(a.special.any() or b.special.any()):
        bits = _specials(a, b, bits)
    step_cycles = step_cycles.T.contiguous()
    terms = terms.sum(0)
    return TileResult(fp32_from_bits(bits), step_cycles.sum(-1), terms, total.sum(0) - terms, step_cycles,
                      pe_cycles.sum((0, 2, 3)))


def _specials(a, b, bits):
    """Override results with NaN/Inf where the pass met them (sticky over all its steps)."""
    lane_nan = a.nan | b.nan | (a.inf & b.zero) | (a.zero & b.inf)
    lane_inf = (a.inf | b.inf) & ~lane_nan
    negative = (a.sign ^ b.sign) == 1
    nan = lane_nan.any(-1).any(0)
    pos_inf = (lane_inf & ~negative).any(-1).any(0)
    neg_inf = (lane_inf & negative).any(-1).any(0)
    bits = torch.where(pos_inf, 0x7F800000, bits)
    bits = torch.where(neg_inf, 0xFF800000, bits)
    return torch.where(nan | (pos_inf & neg_inf), CANONICAL_NAN_BITS, bits)


def pe(a_bits, b_bits, guard_bits, zero_block_cycles):
    """One PE: ``a_bits``, ``b_bits`` [steps, lanes] bf16 patterns -> (fp32 output, cycles)."""
    a_bits = torch.as_tensor(np.asarray(a_bits, dtype=np.int64))
    b_bits = torch.as_tensor(np.asarray(b_bits, dtype=np.int64))
    if a_bits.dim() != 2 or a_bits.shape != b_bits.shape:
        raise ValueError(f"a_bits {tuple(a_bits.shape)} and b_bits {tuple(b_bits.shape)} must both be [steps, lanes]")
    result = tile(a_bits[None, None], b_bits[None, None], guard_bits, zero_block_cycles)
    return result.outputs[0, 0, 0], int(result.cycles[0])
