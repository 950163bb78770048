"""Floating-point multiplier with an fp32 product: exact for bf16 operands, RNE for fp32 (SPEC section 2)."""

from amaranth.hdl import C, Cat, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import FP32, float_format
from dashraker.hw.numerics.float import FP32_LAYOUT, FloatLayout, canonical_nan, classify
from dashraker.hw.numerics.pipeline import Cuts
from dashraker.hw.numerics.rounding import round_nearest_even

__all__ = ["FPMultiplier", "MULTIPLIER_CUTS"]

# Widest factor of one ECP5 multiplier block (MULT18X18D).
_DSP_WIDTH = 18

# The registers of each stage count: after the blocks' partial products ("partials"), after their sum
# ("product"), after the normalisation and rounding ("round"), at the output.
MULTIPLIER_CUTS = {0: (), 1: ("output",), 2: ("product", "output"), 3: ("product", "round", "output"),
                   4: ("partials", "product", "round", "output")}


class FPMultiplier(wiring.Component):
    """``product = a * b`` with operands in ``fmt`` and the product in IEEE binary32.

    bf16 x bf16 fits the fp32 significand, so the product is exact; fp32 x fp32 is
    rounded to nearest even. Tininess is detected after rounding (as x86 does, so the
    PyTorch golden model agrees) and tiny products flush to a signed zero; subnormal
    inputs are zeros (DAZ); any NaN and Inf x 0 give 0x7FC00000.

    Significands wider than a multiplier block (fp32's 24 bits) are split into
    halves whose four products each take one block and are summed after them. With
    ``stages`` > 0 the multiplier is pipelined: one register at its output, a second
    after the significand product (before its normalisation and rounding), a third
    between the rounding and the range checks, a fourth between the blocks' partial
    products and their sum (``MULTIPLIER_CUTS``). The blocks multiply the raw
    significands with their hidden one, so no logic stands between the operand
    registers and the blocks: a zero operand's product is never read. Yosys's
    ECP5 mapping (``synth_ecp5``) instantiates ``MULT18X18D`` without its input and
    output registers, so these registers are fabric flip-flops placed beside the
    blocks. Every stage count gives the same bits.

    Parameters
    ----------
    fmt : "bf16" | "fp32"
        Operand format.
    stages : int
        Pipeline registers, 0 (combinational) to 4.

    Attributes
    ----------
    latency : int
        Cycles from ``a``/``b`` to ``product``: ``stages``.

    Ports
    -----
    a, b : In(FloatLayout(fmt))
        Factors.
    product : Out(FP32_LAYOUT)
        The product.
    """

    def __init__(self, fmt="bf16", stages=0):
        if stages not in MULTIPLIER_CUTS:
            raise ValueError(f"FP multiplier stages must be one of {', '.join(map(str, MULTIPLIER_CUTS))}, "
                             f"not {stages!r}")
        self.format = float_format(fmt)
        self.latency = stages
        layout = FloatLayout(self.format)
        super().__init__({"a": In(layout), "b": In(layout), "product": Out(FP32_LAYOUT)})

    def elaborate(self, platform):
        m = Module()
        cuts = Cuts(m, MULTIPLIER_CUTS[self.latency])
        a, b = self.a, self.b
        a_zero, a_inf, a_nan = classify(a)
        b_zero, b_inf, b_nan = classify(b)
        precision = self.format.precision
        width = 2 * precision

        nan = a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)
        inf = a_inf | b_inf
        zero = a_zero | b_zero
        sign = a.sign ^ b.sign
        # The product's exponent less the normalisation's increment, biased for fp32.
        exponent_sum = Signal(signed(11))
        m.d.comb += exponent_sum.eq(a.exp + b.exp - 2 * self.format.bias + FP32.bias)

        # The significands in pieces that each fit a block; piece products at their offsets.
        pieces = -(-precision // _DSP_WIDTH)
        piece = -(-precision // pieces)
        a_sig, b_sig = Cat(a.frac, C(1, 1)), Cat(b.frac, C(1, 1))
        partials, offsets = {}, []
        for i in range(pieces):
            for j in range(pieces):
                partial = Signal(2 * piece, name=f"partial{i}_{j}")
                m.d.comb += partial.eq(a_sig[i * piece:(i + 1) * piece] * b_sig[j * piece:(j + 1) * piece])
                partials[f"partial{i}_{j}"] = partial
                offsets.append(piece * (i + j))
        nan, inf, zero, sign, exponent_sum, *partials = cuts.cross(
            "partials", nan=nan, inf=inf, zero=zero, sign=sign, exponent_sum=exponent_sum, **partials)

        product = Signal(width)
        m.d.comb += product.eq(sum(partial << offset for partial, offset in zip(partials, offsets)))
        nan, inf, zero, sign, exponent_sum, product = cuts.cross(
            "product", nan=nan, inf=inf, zero=zero, sign=sign, exponent_sum=exponent_sum, product=product)

        # The product lies in [1, 4): normalise its leading one to the MSB, round.
        normalized = Signal(width)
        exponent = Signal(signed(11))
        top = product[width - 1]
        m.d.comb += [
            normalized.eq(product << ~top),
            exponent.eq(exponent_sum + top),
        ]
        if width > FP32.precision:
            cut = width - FP32.precision
            mantissa, exponent = round_nearest_even(
                m, normalized[cut:], exponent, guard=normalized[cut - 1], sticky=normalized[: cut - 1].any()
            )
        else:
            mantissa = Cat(C(0, FP32.precision - width), normalized)
        nan, inf, zero, sign, exponent, mantissa = cuts.cross(
            "round", nan=nan, inf=inf, zero=zero, sign=sign, exponent=exponent, mantissa=mantissa)

        result = Signal(FP32_LAYOUT)
        with m.If(nan):
            m.d.comb += result.eq(canonical_nan())
        with m.Elif(inf | (~zero & (exponent >= FP32.exp_max))):
            m.d.comb += [result.sign.eq(sign), result.exp.eq(FP32.exp_max)]
        with m.Elif(zero | (exponent <= 0)):
            m.d.comb += result.sign.eq(sign)
        with m.Else():
            m.d.comb += [
                result.sign.eq(sign),
                result.exp.eq(exponent[:8]),
                result.frac.eq(mantissa[:23]),
            ]
        (result,) = cuts.cross("output", product=result)
        m.d.comb += self.product.eq(result)
        return m
