"""Golden model of the dense baseline PE and tile (SPEC section 2), in PyTorch float32 ops.

A PE multiplies its N lane pairs each cycle, sums the N products with a balanced
binary tree of fp32 adders and adds the tree sum to its fp32 accumulator. The tree
pairs neighbours level by level, ``(x0 + x1), (x2 + x3), ...``; an odd element at
the end of a level passes up unchanged (for N a power of two this is the usual
balanced tree with lane i at leaf i). With L interleaved accumulators (SPEC section
2, amended 2026-11) the tree sum of step t goes to partial t mod L and the L
partials are summed by the same tree at the end of the pass; L = 1 is the single
in-order accumulator. With L = 0 the tree sums go into a wide fixed-point
accumulator rounded once at the end of the pass instead (``fixed_point_accumulate``).
"""

import math

import torch

from dashraker.formats import FIXED_POINT_FRAME
from dashraker.models.numerics import flush_subnormals, fp32_add, fp32_mul, quantize

__all__ = ["adder_tree", "accumulate", "fixed_point_accumulate", "dense_tile"]


def adder_tree(products):
    """Sum the last axis with the fp32 adder tree; returns the tree sums (one axis fewer)."""
    level = torch.as_tensor(products, dtype=torch.float32)
    while level.shape[-1] > 1:
        paired = level.shape[-1] // 2 * 2
        sums = fp32_add(level[..., 0:paired:2], level[..., 1:paired:2])
        level = torch.cat([sums, level[..., paired:]], dim=-1)
    return flush_subnormals(level[..., 0])


def accumulate(step_sums, accumulators=1):
    """Accumulate per-step sums [..., steps] into L interleaved fp32 partials, then sum those with the tree.

    Partial p is the in-order fp32 sum, from +0.0, of the steps t with t mod L = p (+0.0
    if there is none); the result is ``adder_tree`` over the L partials. L = 0 is the
    fixed-point accumulator (``fixed_point_accumulate``).
    """
    step_sums = torch.as_tensor(step_sums, dtype=torch.float32)
    if accumulators == 0:
        return fixed_point_accumulate(step_sums)
    partials = torch.zeros(*step_sums.shape[:-1], accumulators)
    for start in range(0, step_sums.shape[-1], accumulators):
        sums = step_sums[..., start:start + accumulators]
        width = sums.shape[-1]
        partials = torch.cat([fp32_add(partials[..., :width], sums), partials[..., width:]], dim=-1)
    return adder_tree(partials)


def fixed_point_accumulate(step_sums):
    """Sum fp32 step sums [..., steps] exactly in the fixed-point frame, rounded once to fp32 (SPEC section 2).

    Each sum becomes a whole number of the frame's units 2^lsb, truncated towards zero,
    and the pass adds them as exact integers; the total is rounded to nearest even, with
    +0.0 for a zero total. IEEE's specials stay sticky over the pass: a NaN, or Infs of
    both signs, give NaN; otherwise an Inf gives that Inf. A finite sum of 2^(bits - 1 + lsb)
    or more in magnitude, or a running total outside the frame's two's complement range,
    makes the pass NaN. Returns fp32 [...].
    """
    bits, lsb = FIXED_POINT_FRAME
    limit = 1 << (bits - 1)
    step_sums = torch.as_tensor(step_sums, dtype=torch.float32)
    results = []
    for sums in step_sums.double().reshape(math.prod(step_sums.shape[:-1]), step_sums.shape[-1]).tolist():
        specials = [value for value in sums if not math.isfinite(value)]
        if specials:  # NaN != NaN, so a NaN or unequal Infs give NaN
            results.append(specials[0] if all(value == specials[0] for value in specials) else math.nan)
            continue
        total, inside = 0, True
        for value in sums:
            if abs(value) >= math.ldexp(1, bits - 1 + lsb):
                inside = False
                break
            total += int(math.ldexp(value, -lsb))  # exact scaling; int() truncates towards zero
            inside = inside and -limit <= total < limit
        results.append(_round_to_fp32(total, lsb) if inside else math.nan)
    return torch.tensor(results, dtype=torch.float32).reshape(step_sums.shape[:-1])


def _round_to_fp32(units, lsb):
    """``units * 2**lsb`` (a Python int) rounded to fp32, to nearest even; +0.0 for 0, subnormals flushed to zero."""
    if units == 0:
        return 0.0
    magnitude = abs(units)
    shift = max(magnitude.bit_length() - 24, 0)
    kept, dropped = divmod(magnitude, 1 << shift)
    half = (1 << shift) >> 1
    if shift and (dropped > half or (dropped == half and kept & 1)):
        kept += 1
    value = math.ldexp(kept, shift + lsb)  # exact in float64: at most 25 significant bits
    if value >= 2.0**128:
        value = math.inf
    elif value < 2.0**-126:
        value = 0.0
    return math.copysign(value, units)


def dense_tile(a, b, fmt="bf16", accumulators=1):
    """An R x C tile: row operands a [R, steps, lanes], column operands b [C, steps, lanes] -> [R, C].

    PE (r, c) accumulates, step by step, the tree sum of ``a[r, step] * b[c, step]`` into
    ``accumulators`` interleaved partials, or the fixed-point frame for 0 (``accumulate``). Inputs are quantized to the
    operand format first (RNE, FTZ), as the hardware sees them.
    """
    a = quantize(a, fmt)
    b = quantize(b, fmt)
    products = fp32_mul(a[:, None], b[None, :])  # [R, C, steps, lanes]
    return accumulate(adder_tree(products), accumulators)
