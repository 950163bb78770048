"""bf16/fp32 helpers and the dense golden model, against bit arithmetic written out independently."""

import math

import numpy as np
import pytest
import torch

from dashraker.models import tensordash
from dashraker.models.interconnect import T25_PATTERN
from dashraker.models.baseline import accumulate, adder_tree, dense_tile, fixed_point_accumulate
from dashraker.models.numerics import (
    CANONICAL_NAN_BITS, bf16_bits_to_fp32, fp32_add, fp32_bits, fp32_from_bits, fp32_mul, split, to_bf16_bits,
)


def _random_bits(count, seed=0):
    return np.random.default_rng(seed).integers(0, 2**32, count, dtype=np.int64)


def test_bf16_round_to_nearest_even_matches_bit_formula():
    bits = _random_bits(200_000)
    got = to_bf16_bits(fp32_from_bits(bits)).numpy()
    want = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    exponent = (bits >> 23) & 0xFF
    nan = (exponent == 0xFF) & ((bits & 0x7FFFFF) != 0)
    want = np.where(nan, CANONICAL_NAN_BITS >> 16, want)
    want = np.where((want & 0x7F80) == 0, want & 0x8000, want)  # FTZ after rounding
    assert np.array_equal(got, want)


def test_bf16_truncation_keeps_high_half():
    bits = _random_bits(10_000, seed=1)
    bits = bits[((bits >> 23) & 0xFF) != 0xFF]
    got = to_bf16_bits(fp32_from_bits(bits), rounding="truncate").numpy()
    want = np.where(((bits >> 23) & 0xFF) == 0, (bits >> 16) & 0x8000, bits >> 16)
    assert np.array_equal(got, want)


def test_bad_rounding_is_refused():
    with pytest.raises(ValueError, match="rounding must be"):
        to_bf16_bits(torch.ones(1), rounding="up")


@pytest.mark.parametrize("fmt,width", [("bf16", 16), ("fp32", 32)])
def test_split_rebuilds_normal_values(fmt, width):
    bits = _random_bits(10_000, seed=2) >> (32 - width)
    sign, exponent, significand = (t.numpy() for t in split(torch.from_numpy(bits), fmt))
    frac_bits = 7 if fmt == "bf16" else 23
    normal = (exponent != 0) & (exponent != 255)
    value = (-1.0) ** sign * significand * 2.0 ** (exponent.astype(np.float64) - 127 - frac_bits)
    as_float = (bf16_bits_to_fp32(bits) if fmt == "bf16" else fp32_from_bits(bits)).double().numpy()
    assert np.array_equal(value[normal], as_float[normal])
    assert np.all(significand[exponent == 0] == 0)


def test_ieee_specials_flush_and_canonical_nan():
    inf, tiny = float("inf"), 2.0**-126
    a = torch.tensor([inf, inf, tiny, 1e-40, -1.5 * tiny, 1.0, -0.0, -0.0], dtype=torch.float32)
    b = torch.tensor([-inf, 0.0, 0.5, 1.0, tiny, -1.0, -0.0, 0.0], dtype=torch.float32)
    added = fp32_bits(fp32_add(a, b)).tolist()
    assert added[0] == CANONICAL_NAN_BITS  # Inf - Inf
    assert added[3] == 0x3F800000  # subnormal input read as zero
    assert added[4] == 0x80000000  # tiny result flushed to a zero of its sign
    assert added[5] == 0x00000000  # x + (-x) = +0
    assert added[6] == 0x80000000 and added[7] == 0x00000000
    multiplied = fp32_bits(fp32_mul(a, b)).tolist()
    assert multiplied[1] == CANONICAL_NAN_BITS  # Inf * 0
    assert multiplied[2] == 0x00000000  # product below the normal range flushed


def test_adder_tree_pairs_neighbours_level_by_level():
    # (1e8 + 1) + (-1e8 + 1) rounds both inner sums away from the ones: the tree gives 0,
    # a sequential sum would give 1.
    assert adder_tree(torch.tensor([1e8, 1.0, -1e8, 1.0])).item() == 0.0
    # An odd operand passes up a level unchanged: ((a + b) + c).
    assert adder_tree(torch.tensor([1e8, -1e8, 1.0])).item() == 1.0


