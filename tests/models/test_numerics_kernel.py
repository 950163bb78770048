"""The fused quantization kernel against ``models.numerics.quantize``, bit for bit."""

import numpy as np
import pytest
import torch

from dashraker.models import numerics
from dashraker.models.kernels.numerics import quantize

MODES = [("bf16", "nearest"), ("bf16", "truncate"), ("fp32", "nearest"), ("fp32", "truncate")]

SPECIALS = [
    0x00000000, 0x80000000,  # signed zeros
    0x00000001, 0x80000001, 0x007F7FFF, 0x807F7FFF,  # subnormals that stay subnormal in bf16
    0x007F8000, 0x007FFFFF, 0x807FFFFF,  # subnormals that round up to the smallest normal
    0x00800000, 0x80800000, 0x00808000, 0x00818000,  # smallest normals, ties above them
    0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0xBF808000,  # ties to even, near ties
    0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0xFF7FFFFF,  # largest finite: rounds to Inf or stays
    0x7F800000, 0xFF800000,  # infinities
    0x7F800001, 0x7F80FFFF, 0xFF800001, 0x7F810000, 0x7FC00000, 0xFFC00000, 0x7FFFFFFF, 0xFFFFFFFF,  # NaNs
]


def bits_as_fp32(bits):
    return np.asarray(bits, np.uint64).astype(np.uint32).view(np.float32)


def assert_matches_reference(x, fmt, rounding):
    got = quantize(x, fmt, rounding)
    want = numerics.quantize(torch.as_tensor(x, dtype=torch.float32), fmt, rounding).numpy()
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("fmt, rounding", MODES)
def test_random_bit_patterns(fmt, rounding):
    bits = np.random.default_rng(MODES.index((fmt, rounding))).integers(0, 2**32, 300_000)
    ties = (bits & 0xFFFF0000) | 0x8000  # exactly halfway between two bf16 values
    assert_matches_reference(bits_as_fp32(np.concatenate([bits, ties])), fmt, rounding)


@pytest.mark.parametrize("fmt, rounding", MODES)
def test_special_values(fmt, rounding):
    assert_matches_reference(bits_as_fp32(SPECIALS), fmt, rounding)


def test_specials_by_hand():
    got = quantize(bits_as_fp32([0x007FFFFF, 0x007F7FFF, 0x3F808000, 0x3F818000, 0x7F7F8000, 0x7F800001]), "bf16")
    assert got.view(np.uint32).tolist() == [0x00800000, 0, 0x3F800000, 0x3F820000, 0x7F800000, 0x7FC00000]
    truncated = quantize(bits_as_fp32([0x7F800001, 0x7F810000, 0x807FFFFF]), "bf16", "truncate")
    assert truncated.view(np.uint32).tolist() == [0x7F800000, 0x7FC00000, 0x80000000]


def test_shapes_dtypes_and_layouts():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5, 7)) * np.exp2(rng.integers(-140, 130, (3, 5, 7)))  # float64: rounded to fp32
    for fmt, rounding in MODES:
        assert_matches_reference(x, fmt, rounding)
        assert_matches_reference(x.astype(np.float32).transpose(2, 0, 1), fmt, rounding)


def test_input_left_unchanged():
    x = bits_as_fp32(SPECIALS)
    before = x.copy()
    quantize(x, "bf16")
    np.testing.assert_array_equal(x.view(np.uint32), before.view(np.uint32))


def test_bad_arguments_as_the_reference():
    with pytest.raises(ValueError, match="rounding must be"):
        quantize(np.ones(2, np.float32), "bf16", "up")
    with pytest.raises(ValueError, match="unknown operand format"):
        quantize(np.ones(2, np.float32), "fp16")
