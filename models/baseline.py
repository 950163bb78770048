"""Golden model of the dense baseline PE and tile (SPEC section 2), in PyTorch float32 ops.

A PE multiplies its N lane pairs each cycle, sums the N products with a balanced
binary tree of fp32 adders and adds the tree sum to its fp32 accumulator. The tree
pairs neighbours level by level, ``(x0 + x1), (x2 + x3), ...``; an odd element at
the end of a level passes up unchanged (for N a power of two this is the usual
balanced tree with lane i at leaf i). With L interleaved accumulators (SPEC section
2, amended 2026-11) the tree sum of step t goes to partial t mod L and the L
partials are summed by the same tree at the end of the pass; L = 1 is the single
in-order accumulator. With L = 0 the tree sums go into a wide fixed-point
accumulator rounded once at the end of the pass instead (``fixed_point_accumulate``),
which holds every fp32 number exactly. A step may instead be the fused dot product
(SPEC section 2, amended 2026-11-27; ``fused_steps``): exact products aligned to the
step's largest in a window, summed as integers and added into the same fixed-point
accumulator (``accumulate_addends``) with no rounding before the pass's end. Or each lane may be a
conventional fused multiply-add (``fma_lanes``): its exact bf16 product added into the lane's own fp32
accumulator, one rounding per step, the lanes' accumulators summed by the fp32 tree at the end of the pass.
"""

import math

import torch

from dashraker.formats import FIXED_POINT_FRAME, FUSED_GUARD_BITS, float_format
from dashraker.models.numerics import flush_subnormals, fp32_add, fp32_bits, fp32_mul, quantize, split

__all__ = ["adder_tree", "accumulate", "fixed_point_accumulate", "fp32_addends", "accumulate_addends", "fused_steps",
           "fma_lanes", "dense_tile", "DOTS"]

# A step's sum (SPEC section 2): the fp32 adder tree, the fused dot product, or a fused multiply-add per lane.
DOTS = ("tree", "fused", "fma")


def adder_tree(products):
    """Sum the last axis with the fp32 adder tree; returns the tree sums (one axis fewer)."""
    level = torch.as_tensor(products, dtype=torch.float32)
    while level.shape[-1] > 1:
        paired = level.shape[-1] // 2 * 2
        sums = fp32_add(level[..., 0:paired:2], level[..., 1:paired:2])
        level = torch.cat([sums, level[..., paired:]], dim=-1)
    return flush_subnormals(level[..., 0])