def test_dense_tile_matches_float64_dot_products_within_rounding():
    rng = np.random.default_rng(3)
    a = torch.from_numpy(rng.standard_normal((3, 7, 16)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((2, 7, 16)).astype(np.float32))
    got = dense_tile(a, b, "bf16", 1, "tree").double()
    exact = torch.einsum("rsn,csn->rc", a.bfloat16().double(), b.bfloat16().double())
    assert torch.allclose(got, exact, rtol=1e-5, atol=1e-5)
    assert not torch.equal(dense_tile(a, b, "fp32", 1, "tree"), got)  # fp32 operands are not rounded to bf16


def _interleaved_reference(sums, accumulators):
    """L partials summed in order from +0.0 in NumPy float32 scalars, then neighbours pairwise level by level."""
    partials = [np.float32(0.0)] * accumulators
    for step, value in enumerate(sums):
        partials[step % accumulators] = np.float32(partials[step % accumulators] + value)
    while len(partials) > 1:
        partials = [np.float32(partials[i] + partials[i + 1]) if i + 1 < len(partials) else partials[i]
                    for i in range(0, len(partials), 2)]
    return partials[0]


@pytest.mark.parametrize("accumulators", [1, 2, 3, 5, 8])
def test_accumulate_interleaves_partials_as_float32_reference(accumulators):
    rng = np.random.default_rng(accumulators)
    rows = []
    for steps in [0, 1, accumulators - 1, accumulators, accumulators + 1, 3 * accumulators + 2, 40]:
        for _ in range(20):
            sums = (rng.standard_normal(steps) * 10.0 ** rng.integers(-6, 7, steps)).astype(np.float32)
            sums[rng.random(steps) < 0.2] = -0.0  # signed zeros: a partial starts at +0.0
            cancel = rng.random(steps) < 0.2
            sums[cancel] = -np.roll(sums, 1)[cancel]  # exact cancellations
            rows.append(sums)
    rows.append(np.full(7, -0.0, np.float32))
    for sums in rows:
        got = fp32_bits(accumulate(torch.from_numpy(sums)[None], accumulators)).item()
        want = int(np.array(_interleaved_reference(sums, accumulators)).view(np.uint32))
        assert got == want, (accumulators, sums.tolist())


def test_one_accumulator_is_the_in_order_sum_and_more_reorder():
    sums = torch.tensor([[1.0, 2.0**-24, 2.0**-24, 2.0**-24, 2.0**-24]])
    assert accumulate(sums, 1).item() == 1.0  # each tiny step rounds away in order
    assert accumulate(sums, 2).item() == 1.0 + 2.0**-23  # (1 + e + e) + (e + e): the second partial keeps its two


def test_fixed_point_accumulation_rounds_the_exact_sum_once():
    # Sums whose exact total float64 holds: the one rounding to fp32 is NumPy's (tests/models/test_fused.py checks
    # the whole range against exact rationals).
    rng = np.random.default_rng(0)
    for _ in range(300):
        sums = [np.float32(rng.choice([1, -1]) * rng.integers(1, 2**24) * 2.0 ** rng.integers(-64, 7))
                for _ in range(rng.integers(1, 9))]
        exact = math.fsum(float(value) for value in sums)
        if abs(math.ldexp(exact, 64)) >= 2**53:
            continue
        got = fp32_bits(fixed_point_accumulate(torch.tensor([sums]))).item()
        assert got == int(np.array(np.float32(exact)).view(np.uint32))
    # nothing is lost at the bottom of fp32's range, one rounding at the end, +0.0 for a zero total
    assert fixed_point_accumulate(torch.tensor([[2.0**-126, 2.0**-126]])).item() == 2.0**-125
    assert fixed_point_accumulate(torch.tensor([[1.0, 2.0**-24, 2.0**-24]])).item() == 1.0 + 2.0**-23
    assert fp32_bits(fixed_point_accumulate(torch.tensor([[-0.0, -0.0], [3.0, -3.0]]))).tolist() == [0, 0]
    # specials stay sticky, as IEEE's sums of them; a total past fp32's largest number is an Inf of its sign
    got = fixed_point_accumulate(torch.tensor([[1.0, math.inf, 0.0], [-math.inf, 2.0**70, 0.0],
                                               [math.inf, -math.inf, 0.0], [math.nan, 1.0, 0.0], [2.0**127, 2.0**127, 0.0],
                                               [-(2.0**127), -(2.0**127), 0.0], [2.0**127, 2.0**127, -(2.0**127)]]))
    assert got[:2].tolist() == [math.inf, -math.inf] and got[2:4].isnan().all()
    assert got[4:].tolist() == [math.inf, -math.inf, 2.0**127]
    assert accumulate(torch.tensor([[1.0, 2.0**-24, 2.0**-24]]), 0).item() == 1.0 + 2.0**-23  # L = 0 is this order


@pytest.mark.parametrize("accumulators, dot", [(0, "tree"), (1, "tree"), (3, "tree"), (0, "fused")])
def test_dense_tensordash_schedule_accumulates_as_the_baseline(accumulators, dot):
    # Without zeros each scheduled cycle is a step, so the t-th cycle goes to the t-th step's partial.
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 3, 7, 8)).astype(np.float32) + 4.0
    b = rng.standard_normal((2, 2, 7, 8)).astype(np.float32)
    sched = tensordash.schedule(a, T25_PATTERN, 2, "greedy")
    assert sched.cycles.tolist() == [7, 7]
    got = tensordash.tile_outputs(sched, torch.from_numpy(a), torch.from_numpy(b), "bf16", accumulators, dot)
    want = torch.stack([dense_tile(torch.from_numpy(a[p]), torch.from_numpy(b[p]), "bf16", accumulators, dot)
                        for p in range(2)])
    assert torch.equal(fp32_bits(got), fp32_bits(want))
