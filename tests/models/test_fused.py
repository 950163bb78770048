"""The fixed-point accumulator's, the fused dot product's and the fused multiply-add lanes' golden models against an
independent reference in exact rationals (``fractions.Fraction``): the pass's exact sum rounded once, products
truncated to the window's unit; each lane's exact product and accumulator rounded once per step."""

import math
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch

from dashraker.formats import FUSED_GUARD_BITS, float_format
from dashraker.models.baseline import (accumulate_addends, adder_tree, dense_tile, fixed_point_accumulate, fma_lanes,
                                       fused_steps)
from dashraker.models.numerics import fp32_bits, quantize

CANONICAL_NAN = 0x7FC00000
POS_INF, NEG_INF = 0x7F800000, 0xFF800000


def _bits(value):
    return struct.unpack("<I", struct.pack("<f", value))[0]


def _value(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _round(exact):
    """fp32 bits of a rational: to nearest even, +-Inf from 2^128, a signed zero below 2^-126, +0.0 for zero."""
    if exact == 0:
        return 0
    sign = 0x80000000 if exact < 0 else 0
    magnitude = abs(exact)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    while Fraction(2) ** exponent > magnitude:
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= magnitude:
        exponent += 1
    unit = Fraction(2) ** (exponent - 23)
    kept, rest = divmod(magnitude, unit)
    if rest > unit / 2 or (rest == unit / 2 and kept % 2):
        kept += 1
    rounded = kept * unit
    if rounded >= Fraction(2) ** 128:
        return sign | POS_INF
    if rounded < Fraction(2) ** -126:
        return sign
    return sign | _bits(float(rounded))


def _finite(value):
    """The exact value of a float as the hardware reads it: subnormals are zero (DAZ)."""
    return Fraction(0) if abs(value) < 2.0**-126 else Fraction(value)


def _pass_result(terms, specials):
    """A pass's fp32 bits from its exact finite terms and its specials' values (NaN, +-Inf), IEEE's sticky rules."""
    if any(math.isnan(s) for s in specials) or (math.inf in specials and -math.inf in specials):
        return CANONICAL_NAN
    if specials:
        return POS_INF if specials[0] > 0 else NEG_INF
    return _round(sum(terms, Fraction(0)))


def reference_accumulate(sums):
    """The fixed-point accumulator: every fp32 sum exact, one rounding."""
    return _pass_result([_finite(s) for s in sums if math.isfinite(s)], [s for s in sums if not math.isfinite(s)])


def _exponent(value):
    """The unbiased exponent of a normal float."""
    return math.frexp(value)[1] - 1


def reference_fused(a, b, fmt, guard_bits=FUSED_GUARD_BITS):
    """A pass of fused steps: ``a``, ``b`` [steps][lanes] of operand values (floats already in ``fmt``)."""
    precision = float_format(fmt).precision
    terms, specials = [], []
    for a_step, b_step in zip(a, b):
        used = []
        for x, y in zip(a_step, b_step):
            x_zero, y_zero = abs(x) < 2.0**-126, abs(y) < 2.0**-126
            if math.isnan(x) or math.isnan(y) or (math.isinf(x) and y_zero) or (math.isinf(y) and x_zero):
                specials.append(math.nan)
            elif math.isinf(x) or math.isinf(y):
                specials.append(math.copysign(math.inf, x) * math.copysign(1.0, y))
            elif not (x_zero or y_zero):
                product = Fraction(x) * Fraction(y)
                if abs(product) >= Fraction(2) ** 128:
                    specials.append(math.inf if product > 0 else -math.inf)
                elif abs(product) >= Fraction(2) ** -126:
                    used.append((product, _exponent(x) + _exponent(y)))
        if used:
            unit = Fraction(2) ** (max(e for _, e in used) - 2 * (precision - 1) - guard_bits)
            # each product truncated towards zero to a whole number of the window's units, then summed exactly
            terms.append(sum((unit * int(product / unit) for product, _ in used), Fraction(0)))
    return _pass_result(terms, specials)


def _golden_fused(a, b, fmt, guard_bits=FUSED_GUARD_BITS):
    addends = fused_steps(torch.tensor(a, dtype=torch.float32)[None], torch.tensor(b, dtype=torch.float32)[None], fmt,
                          guard_bits)
    return fp32_bits(accumulate_addends(addends)).item()


def _random_operands(rng, fmt, steps, lanes, spread):
    values = rng.standard_normal((2, steps, lanes)) * np.exp2(rng.integers(-spread, spread + 1, (2, steps, lanes)))
    return quantize(torch.tensor(values, dtype=torch.float32), fmt).tolist()


def test_accumulator_is_exact_over_fp32s_whole_range():
    rng = np.random.default_rng(1)
    cases = [[float(np.float32(rng.standard_normal() * 2.0 ** rng.integers(-140, 128)))
              for _ in range(rng.integers(1, 12))] for _ in range(300)]
    edges = [2.0**-126, -(2.0**-126), 2.0**-125, 3.4e38, -3.4e38, 2.0**127, 1.0, 2.0**-24, 2.0**-149, -0.0, 0.0,
             math.inf, -math.inf, math.nan]
    cases += [list(rng.choice(edges, rng.integers(1, 6))) for _ in range(200)]
    cases += [
        [1.0, 2.0**-24],  # a tie: to even (1.0)
        [1.0 + 2.0**-23, 2.0**-24],  # a tie: to even (up)
        [1.0, 2.0**-24, 2.0**-126],  # just above the tie: up
        [3.4e38, 3.4e38, -3.4e38],  # beyond fp32 on the way, back inside at the end
        [3.4e38, 3.4e38],  # overflow: +Inf
        [-3.4e38, -3.4e38],
        [2.0**-125, -(2.0**-126) * 1.5],  # cancellation below 2^-126: flushed to +0
        [-(2.0**-125), 2.0**-126 * 1.5],  # to -0
        [2.0**-126 * (2 - 2.0**-23), 2.0**-149 * 3],  # a sum of normal numbers just below... above 2^-126
        [2.0**100, 1.0, -(2.0**100)],  # total cancellation leaves the small one exact
        [-0.0, -0.0],  # a zero total is +0.0
    ]
    sums = [[float(np.float32(v)) for v in case] for case in cases]
    for case in sums:
        got = fp32_bits(fixed_point_accumulate(torch.tensor([case], dtype=torch.float32))).item()
        assert got == reference_accumulate(case), case


@pytest.mark.parametrize("fmt", ["bf16", "fp32"])
def test_fused_steps_match_the_reference(fmt):
    rng = np.random.default_rng(2 if fmt == "bf16" else 3)
    for index in range(120):
        steps, lanes = int(rng.integers(1, 5)), int(rng.choice([1, 3, 4, 8]))
        spread = [2, 12, 40, 70][index % 4]
        a, b = _random_operands(rng, fmt, steps, lanes, spread)
        assert _golden_fused(a, b, fmt) == reference_fused(a, b, fmt), (a, b)


@pytest.mark.parametrize("guard_bits", [0, 3, 15])
def test_fused_window_drops_what_falls_below_it(guard_bits):
    fmt = "bf16"
    # the second product lies 20 places below the first: its low bits fall out of a narrow window
    a, b = [[1.0, float(np.float32(1.9921875 * 2.0**-20))]], [[1.0, 1.9921875]]
    assert _golden_fused(a, b, fmt, guard_bits) == reference_fused(a, b, fmt, guard_bits)
    # the window's unit is 2^-(14 + G): G = 0 and 3 drop the small product whole, G = 15 keeps it (rounded to fp32)
    assert _value(_golden_fused(a, b, fmt, guard_bits)) == (1.0 if guard_bits < 6 else np.float32(1 + 2.0**-18))
    rng = np.random.default_rng(guard_bits)
    for _ in range(60):
        a, b = _random_operands(rng, fmt, 3, 8, 20)
        assert _golden_fused(a, b, fmt, guard_bits) == reference_fused(a, b, fmt, guard_bits)


def test_fused_specials_ties_cancellation_and_range():
    fmt = "bf16"
    big, tiny = 2.0**64, 2.0**-64
    cases = [
        ([[math.inf, 1.0]], [[2.0, 3.0]]),  # +Inf
        ([[math.inf, 1.0]], [[-2.0, 3.0]]),  # -Inf
        ([[math.inf, 1.0]], [[0.0, 3.0]]),  # Inf x 0: NaN
        ([[math.inf, math.inf]], [[1.0, -1.0]]),  # Inf - Inf in one step: NaN
        ([[math.inf], [1.0]], [[1.0], [-math.inf]]),  # Inf - Inf over two steps: NaN
        ([[math.nan, 1.0]], [[1.0, 1.0]]),
        ([[1e-39, math.inf]], [[1.0, 1.0]]),  # a subnormal is zero (DAZ): only the Inf remains
        ([[1e-39]], [[math.inf]]),  # subnormal x Inf: NaN
        ([[big, 1.0]], [[big, 1.0]]),  # 2^128: overflow to +Inf
        ([[big, 1.0]], [[-big, 1.0]]),
        ([[2.0**63 * 1.9921875, -(2.0**63) * 1.9921875]], [[2.0**64, 2.0**64]]),  # each near 2^128, cancelling
        ([[tiny, 1.0]], [[2.0**-62, 1.0]]),  # 2^-126 exactly: kept
        ([[tiny, 1.0]], [[2.0**-63, 0.0]]),  # 2^-127: flushed, the step sums to +0.0
        ([[tiny * 1.5, -tiny]], [[2.0**-62, 2.0**-62]]),  # cancellation to 2^-127: flushed
        ([[1.0, 1.0]], [[2.0**-24, 1.0]]),  # 1 + 2^-24: a tie, to even
        ([[1.0078125, 1.0]], [[1.0078125, 2.0**-24]]),  # (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14, plus 2^-24: exact sum
        ([[1.0, -1.0, 2.0**-10]], [[2.0**20, 2.0**20, 2.0**-10]]),  # cancellation of the largest: the small stays
        ([[-0.0, -0.0]], [[1.0, 1.0]]),  # negative zeros: +0.0
        ([[3.0, 3.0], [3.0, 3.0]], [[2.0**126, 2.0**126], [-(2.0**126), -(2.0**126)]]),  # beyond fp32, back to 0
    ]
    for a, b in cases:
        a = quantize(torch.tensor(a), fmt).tolist()
        b = quantize(torch.tensor(b), fmt).tolist()
        assert _golden_fused(a, b, fmt) == reference_fused(a, b, fmt), (a, b)


@pytest.mark.parametrize("fmt", ["bf16", "fp32"])
def test_fused_tile_is_the_fused_pass_of_each_pe(fmt):
    rng = np.random.default_rng(4)
    a = torch.tensor(rng.standard_normal((2, 5, 4)), dtype=torch.float32)
    b = torch.tensor(rng.standard_normal((3, 5, 4)), dtype=torch.float32)
    got = fp32_bits(dense_tile(a, b, fmt, 0, "fused"))
    qa, qb = quantize(a, fmt).tolist(), quantize(b, fmt).tolist()
    want = [[reference_fused(qa[r], qb[c], fmt) for c in range(3)] for r in range(2)]
    assert got.tolist() == want
    with pytest.raises(ValueError, match="fixed-point accumulator"):
        dense_tile(a, b, fmt, 1, "fused")


def reference_fma(acc, a, b):
    """``fl(acc + a * b)`` of floats from exact rationals: the exact product (an Inf of its sign from 2^128, a
    signed zero below 2^-126, as the multiplier gives it), the exact sum, one rounding (``_round``); IEEE's
    specials and signed zeros (a zero sum is -0.0 only from two negative zeros)."""
    a, b, acc = (math.copysign(0.0, x) if abs(x) < 2.0**-126 else x for x in (a, b, acc))  # DAZ
    sign = math.copysign(1.0, a) * math.copysign(1.0, b)
    if any(map(math.isnan, (a, b, acc))) or (math.isinf(a) and b == 0) or (math.isinf(b) and a == 0):
        return math.nan
    exact = Fraction(0) if math.isinf(a) or math.isinf(b) else Fraction(a) * Fraction(b)
    if math.isinf(a) or math.isinf(b) or abs(exact) >= Fraction(2) ** 128:
        product = math.copysign(math.inf, sign)
        return math.nan if math.isinf(acc) and acc != product else product
    if math.isinf(acc):
        return acc
    if abs(exact) < Fraction(2) ** -126:
        exact = Fraction(0)
    total = Fraction(acc) + exact
    if total == 0:
        return -0.0 if exact == 0 and acc == 0 and sign < 0 and math.copysign(1.0, acc) < 0 else 0.0
    return _value(_round(total))


def _reference_tree(values):
    """Neighbours pairwise, level by level, an odd one passing up (``reference_fma`` with a factor of 1.0)."""
    while len(values) > 1:
        values = [reference_fma(values[i], values[i + 1], 1.0) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


def reference_fma_pe(a, b, accumulators):
    """A PE's pass of fused multiply-add lanes: ``a``, ``b`` [steps][lanes] of bf16 values; lane i's products into
    its L partials (step t into partial t mod L), each lane's partials then the lanes' results by the tree."""
    lanes = len(a[0])
    results = []
    for lane in range(lanes):
        partials = [0.0] * accumulators
        for step, (row, col) in enumerate(zip(a, b)):
            partials[step % accumulators] = reference_fma(partials[step % accumulators], row[lane], col[lane])
        results.append(_reference_tree(partials))
    result = _reference_tree(results)
    return CANONICAL_NAN if math.isnan(result) else _bits(result)


def _golden_fma(a, b, accumulators):
    tensors = (torch.tensor(x, dtype=torch.float32)[None] for x in (a, b))
    return fp32_bits(fma_lanes(*tensors, accumulators)).item()


@pytest.mark.parametrize("accumulators", [1, 2, 3])
def test_fma_lanes_match_the_reference(accumulators):
    rng = np.random.default_rng(5 + accumulators)
    for index in range(120):
        steps, lanes = int(rng.integers(1, 9)), int(rng.choice([1, 2, 3, 4, 8]))
        a, b = _random_operands(rng, "bf16", steps, lanes, [2, 12, 40, 70][index % 4])
        assert _golden_fma(a, b, accumulators) == reference_fma_pe(a, b, accumulators), (a, b)


def test_fma_specials_ties_cancellation_and_range():
    big, tiny = 2.0**64, 2.0**-64
    edges = [0.0, -0.0, 1e-40, -1e-40, math.inf, -math.inf, math.nan, big, -big, tiny, 1.0, -1.0, 3.0, 2.0**-24]
    rng = np.random.default_rng(9)
    cases = [(rng.choice(edges, (3, 2)).tolist(), rng.choice(edges, (3, 2)).tolist()) for _ in range(300)]
    cases += [
        ([[big], [big]], [[1.9921875 * big], [-1.9921875 * big]]),  # near 2^128 then back: the sum overflows on the way
        ([[big], [1.0]], [[big], [1.0]]),  # a product of 2^128: +Inf (the multiplier overflows)
        ([[tiny], [1.0]], [[2.0**-63], [2.0**-126]]),  # a product of 2^-127 flushes; 2^-126 is kept
        ([[1.0], [1.0]], [[1.0], [2.0**-24]]),  # 1 + 2^-24: a tie, to even (1.0): the FMA's one rounding
        ([[1.0078125], [1.0]], [[1.0], [2.0**-24]]),  # 1 + 2^-7 + 2^-24: below the tie
        ([[1.0], [-1.0], [2.0**-10]], [[2.0**20], [2.0**20], [2.0**-10]]),  # cancellation: the small one stays exact
        ([[2.0**-62 * 1.5], [-(2.0**-62)]], [[2.0**-64], [2.0**-64]]),  # cancellation below 2^-126: +0
        ([[-(2.0**-62) * 1.5], [2.0**-62]], [[2.0**-64], [2.0**-64]]),  # to -0
        ([[-0.0], [-0.0]], [[1.0], [1.0]]),  # +0 (the accumulator starts at +0.0)
        ([[math.inf], [1.0]], [[1.0], [-math.inf]]),  # Inf - Inf over two steps: NaN
    ]
    for a, b in cases:
        a, b = (quantize(torch.tensor(x, dtype=torch.float32), "bf16").tolist() for x in (a, b))
        for accumulators in (1, 2):
            assert _golden_fma(a, b, accumulators) == reference_fma_pe(a, b, accumulators), (a, b, accumulators)


def test_fma_lane_is_torch_addcmul_for_products_in_range():
    """The golden lane's multiply then add is one rounding: it equals PyTorch's fp32 ``addcmul`` (an FMA or an exact
    product then a rounded add, the same for bf16 products in fp32's range) step by step."""
    rng = np.random.default_rng(10)
    a, b = (quantize(torch.tensor(rng.standard_normal((1, 64, 8)) * 2.0 ** rng.integers(-20, 21, (1, 64, 8)),
                                  dtype=torch.float32), "bf16") for _ in range(2))
    lanes = torch.zeros(8)
    for step in range(64):
        lanes = torch.addcmul(lanes, a[0, step], b[0, step])
    assert torch.equal(fma_lanes(a, b)[0], adder_tree(lanes))


def test_fma_tile_is_the_fma_pass_of_each_pe():
    rng = np.random.default_rng(11)
    a = torch.tensor(rng.standard_normal((2, 5, 4)), dtype=torch.float32)
    b = torch.tensor(rng.standard_normal((3, 5, 4)), dtype=torch.float32)
    got = fp32_bits(dense_tile(a, b, "bf16", 1, "fma"))
    qa, qb = quantize(a, "bf16").tolist(), quantize(b, "bf16").tolist()
    assert got.tolist() == [[reference_fma_pe(qa[r], qb[c], 1) for c in range(3)] for r in range(2)]
    for fmt, accumulators in (("fp32", 1), ("bf16", 0)):
        with pytest.raises(ValueError, match="bf16 operands into at least one fp32 accumulator"):
            dense_tile(a, b, fmt, accumulators, "fma")
