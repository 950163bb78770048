"""The FPRaker golden model: term encoder, frame window arithmetic, cycles, specials, against independent references."""

import math

import numpy as np
import pytest
import torch

from dashraker.designs import DESIGNS
from dashraker.models.fpraker import MAX_TERMS, encode_terms, pe, tile
from dashraker.models.numerics import CANONICAL_NAN_BITS, bf16_bits_to_fp32, flush_subnormals, fp32_bits, to_bf16_bits
from fpraker_reference import naf_terms, reference_round, reference_tile
from fpraker_stimulus import FIVE_TERM_SIGNIFICANDS, random_bits, real_bits


# the registry's defaults: the models have none of their own
G, Z = (DESIGNS["fpraker"].parameter(name).default for name in ("guard_bits", "zero_block_cycles"))


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


@pytest.mark.parametrize("guard_bits,zero_block_cycles", [(3, 1), (3, 0), (0, 1), (7, 0)])
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
    result = tile(a, b, G, Z)
    for p in range(2):
        outputs, costs, _, _ = reference_tile(a[p].tolist(), b[p].tolist(), G, Z)
        assert fp32_bits(result.outputs[p]).tolist() == outputs
        assert result.step_cycles[p].tolist() == costs


def _bf16(values):
    return to_bf16_bits(torch.as_tensor(values, dtype=torch.float32))


def test_small_integer_dot_products_are_exact():
    rng = np.random.default_rng(0)
    a = torch.tensor(rng.integers(-40, 40, (5, 4, 8)), dtype=torch.float32)
    b = torch.tensor(rng.integers(-40, 40, (5, 4, 8)), dtype=torch.float32)
    result = tile(to_bf16_bits(a)[:, None], to_bf16_bits(b)[:, None], G, Z)
    expected = (a.double() * b.double()).sum((1, 2)).float()
    assert torch.equal(result.outputs[:, 0, 0], expected)


def test_cycles_follow_terms_and_bounds():
    # 0b10101011 (171) has NAF 1 0 -1 0 -1 0 -1 0 -1: 5 terms; 1.0 has one term
    five, one = 171 - 128, 0
    a = [[(127 << 7) | five, (127 << 7) | one]]
    b = [[127 << 7, 127 << 7]]
    assert pe(a, b, G, Z)[1] == 5
    # the first lane is 2**-60 times smaller than the second: all its terms are out of bounds
    a = [[(67 << 7) | five, (127 << 7) | one]]
    result = tile(torch.tensor(a)[None, None], torch.tensor(b)[None, None], G, Z)
    assert int(result.cycles[0]) == 1 and int(result.terms[0]) == 1 and int(result.skipped_terms[0]) == 5
    # every lane far below an earlier, huge product (the running maximum E): costs the minimum of one cycle
    a = [[(250 << 7) | one, 0], [(10 << 7) | five, (10 << 7) | five]]
    b = [[127 << 7, 0], [127 << 7, 127 << 7]]
    result = tile(torch.tensor(a)[None, None], torch.tensor(b)[None, None], G, Z)
    assert result.step_cycles[0].tolist() == [1, 1] and int(result.skipped_terms[0]) == 10


@pytest.mark.parametrize("zero_block_cycles", [0, 1])
def test_all_zero_blocks(zero_block_cycles):
    zeros = [[0x8000, 0, 0x0001, 0]]  # signed zeros and a subnormal (a zero after DAZ)
    values = [[0x3F80, 0x4000, 0x4040, 0x4080]]
    a = torch.tensor([zeros, values])[None, None].flatten(2, 3)
    b = torch.tensor([values, zeros])[None, None].flatten(2, 3)
    result = tile(a, b, G, zero_block_cycles)
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
    result = tile(_bf16(a)[None, None, None], _bf16(b)[None, None, None], G, Z)
    expected = _ieee_dot(bf16_bits_to_fp32(_bf16(a)), bf16_bits_to_fp32(_bf16(b)))
    assert int(fp32_bits(result.outputs[0, 0, 0])) == expected


def test_rejects_bad_shapes_and_types():
    a = torch.zeros((1, 2, 3, 4), dtype=torch.int64)
    with pytest.raises(ValueError, match="disagree"):
        tile(a, torch.zeros((1, 2, 3, 5), dtype=torch.int64), G, Z)
    with pytest.raises(TypeError, match="bit patterns"):
        tile(a.float(), a, G, Z)
    with pytest.raises(ValueError, match="shape"):
        tile(a[0], a, G, Z)
    with pytest.raises(ValueError, match="0..0xFFFF"):
        tile(a + 0x10000, a, G, Z)
    with pytest.raises(ValueError, match="guard_bits"):
        tile(a, a, -1, Z)
    with pytest.raises(ValueError, match="zero_block_cycles"):
        tile(a, a, G, 2)


