"""The FPRaker golden model: term encoder, step arithmetic, cycles, specials, against independent references."""

import math

import numpy as np
import pytest
import torch

from dashraker.models.fpraker import MAX_TERMS, encode_terms, pe, tile
from dashraker.models.numerics import CANONICAL_NAN_BITS, bf16_bits_to_fp32, flush_subnormals, fp32_bits, to_bf16_bits
from fpraker_reference import naf_terms, reference_tile
from fpraker_stimulus import FIVE_TERM_SIGNIFICANDS, random_bits, real_bits


def test_encoder_all_significands():
    positions, signs, count = encode_terms(torch.arange(256))
    for x in range(256):
        terms = [(int(t), int(s)) for t, s in zip(positions[x], signs[x]) if s != 0]
        assert len(terms) == count[x] <= MAX_TERMS
        assert sum(s * 2**t for t, s in terms) == x, x
        ts = [t for t, _ in terms]
        assert ts == sorted(ts, reverse=True), f"{x}: terms not MSB first"
        assert all(hi - lo >= 2 for hi, lo in zip(ts, ts[1:])), f"{x}: adjacent terms {ts}"
        assert all(0 <= t <= 8 for t in ts)
        assert terms == naf_terms(x), x
        assert all(s == 0 and t == -1 for t, s in zip(positions[x, len(terms):], signs[x, len(terms):]))
    assert int(count.max()) == 5 and sorted(np.nonzero(count.numpy() == 5)[0].tolist())[-8:] == FIVE_TERM_SIGNIFICANDS


def test_encoder_rejects_wide_values():
    with pytest.raises(ValueError, match="256"):
        encode_terms(torch.tensor([3, 256]))


@pytest.mark.parametrize("guard_bits,zero_block_cycles", [(3, 1), (3, 0), (0, 1), (6, 0)])
@pytest.mark.parametrize("spread,corner", [(2, 0.0), (8, 0.3), (40, 0.6)])
def test_tile_matches_scalar_reference(guard_bits, zero_block_cycles, spread, corner):
    rng = np.random.default_rng(hash((guard_bits, zero_block_cycles, spread)) % 2**32)
    rows, cols, steps, lanes = 2, 3, 6, 4
    a = random_bits(rng, (3, rows, steps, lanes), spread, corner)
    b = random_bits(rng, (3, cols, steps, lanes), spread, corner)
    result = tile(a, b, guard_bits, zero_block_cycles)
    for p in range(3):
        outputs, costs, terms, skipped = reference_tile(a[p].tolist(), b[p].tolist(), guard_bits, zero_block_cycles)
        assert fp32_bits(result.outputs[p]).tolist() == outputs
        assert result.step_cycles[p].tolist() == costs
        assert int(result.cycles[p]) == sum(costs)
        assert (int(result.terms[p]), int(result.skipped_terms[p])) == (terms, skipped)


def test_real_tensors_match_scalar_reference():
    rng = np.random.default_rng(5)
    a, b = real_bits(rng, (2, 2, 8, 8)), real_bits(rng, (2, 2, 8, 8))
    result = tile(a, b)
    for p in range(2):
        outputs, costs, _, _ = reference_tile(a[p].tolist(), b[p].tolist())
        assert fp32_bits(result.outputs[p]).tolist() == outputs
        assert result.step_cycles[p].tolist() == costs


def _bf16(values):
    return to_bf16_bits(torch.as_tensor(values, dtype=torch.float32))


def test_small_integer_dot_products_are_exact():
    rng = np.random.default_rng(0)
    a = torch.tensor(rng.integers(-40, 40, (5, 4, 8)), dtype=torch.float32)
    b = torch.tensor(rng.integers(-40, 40, (5, 4, 8)), dtype=torch.float32)
    result = tile(to_bf16_bits(a)[:, None], to_bf16_bits(b)[:, None])
    expected = (a.double() * b.double()).sum((1, 2)).float()
    assert torch.equal(result.outputs[:, 0, 0], expected)


