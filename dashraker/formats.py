"""Floating-point operand formats shared by the generators and the golden models (SPEC section 2)."""

from dataclasses import dataclass

__all__ = ["FloatFormat", "BF16", "FP32", "FORMATS", "FIXED_POINT_FRAME", "FPRAKER_MAX_TERMS", "FPRAKER_ACCUMULATOR_BITS",
           "FPRAKER_FRAME_BITS", "float_format"]


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
# 128 bits from 2^-64 hold every sum below 2^63 whose parts are multiples of 2^-64.
FIXED_POINT_FRAME = (128, -64)

# FPRaker's arithmetic (SPEC section 4, models/fpraker/golden.py): at most 5 signed terms per bf16 significand, a
# 64-bit two's complement accumulator whose frame moves in steps of 2**3 bits.
FPRAKER_MAX_TERMS = 5
FPRAKER_ACCUMULATOR_BITS = 64
FPRAKER_FRAME_BITS = 3


def float_format(name):
    """Look up a format by name (``"bf16"`` or ``"fp32"``), with a clear error otherwise."""
    if isinstance(name, FloatFormat):
        return name
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown operand format {name!r}; expected one of {sorted(FORMATS)}") from None
