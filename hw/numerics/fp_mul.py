"""Floating-point multiplier with an fp32 product: exact for bf16 operands, RNE for fp32 (SPEC section 2)."""

from amaranth.hdl import C, Cat, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import FP32, float_format
from dashraker.hw.numerics.float import FP32_LAYOUT, FloatLayout, canonical_nan, classify, significand
from dashraker.hw.numerics.rounding import round_nearest_even

__all__ = ["FPMultiplier"]


class FPMultiplier(wiring.Component):
    """``product = a * b`` with operands in ``fmt`` and the product in IEEE binary32.

    bf16 x bf16 fits the fp32 significand, so the product is exact; fp32 x fp32 is
    rounded to nearest even. Tininess is detected after rounding (as x86 does, so the
    PyTorch golden model agrees) and tiny products flush to a signed zero; subnormal
    inputs are zeros (DAZ); any NaN and Inf x 0 give 0x7FC00000.

    Combinational, or with ``registered`` a register between the significand product
    (the DSP blocks) and its normalisation and rounding: the fp32 multiplier is the
    slowest unit between two registers otherwise.

    Parameters
    ----------
    fmt : "bf16" | "fp32"
        Operand format.
    registered : bool
        Split into two stages (adds the ``en`` port).

    Attributes
    ----------
    latency : int
        0, or 1 when ``registered``.

    Ports
    -----
    a, b : In(FloatLayout(fmt))
        Factors.
    product : Out(FP32_LAYOUT)
        The product.
    en : In(1)
        Only when ``registered``: the register advances.
    """

    def __init__(self, fmt="bf16", registered=False):
        self.format = float_format(fmt)
        self.latency = int(bool(registered))
        layout = FloatLayout(self.format)
        ports = {"a": In(layout), "b": In(layout), "product": Out(FP32_LAYOUT)}
        if registered:
            ports["en"] = In(1)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        a_zero, a_inf, a_nan = classify(a)
        b_zero, b_inf, b_nan = classify(b)
        width = 2 * self.format.precision

        # Stage 1: the significand product, the exponent sum and the special cases.
        nan, inf, zero, sign = Signal(), Signal(), Signal(), Signal()
        product = Signal(width)
        exponent_sum = Signal(9)
        stage = [
            nan.eq(a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)),
            inf.eq(a_inf | b_inf),
            zero.eq(a_zero | b_zero),
            sign.eq(a.sign ^ b.sign),
            product.eq(significand(a) * significand(b)),
            exponent_sum.eq(a.exp + b.exp),
        ]
        if self.latency:
            with m.If(self.en):
                m.d.sync += stage
        else:
            m.d.comb += stage

        # Stage 2: the product lies in [1, 4): normalise its leading one to the MSB, round.
        normalized = Signal(width)
        exponent = Signal(signed(11))
        top = product[width - 1]
        m.d.comb += [
            normalized.eq(product << ~top),
            exponent.eq(exponent_sum - self.format.bias + top - self.format.bias + FP32.bias),
        ]
        if width > FP32.precision:
            cut = width - FP32.precision
            mantissa, exponent = round_nearest_even(
                m, normalized[cut:], exponent, guard=normalized[cut - 1], sticky=normalized[: cut - 1].any()
            )
        else:
            mantissa = Cat(C(0, FP32.precision - width), normalized)

        with m.If(nan):
            m.d.comb += self.product.eq(canonical_nan())
        with m.Elif(inf | (~zero & (exponent >= FP32.exp_max))):
            m.d.comb += [self.product.sign.eq(sign), self.product.exp.eq(FP32.exp_max)]
        with m.Elif(zero | (exponent <= 0)):
            m.d.comb += self.product.sign.eq(sign)
        with m.Else():
            m.d.comb += [
                self.product.sign.eq(sign),
                self.product.exp.eq(exponent[:8]),
                self.product.frac.eq(mantissa[:23]),
            ]
        return m
