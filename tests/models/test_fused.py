"""The fixed-point accumulator and the fused dot product's golden models against an independent reference in exact
rationals (``fractions.Fraction``): the pass's exact sum rounded once, products truncated to the window's unit."""

import math
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch

from dashraker.formats import FUSED_GUARD_BITS, float_format
from dashraker.models.baseline import accumulate_addends, dense_tile, fixed_point_accumulate, fused_steps
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
