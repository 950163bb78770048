"""bf16/fp32 helpers in PyTorch: bit views, conversions, FTZ/DAZ and the IEEE fp32 operations of SPEC section 2.

Every golden model builds on ``fp32_add`` and ``fp32_mul``: PyTorch float32 arithmetic
(round to nearest even) with subnormals flushed on input and output and every NaN
made the canonical quiet NaN 0x7FC00000.
"""

import contextlib

import torch

from dashraker.formats import BF16, CANONICAL_NAN_BITS, float_format

__all__ = [
    "CANONICAL_NAN_BITS",
    "flush_denormal",
    "fp32_from_bits",
    "fp32_bits",
    "flush_subnormals",
    "canonicalize_nan",
    "to_bf16_bits",
    "operand_values",
    "bf16_bits_to_fp32",
    "quantize",
    "split",
    "fp32_add",
    "fp32_mul",
]


@contextlib.contextmanager
def flush_denormal():
    """Run PyTorch CPU arithmetic with FTZ/DAZ, on one thread so that every op sees the mode."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(threads)


def fp32_bits(x):
    """The IEEE binary32 bit patterns of a float32 tensor, as int64 in [0, 2**32)."""
    return x.to(torch.float32).contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def fp32_from_bits(bits):
    """Float32 tensor from binary32 bit patterns (any integer tensor or sequence)."""
    bits = torch.as_tensor(bits, dtype=torch.int64) & 0xFFFFFFFF
    return torch.where(bits >= 2**31, bits - 2**32, bits).to(torch.int32).view(torch.float32)


def flush_subnormals(x):
    """FTZ/DAZ: subnormal values become zero of the same sign."""
    bits = fp32_bits(x)
    subnormal = (bits & 0x7F800000) == 0
    return fp32_from_bits(torch.where(subnormal, bits & 0x80000000, bits))


def canonicalize_nan(x):
    """Every NaN becomes the canonical quiet NaN 0x7FC00000."""
    return torch.where(torch.isnan(x), fp32_from_bits(torch.tensor(CANONICAL_NAN_BITS)), x)


def to_bf16_bits(x, rounding="nearest"):
    """Convert fp32 values to bf16 bit patterns (int64 in [0, 2**16)), flushing subnormals.

    ``rounding="nearest"`` is round-to-nearest-even, as ``x.to(torch.bfloat16)``;
    ``"truncate"`` zeroes the low 16 bits, as some other tools do.
    """
    x = torch.as_tensor(x, dtype=torch.float32)
    if rounding == "nearest":
        bits = x.to(torch.bfloat16).view(torch.int16).to(torch.int64) & 0xFFFF
    elif rounding == "truncate":
        bits = fp32_bits(x) >> 16
    else:
        raise ValueError(f"rounding must be 'nearest' or 'truncate', not {rounding!r}")
    nan = ((bits & 0x7F80) == 0x7F80) & ((bits & 0x7F) != 0)
    bits = torch.where(nan, torch.full_like(bits, CANONICAL_NAN_BITS >> 16), bits)
    return torch.where((bits & 0x7F80) == 0, bits & 0x8000, bits)


def bf16_bits_to_fp32(bits):
    """The fp32 value (exact) of bf16 bit patterns."""
    return fp32_from_bits(torch.as_tensor(bits, dtype=torch.int64) << 16)


def operand_values(bits, fmt):
    """The fp32 values (exact) of operand bit patterns of ``fmt``."""
    if float_format(fmt) == BF16:
        return bf16_bits_to_fp32(bits)
    return fp32_from_bits(torch.as_tensor(bits, dtype=torch.int64))


def quantize(x, fmt, rounding="nearest"):
    """fp32 tensor holding ``x`` as the operand format represents it (FTZ, canonical NaN)."""
    fmt = float_format(fmt)
    if fmt == BF16:
        return bf16_bits_to_fp32(to_bf16_bits(x, rounding))
    return canonicalize_nan(flush_subnormals(torch.as_tensor(x, dtype=torch.float32)))


def split(bits, fmt):
    """Split bit patterns of ``fmt`` into (sign, biased exponent, significand with hidden one).

    Zeros and subnormals (exponent field 0) get significand 0, as the hardware sees them (DAZ).
    """
    fmt = float_format(fmt)
    bits = torch.as_tensor(bits, dtype=torch.int64)
    sign = (bits >> (fmt.width - 1)) & 1
    exponent = (bits >> fmt.frac_bits) & fmt.exp_max
    fraction = bits & ((1 << fmt.frac_bits) - 1)
    significand = torch.where(exponent == 0, 0, fraction | (1 << fmt.frac_bits))
    return sign, exponent, significand


def _ieee(op, a, b):
    a = flush_subnormals(torch.as_tensor(a, dtype=torch.float32))
    b = flush_subnormals(torch.as_tensor(b, dtype=torch.float32))
    with flush_denormal():
        result = op(a, b)
    return canonicalize_nan(flush_subnormals(result))


def fp32_add(a, b):
    """IEEE binary32 a + b, round to nearest even, FTZ/DAZ, canonical NaN."""
    return _ieee(torch.add, a, b)


def fp32_mul(a, b):
    """IEEE binary32 a * b, round to nearest even, FTZ/DAZ (tininess after rounding), canonical NaN."""
    return _ieee(torch.mul, a, b)