def test_chunked_passes_equal_one_batch(monkeypatch):
    from dashraker.models.fpraker import golden

    rng = np.random.default_rng(9)
    a, b = random_bits(rng, (7, 2, 5, 4), 8, 0.3), random_bits(rng, (7, 3, 5, 4), 8, 0.3)
    whole = tile(a, b, G, Z)
    monkeypatch.setattr(golden, "_CHUNK", 2 * 3 * 5 * 4 * 2)  # two passes per chunk
    parts = tile(a, b, G, Z)
    assert torch.equal(fp32_bits(whole.outputs), fp32_bits(parts.outputs))
    for name in ("cycles", "terms", "skipped_terms", "step_cycles"):
        assert torch.equal(getattr(whole, name), getattr(parts, name)), name


def _frame_pass(values_a, values_b, guard_bits=3, zero_block_cycles=1):
    """One PE's pass of fp32 values [steps][lanes] through the golden model, checked against the scalar reference;
    returns (the output, the TileResult)."""
    a = _bf16(torch.tensor(values_a, dtype=torch.float32))[None, None]
    b = _bf16(torch.tensor(values_b, dtype=torch.float32))[None, None]
    result = tile(a, b, guard_bits, zero_block_cycles)
    outputs, costs, terms, skipped = reference_tile(a[0].tolist(), b[0].tolist(), guard_bits, zero_block_cycles)
    assert fp32_bits(result.outputs[0]).tolist() == outputs
    assert result.step_cycles[0].tolist() == costs
    assert (int(result.terms[0]), int(result.skipped_terms[0])) == (terms, skipped)
    return float(result.outputs[0, 0, 0]), result


@pytest.mark.parametrize("guard_bits", [0, 3, 7])
@pytest.mark.parametrize("first,moved", [(1.0, 0.0), (-1.0, -1.0)])
@pytest.mark.parametrize("huge", [40, 100])
def test_frame_move_floors_the_accumulator(guard_bits, first, moved, huge):
    # E = 127 (F = 120), then 127 + huge: the frame moves by 40 (five frames) or 104 (clamped to 63), so U
    # (+-2**(16 + G) at offset 7) is floored to 0 or -1 units of the new frame; +-2**huge then cancel exactly and
    # the pass goes on from U = 0 or -1: the result is that floor, worth 2**(F - 150 - G)
    _, result = _frame_pass([[first], [2.0**huge], [-(2.0**huge)]], [[1.0], [1.0], [1.0]], guard_bits)
    frame = (127 + huge) // 8 * 8
    assert float(result.outputs[0, 0, 0]) == moved * 2.0 ** (frame - 150 - guard_bits)


def test_frame_move_keeps_bits_above_the_new_unit():
    # E = 127 (F = 120, D = 7), then E = 151 (F = 144): U moves by 24 and keeps the small product's bits down
    # to 2**(144 - 153): (1 + 2**-7)**2 = 1 + 2**-6 + 2**-14 floors to 1 + 2**-6, which the final rounding shows
    # once the large product cancels
    small = 1.0 + 2.0**-7
    value, _ = _frame_pass([[small, 0.0], [2.0**24, -(2.0**24)], [-(2.0**24), 2.0**24]],
                           [[small, 1.0], [1.0, 1.0], [1.0, 1.0]])
    assert value == 1.0 + 2.0**-6


@pytest.mark.parametrize("zero_block_cycles", [0, 1])
def test_first_live_step_after_steps_without_live_lanes(zero_block_cycles):
    # two steps of zeros, subnormals and zero products (x * 0), then live lanes; a dead step mid-pass changes nothing
    dead = [[0.0, -0.0, 1e-40, 5.0], [0.0, 3.0, -0.0, -1e-39]]
    dead_b = [[7.0, 0.0, 2.0, 0.0], [1e-40, 0.0, 4.0, 0.0]]
    live_a, live_b = [[1.5, -2.25, 3.0, 0.125]], [[-4.0, 0.5, 1.0, 8.0]]
    value, result = _frame_pass(dead + live_a + dead[:1] + live_a, dead_b + live_b + dead_b[:1] + live_b,
                                zero_block_cycles=zero_block_cycles)
    assert value == 2 * (1.5 * -4.0 - 2.25 * 0.5 + 3.0 + 0.125 * 8.0)
    assert result.step_cycles[0].tolist() == [zero_block_cycles] * 2 + [2] + [zero_block_cycles] + [2]


