"""Bit layouts of the floating-point formats and the field classification every FP unit shares."""

from amaranth.hdl import Cat, Const, Mux
from amaranth.lib import data

from dashraker.formats import FP32, float_format

__all__ = ["FloatLayout", "FP32_LAYOUT", "CANONICAL_NAN", "canonical_nan", "classify", "significand"]

CANONICAL_NAN = 0x7FC00000


class FloatLayout(data.StructLayout):
    """``{frac, exp, sign}`` from LSB to MSB, the IEEE bit order of ``float_format``."""

    def __init__(self, fmt):
        self.float_format = float_format(fmt)
        super().__init__({"frac": self.float_format.frac_bits, "exp": self.float_format.exp_bits, "sign": 1})


FP32_LAYOUT = FloatLayout(FP32)


def classify(value):
    """(zero, inf, nan) flags of a float view; subnormals count as zero (DAZ)."""
    exp_max = value.exp == value.shape().float_format.exp_max
    return value.exp == 0, exp_max & (value.frac == 0), exp_max & (value.frac != 0)


def significand(value):
    """The significand with its hidden one, zero for zeros and subnormals (DAZ)."""
    return Mux(value.exp == 0, 0, Cat(value.frac, Const(1, 1)))


def canonical_nan():
    return Const(CANONICAL_NAN, 32)
