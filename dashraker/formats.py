"""Floating-point operand formats shared by the generators and the golden models (SPEC section 2)."""

from dataclasses import dataclass

__all__ = ["FloatFormat", "BF16", "FP32", "FORMATS", "FIXED_POINT_FRAME", "FUSED_GUARD_BITS", "FPRAKER_MAX_TERMS",
           "FPRAKER_ACCUMULATOR_BITS", "FPRAKER_FRAME_BITS", "CANONICAL_NAN_BITS", "float_format"]


@dataclass(frozen=True)
class FloatFormat:
    """An IEEE-style binary format: sign, ``exp_bits`` biased exponent, ``frac_bits`` fraction."""

    name: str
    exp_bits: int
    frac_bits: int

    @property
    def width(self):
        return 1 + self.exp_bits + self.frac_bits

    @property
    def bias(self):
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def precision(self):
        """Significand bits including the hidden one."""
        return self.frac_bits + 1

    @property
    def exp_max(self):
        """The all-ones exponent field of Inf and NaN."""
        return (1 << self.exp_bits) - 1


BF16 = FloatFormat("bf16", 8, 7)
FP32 = FloatFormat("fp32", 8, 23)
FORMATS = {f.name: f for f in (BF16, FP32)}

# The fixed-point accumulator's frame (SPEC section 2): (bits, exponent of the least significant bit's weight).
# 384 bits from 2^-192 hold exactly every fp32 number (the least significant bit of the smallest normal weighs
# 2^-149) and every fused step sum (down to 2^-189, guard_bits <= 15), and any total below 2^191 in magnitude: a
# pass of fewer than 2^(63 - log2 N) steps of finite sums (each below N * 2^128) can never leave it.
FIXED_POINT_FRAME = (384, -192)

# The fused dot product's window (SPEC section 2, amended 2026-11-27): its places below the products' own 2p bits
# (bf16: 16 + 8 = 24 bits below the step's largest product's top place), chosen from bench/accumulation_error.py.
FUSED_GUARD_BITS = 8

# FPRaker's arithmetic (SPEC section 4, models/fpraker/golden.py): at most 5 signed terms per bf16 significand, a
# 64-bit two's complement accumulator whose frame moves in steps of 2**3 bits.
FPRAKER_MAX_TERMS = 5
FPRAKER_ACCUMULATOR_BITS = 64
FPRAKER_FRAME_BITS = 3

# The one NaN every model gives (SPEC section 2): fp32's quiet NaN, sign 0, fraction 0x400000 (bf16: its top half).
CANONICAL_NAN_BITS = 0x7FC00000


def float_format(name):
    """Look up a format by name (``"bf16"`` or ``"fp32"``), with a clear error otherwise."""
    if isinstance(name, FloatFormat):
        return name
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown operand format {name!r}; expected one of {sorted(FORMATS)}") from None