@pytest.mark.parametrize("later,expected", [(2.0**-10, 2.0**-10), (2.0**-30, 0.0)])
def test_cancellation_to_zero_keeps_the_frame(later, expected):
    # 3 - 3 leaves U = 0 at E = 128; a later small product is still aligned to E (no empty-window rule): 2**-10 is
    # in bounds and exact, 2**-30 lies below the bound (d = 30 > 7 + 16 + 3) and is skipped
    value, result = _frame_pass([[3.0], [-3.0], [later]], [[1.0], [1.0], [1.0]])
    assert value == expected
    assert int(result.skipped_terms[0]) == (1 if expected == 0 else 0)


def test_negative_alignment_exponents():
    # Pe = -5 (E = -5: F = -8, D = 3), then Pe = 2 (F = 0): the frame of a negative E lies below it, and the
    # move by 8 keeps the first product exactly: 2**-132 + 2**-125
    value, _ = _frame_pass([[2.0**-66], [2.0**-62]], [[2.0**-66], [2.0**-63]])
    assert value == 2.0**-125 + 2.0**-132
    rng = np.random.default_rng(4)
    shape = (2, 2, 8, 4)  # exponents 1..70 (Pe from -125 to 13), a tenth of zeros
    a, b = ((rng.integers(0, 2, shape) << 15) | (rng.integers(1, 71, shape) << 7) | rng.integers(0, 128, shape)
            for _ in range(2))
    a, b = np.where(rng.random(shape) < 0.1, 0, a), np.where(rng.random(shape) < 0.1, 0, b)
    result = tile(a, b, 3, Z)
    for p in range(2):
        outputs, costs, terms, skipped = reference_tile(a[p].tolist(), b[p].tolist(), 3)
        assert fp32_bits(result.outputs[p]).tolist() == outputs
        assert result.step_cycles[p].tolist() == costs


def test_accumulator_beyond_float64_precision():
    # G = 7: step 0 sets E = 120 (F = 120, D = 0) and leaves U odd (a lane at d = 16 adds 129 * 2**0); then E = 127
    # in the same frame, 128 lanes of 255/128 squared at offset 7 and a small lane: |U| > 2**54 with 55 significant
    # bits, beyond float64's integers, so the final rounding needs U's exact MSB and sticky bits
    steps, lanes = 300, 128
    big = 0x3F80 | 0x7F  # 1.9921875
    a = np.full((1, 1, steps, lanes), big)
    b = np.full((1, 1, steps, lanes), big)
    a[..., 0], b[..., 0] = (107 << 7) | 1, (127 << 7) | 1  # Pe = 107: d = 20
    b[..., 0, :] = 0
    a[..., 0, :2], b[..., 0, :2] = [120 << 7, (104 << 7) | 1], [127 << 7, (127 << 7) | 1]
    for sign in (0, 1):
        a[..., 1:, 1:] = big | (sign << 15)
        result = tile(a, b, 7, Z)
        outputs, costs, _, _ = reference_tile(a[0].tolist(), b[0].tolist(), 7)
        assert fp32_bits(result.outputs[0]).tolist() == outputs
        assert abs(float(result.outputs[0, 0, 0])) > 2.0**54 * 2.0 ** (120 - 157)


@pytest.mark.parametrize(
    "accumulator",
    [1, -1, 3, (1 << 24) + 1, (1 << 25) + 3, (1 << 53) + 1, -((1 << 53) + 1), (1 << 54) - 1, -((1 << 54) - 1),
     (1 << 60) + (1 << 36) + 1, (1 << 60) + (1 << 36), (1 << 60) + (3 << 36), (1 << 63) - 1, -(1 << 63)],
)
@pytest.mark.parametrize("frame", [-8, 120, 272, -120])
def test_rounding_of_the_accumulator(accumulator, frame):
    # exact MSB above 2**53 (float64 rounds 2**54 - 1 up), ties to even, -2**63, overflow to Inf, FTZ
    from dashraker.models.fpraker.golden import _round_accumulator

    bits = _round_accumulator(torch.tensor([accumulator]), torch.tensor([frame]), 3)
    assert int(bits[0]) == reference_round(accumulator, frame, 3)