def accumulate(step_sums, accumulators):
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

    The frame (``FIXED_POINT_FRAME``: 384 bits from 2^-192) holds every fp32 number exactly, so the
    pass's total is the exact sum of its finite step sums, rounded once to nearest even: +0.0 for a zero
    total, +-Inf past fp32's largest number, a zero of the total's sign below 2^-126 (FTZ). IEEE's
    specials stay sticky over the pass: a NaN, or Infs of both signs, give NaN; otherwise an Inf gives
    that Inf. Returns fp32 [...].
    """
    return accumulate_addends(fp32_addends(step_sums))


def fp32_addends(values):
    """fp32 values [...] as the accumulator's addends ``(high, low, exponent, nan, pos_inf, neg_inf)``.

    An addend is the integer ``high * 2**32 + low`` times ``2**exponent`` (int64 tensors); a finite fp32 number
    is its signed significand (hidden one, 0 for zeros and subnormals: DAZ) at ``exponent = biased - 150``.
    The flags mark NaN, +Inf and -Inf (whose integer is 0).
    """
    bits = fp32_bits(torch.as_tensor(values, dtype=torch.float32))
    sign, exponent, significand = split(bits, "fp32")
    special = exponent == 255
    nan, infinite = special & (significand != 1 << 23), special & (significand == 1 << 23)
    significand = torch.where(special, 0, significand)
    low = torch.where(sign == 1, -significand, significand)
    return torch.zeros_like(low), low, exponent - 150, nan, infinite & (sign == 0), infinite & (sign == 1)


def accumulate_addends(addends):
    """The fixed-point accumulator over ``addends`` (``fp32_addends``' six tensors [..., steps]) -> fp32 [...].

    Each addend enters the frame as a whole number of its units 2^-192 (an addend's bits below the frame
    would be dropped towards minus infinity, an arithmetic shift; no fp32 sum and no fused step sum of
    ``guard_bits`` <= 15 has any), the pass adds them exactly, and the total is rounded once (``_round_to_fp32``);
    specials are sticky as ``fixed_point_accumulate`` says. A total that leaves the frame (only possible
    after 2^(63 - log2 N) steps) is refused with ``ValueError``: the hardware would wrap around.
    """
    bits, lsb = FIXED_POINT_FRAME
    limit = 1 << (bits - 1)
    high, low, exponent, nan, pos_inf, neg_inf = (torch.as_tensor(part) for part in addends)
    shape = low.shape[:-1]
    flat = [part.reshape(math.prod(shape), low.shape[-1]) for part in (high, low, exponent)]
    nan = nan.any(-1) | (pos_inf.any(-1) & neg_inf.any(-1))
    pos_inf, neg_inf = pos_inf.any(-1), neg_inf.any(-1)
    results = []
    for highs, lows, exponents in zip(*(part.tolist() for part in flat)):
        total = 0
        for h, l, e in zip(highs, lows, exponents):
            units = (h << 32) + l
            total += units << (e - lsb) if e >= lsb else units >> (lsb - e)
            if not -limit <= total < limit:
                raise ValueError("a pass's total left the fixed-point frame (2^191); the hardware would wrap around")
        results.append(_round_to_fp32(total, lsb))
    rounded = torch.tensor(results, dtype=torch.float32).reshape(shape)
    rounded = torch.where(pos_inf, math.inf, torch.where(neg_inf, -math.inf, rounded))
    return torch.where(nan, math.nan, rounded)


def fused_steps(a, b, fmt, guard_bits=FUSED_GUARD_BITS):
    """The fused dot products of steps: operands [..., lanes] (fp32 tensors of ``fmt`` values) -> addends [...].

    Each lane's product is exact: significands multiplied as integers (2p bits, p = 8 for bf16, 24 for fp32),
    exponents added. A product with a zero or subnormal operand is zero (DAZ); NaN x anything and Inf x 0 are
    NaN, Inf x non-zero is an Inf of the product's sign; an exact product of 2^128 or more in magnitude is an
    Inf of its sign (as the fp32 multiplier overflows), one below 2^-126 a zero (FTZ). The step's largest
    exponent sum E among its other (in-range, non-zero) products sets the window: each such product's
    significand, ``guard_bits`` G places to the left, is shifted right by E minus its own exponent sum, the
    bits shifted out dropped (towards zero: the magnitude is shifted), so the window is 2p + G bits below the
    largest product's top place. The signed window values are summed exactly (the integer adder tree) into
    the step's addend, its unit 2^(E - 254 - 2(p - 1) - G). Returns ``fp32_addends``' six tensors.
    """
    fmt = float_format(fmt)
    p = fmt.precision
    if not isinstance(guard_bits, int) or not 0 <= guard_bits <= 15:
        raise ValueError(f"guard_bits must be an integer in 0..15, not {guard_bits!r}")
    low_bits = 32 - fmt.width  # below the operand's bits within its fp32 value (bf16: the low 16)
    parts = [split(fp32_bits(torch.as_tensor(x, dtype=torch.float32)) >> low_bits, fmt) for x in (a, b)]
    (sign_a, exp_a, sig_a), (sign_b, exp_b, sig_b) = parts
    special_a, special_b = exp_a == fmt.exp_max, exp_b == fmt.exp_max
    hidden = 1 << (p - 1)
    nan_a, nan_b = special_a & (sig_a != hidden), special_b & (sig_b != hidden)
    inf_a, inf_b = special_a & (sig_a == hidden), special_b & (sig_b == hidden)
    zero_a, zero_b = exp_a == 0, exp_b == 0
    sign = sign_a ^ sign_b
    nan = nan_a | nan_b | (inf_a & zero_b) | (inf_b & zero_a)
    product = sig_a * sig_b  # exact: at most 48 bits
    exponent = exp_a + exp_b
    lead = exponent - 254 + (product >> (2 * p - 1))  # the exact product's top place is 2^lead
    finite = ~(special_a | special_b | zero_a | zero_b)
    overflow = finite & (lead >= 128)
    inf = ((inf_a | inf_b) & ~nan) | overflow
    used = finite & ~overflow & (lead >= -126)
    largest = torch.where(used, exponent, 0).amax(-1, keepdim=True)
    distance = largest - exponent
    window = torch.where(distance <= guard_bits, product << (guard_bits - distance).clamp(min=0),
                         product >> (distance - guard_bits).clamp(min=0, max=63))
    window = torch.where(used, window, 0)
    high, low = window >> 32, window & 0xFFFFFFFF
    high, low = (torch.where(sign == 1, -part, part).sum(-1) for part in (high, low))
    return (high, low, largest[..., 0] - 254 - 2 * (p - 1) - guard_bits, nan.any(-1),
            (inf & (sign == 0)).any(-1), (inf & (sign == 1)).any(-1))


def fma_lanes(a, b, accumulators=1):
    """Each lane a fused multiply-add into its own fp32 accumulator, the lanes' accumulators summed by the tree.

    ``a``, ``b`` [..., steps, lanes] hold bf16 values (fp32 tensors). A bf16 x bf16 product has at most 16
    significant bits, so ``fp32_mul`` gives it exactly; only outside fp32's normal range does it leave the exact
    product (an Inf from 2^128, a signed zero below 2^-126: FTZ), as the multiplier does. The lane's add is then
    the step's one rounding (RNE, FTZ): ``acc = fl(acc + a * b)``, which is ``torch.addcmul(acc, a, b)`` in fp32
    for products in range. Lane i's products go into its ``accumulators`` interleaved partials as ``accumulate``
    adds a PE's step sums (L = 1: the sequential FMA); the lanes' sums then go through ``adder_tree``, lane i at
    leaf i. Returns fp32 [...].
    """
    products = fp32_mul(a, b).transpose(-1, -2)  # [..., lanes, steps]
    return adder_tree(accumulate(products, accumulators))


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


def dense_tile(a, b, fmt, accumulators, dot):
    """An R x C tile: row operands a [R, steps, lanes], column operands b [C, steps, lanes] -> [R, C].

    PE (r, c) accumulates, step by step, the tree sum of ``a[r, step] * b[c, step]`` into
    ``accumulators`` interleaved partials, or the fixed-point frame for 0 (``accumulate``). With ``dot="fused"``
    each step is the fused dot product (``fused_steps``) added into the fixed-point frame (``accumulators`` must
    be 0); with ``dot="fma"`` each lane is a fused multiply-add into its own ``accumulators`` >= 1 fp32 partials
    (``fma_lanes``; bf16 operands only). Inputs are quantized to the operand format first (RNE, FTZ), as the
    hardware sees them.
    """
    a = quantize(a, fmt)
    b = quantize(b, fmt)
    if dot == "fma":
        if accumulators < 1 or float_format(fmt).precision > 8:
            raise ValueError(f"a fused multiply-add lane takes bf16 operands into at least one fp32 accumulator, not "
                             f"{fmt} into {accumulators}")
        return fma_lanes(a[:, None, :, :], b[None, :, :, :], accumulators)
    if dot == "fused":
        if accumulators != 0:
            raise ValueError(f"the fused dot product adds into the fixed-point accumulator (0), not {accumulators}")
        return accumulate_addends(fused_steps(a[:, None], b[None, :], fmt))
    products = fp32_mul(a[:, None], b[None, :])  # [R, C, steps, lanes]
    return accumulate(adder_tree(products), accumulators)