def test_cycles_follow_terms_and_bounds():
    # 0b10101011 (171) has NAF 1 0 -1 0 -1 0 -1 0 -1: 5 terms; 1.0 has one term
    five, one = 171 - 128, 0
    a = [[(127 << 7) | five, (127 << 7) | one]]
    b = [[127 << 7, 127 << 7]]
    assert pe(a, b)[1] == 5
    # the first lane is 2**-60 times smaller than the second: all its terms are out of bounds
    a = [[(67 << 7) | five, (127 << 7) | one]]
    result = tile(torch.tensor(a)[None, None], torch.tensor(b)[None, None])
    assert int(result.cycles[0]) == 1 and int(result.terms[0]) == 1 and int(result.skipped_terms[0]) == 5
    # every lane far below an earlier, huge accumulator: costs the minimum of one cycle
    a = [[(250 << 7) | one, 0], [(10 << 7) | five, (10 << 7) | five]]
    b = [[127 << 7, 0], [127 << 7, 127 << 7]]
    result = tile(torch.tensor(a)[None, None], torch.tensor(b)[None, None])
    assert result.step_cycles[0].tolist() == [1, 1] and int(result.skipped_terms[0]) == 10


@pytest.mark.parametrize("zero_block_cycles", [0, 1])
def test_all_zero_blocks(zero_block_cycles):
    zeros = [[0x8000, 0, 0x0001, 0]]  # signed zeros and a subnormal (a zero after DAZ)
    values = [[0x3F80, 0x4000, 0x4040, 0x4080]]
    a = torch.tensor([zeros, values])[None, None].flatten(2, 3)
    b = torch.tensor([values, zeros])[None, None].flatten(2, 3)
    result = tile(a, b, zero_block_cycles=zero_block_cycles)
    assert result.step_cycles[0].tolist() == [zero_block_cycles] * 2
    assert fp32_bits(result.outputs[0, 0, 0]) == 0  # +0: the accumulator starts at +0


def _ieee_dot(a, b):
    """IEEE sum of products in fp64 (exact enough here), FTZ, NaN made canonical."""
    value = flush_subnormals((a.double() * b.double()).sum().float())
    return CANONICAL_NAN_BITS if math.isnan(value) else int(fp32_bits(value))


@pytest.mark.parametrize(
    "a,b",
    [
        ([float("inf"), 1.0], [0.0, 1.0]),  # Inf * 0
        ([float("inf"), float("inf")], [1.0, -1.0]),  # Inf - Inf
        ([float("inf"), 3.0], [2.0, 1.0]),
        ([-float("inf"), 3.0], [2.0, -1e30]),
        ([float("nan"), 3.0], [2.0, 1.0]),
        ([3.0e38, 3.0e38], [3.0e38, 1.0]),  # overflow at the final rounding
        ([-1e-30, 1.0], [1e-15, 0.0]),  # underflow: flushed, sign kept
    ],
)
def test_specials_are_ieee_consistent(a, b):
    a, b = torch.tensor(a), torch.tensor(b)
    result = tile(_bf16(a)[None, None, None], _bf16(b)[None, None, None])
    expected = _ieee_dot(bf16_bits_to_fp32(_bf16(a)), bf16_bits_to_fp32(_bf16(b)))
    assert int(fp32_bits(result.outputs[0, 0, 0])) == expected


def test_rejects_bad_shapes_and_types():
    a = torch.zeros((1, 2, 3, 4), dtype=torch.int64)
    with pytest.raises(ValueError, match="disagree"):
        tile(a, torch.zeros((1, 2, 3, 5), dtype=torch.int64))
    with pytest.raises(TypeError, match="bit patterns"):
        tile(a.float(), a)
    with pytest.raises(ValueError, match="shape"):
        tile(a[0], a)
    with pytest.raises(ValueError, match="0..0xFFFF"):
        tile(a + 0x10000, a)
    with pytest.raises(ValueError, match="guard_bits"):
        tile(a, a, guard_bits=-1)
    with pytest.raises(ValueError, match="zero_block_cycles"):
        tile(a, a, zero_block_cycles=2)


def test_chunked_passes_equal_one_batch(monkeypatch):
    from dashraker.models.fpraker import golden

    rng = np.random.default_rng(9)
    a, b = random_bits(rng, (7, 2, 5, 4), 8, 0.3), random_bits(rng, (7, 3, 5, 4), 8, 0.3)
    whole = tile(a, b)
    monkeypatch.setattr(golden, "_CHUNK", 2 * 3 * 5 * 4 * 2)  # two passes per chunk
    parts = tile(a, b)
    assert torch.equal(fp32_bits(whole.outputs), fp32_bits(parts.outputs))
    for name in ("cycles", "terms", "skipped_terms", "step_cycles"):
        assert torch.equal(getattr(whole, name), getattr(parts, name)), name
