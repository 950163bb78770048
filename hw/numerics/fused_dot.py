"""The fused dot product of a step (SPEC section 2, amended 2026-11-27): exact products aligned to the step's
largest in a window, summed by an integer adder tree, handed to the fixed-point accumulator unrounded."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import FIXED_POINT_FRAME, FUSED_GUARD_BITS, float_format
from dashraker.hw.numerics.adder_tree import tree_levels
from dashraker.hw.numerics.fixed_accumulator import SHIFT_BITS, addend_layout
from dashraker.hw.numerics.float import FloatLayout, classify
from dashraker.hw.numerics.pipeline import delayed

__all__ = ["ExactMultiplier", "FusedTree", "EXACT_MULTIPLIER_LATENCY", "fused_latency", "fused_magnitude_bits",
           "product_layout"]

# the significands copied (the multiply then reads registers placed by the DSP block) and the classification and
# exponent sum; the significands' product; its range checks
EXACT_MULTIPLIER_LATENCY = 3
EXPONENT_SUM_BITS = 9  # two biased exponents added (at most 508)


def product_layout(fmt):
    """An exact product: its significand (2p bits), exponent sum, sign, and what kind it is."""
    precision = float_format(fmt).precision
    return data.StructLayout({"significand": 2 * precision, "exponent": EXPONENT_SUM_BITS, "sign": 1, "used": 1,
                              "nan": 1, "inf": 1})


def fused_magnitude_bits(lanes, fmt, guard_bits):
    """Bits of a step sum's magnitude: N window values below 2^(2p + G) each."""
    return 2 * float_format(fmt).precision + guard_bits + (lanes - 1).bit_length()


def fused_latency(lanes):
    """Cycles from a step's operands at the ``ExactMultiplier`` inputs to its sum at ``FusedTree``'s output."""
    levels = tree_levels(lanes)
    return EXACT_MULTIPLIER_LATENCY + levels + 3 + levels + 1


class ExactMultiplier(wiring.Component):
    """One lane's exact product (``models.baseline.fused_steps``), in three registered stages.

    The significands with their hidden ones are registered and the biased exponents added,
    so that the multiply reads registers the placer can put beside its DSP block (from
    a ``MacUnit``'s operand registers, 3.9 ns of routing to the block and 3.5 ns back
    bounded a 2x2x8 tile at 95 MHz on ECP5); then they are multiplied as integers (2p
    bits); then the product is classified: NaN for a NaN operand or Inf x 0, Inf for
    Inf x non-zero or an exact product of 2^128 or more, ``used`` for a non-zero
    product of 2^-126 or more (a smaller one is flushed: FTZ; a zero or subnormal
    operand makes a zero: DAZ).

    Parameters
    ----------
    fmt : "bf16" | "fp32"
        Operand format.

    Ports
    -----
    a, b : In(FloatLayout(fmt))
        Factors.
    product : Out(product_layout(fmt))
        Their product, ``EXACT_MULTIPLIER_LATENCY`` cycles later.
    """

    def __init__(self, fmt="bf16"):
        self.format = float_format(fmt)
        self.latency = EXACT_MULTIPLIER_LATENCY
        layout = FloatLayout(self.format)
        super().__init__({"a": In(layout), "b": In(layout), "product": Out(product_layout(self.format))})

    def elaborate(self, platform):
        m = Module()
        precision = self.format.precision
        a, b = self.a, self.b
        a_zero, a_inf, a_nan = classify(a)
        b_zero, b_inf, b_nan = classify(b)
        a_significand, b_significand = Signal(precision), Signal(precision)
        exponent = Signal(EXPONENT_SUM_BITS)
        sign, nan, inf, finite = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [
            a_significand.eq(Cat(a.frac, 1)), b_significand.eq(Cat(b.frac, 1)),
            exponent.eq(a.exp + b.exp),
            sign.eq(a.sign ^ b.sign),
            nan.eq(a_nan | b_nan | (a_inf & b_zero) | (b_inf & a_zero)),
            inf.eq((a_inf | b_inf) & ~(a_nan | b_nan | a_zero | b_zero)),
            finite.eq(~(a_zero | b_zero | a_inf | b_inf | a_nan | b_nan)),
        ]
        significand = Signal(2 * precision)
        m.d.sync += significand.eq(a_significand * b_significand)
        exponent, sign, nan, inf, finite = (delayed(m, value, 1, f"{value.name}_multiplied")
                                            for value in (exponent, sign, nan, inf, finite))
        # the exact product's top place is 2^(exponent - 254 + top bit): 2^128 and up overflow, below 2^-126 flush
        lead = Signal(EXPONENT_SUM_BITS + 1)
        m.d.comb += lead.eq(exponent + significand[-1])
        product = self.product
        m.d.sync += [
            product.significand.eq(significand), product.exponent.eq(exponent), product.sign.eq(sign),
            product.nan.eq(nan), product.inf.eq(inf | (finite & (lead >= 382))),
            product.used.eq(finite & (lead < 382) & (lead >= 128)),
        ]
        return m


class FusedTree(wiring.Component):
    """The step's sum of N exact products (``ExactMultiplier``), exactly as ``models.baseline.fused_steps``.

    Stages: the largest exponent sum E of the used products, a balanced tree of
    registered maximum levels; each product's distance below it; its significand, G
    places to the left, shifted right by that distance (bits shifted out dropped: the
    window is 2p + G bits below the largest product's top place); negated where the
    product is negative; an integer adder tree, neighbours pairwise, a registered level
    each; the sum's sign and magnitude, with its place in the accumulator's frame,
    ``E - 254 - 2(p - 1) - G`` minus the frame's least significant exponent. The
    products' NaN and Inf flags travel beside it, ORed into the step's specials.

    Parameters
    ----------
    lanes : int
        Products N.
    fmt : "bf16" | "fp32"
        Operand format.
    guard_bits : int
        G, 0 to 15.

    Attributes
    ----------
    latency : int
        Cycles from ``products`` to ``addend``: ``2 * ceil(log2 N) + 4``.

    Ports
    -----
    products : In(ArrayLayout(product_layout(fmt), lanes))
        The lanes' exact products.
    addend : Out(addend_layout(fused_magnitude_bits(lanes, fmt, guard_bits)))
        The step sum, for ``FixedPointAccumulator``.
    """

    def __init__(self, lanes, fmt="bf16", guard_bits=FUSED_GUARD_BITS):
        if not isinstance(guard_bits, int) or not 0 <= guard_bits <= 15:
            raise ValueError(f"guard_bits must be an integer in 0..15, not {guard_bits!r}")
        self.lanes, self.format, self.guard_bits = lanes, float_format(fmt), guard_bits
        self.magnitude_bits = fused_magnitude_bits(lanes, self.format, guard_bits)
        self.latency = fused_latency(lanes) - EXACT_MULTIPLIER_LATENCY
        super().__init__({"products": In(data.ArrayLayout(product_layout(self.format), lanes)),
                          "addend": Out(addend_layout(self.magnitude_bits))})

    def elaborate(self, platform):
        m = Module()
        lanes, guard = self.lanes, self.guard_bits
        precision = self.format.precision
        window = 2 * precision + guard
        levels = tree_levels(lanes)
        products = [self.products[lane] for lane in range(lanes)]

        # The largest exponent sum of the used products, a registered level at a time.
        level = [Mux(product.used, product.exponent, 0) for product in products]
        for depth in range(levels):
            larger = []
            for index in range(0, len(level), 2):
                register = Signal(EXPONENT_SUM_BITS, name=f"largest{depth}_{index // 2}")
                pair = level[index:index + 2]
                m.d.sync += register.eq(pair[0] if len(pair) == 1 else Mux(pair[0] >= pair[1], pair[0], pair[1]))
                larger.append(register)
            level = larger
        largest = level[0]
        products = [delayed(m, product, levels, f"product{lane}_") for lane, product in enumerate(products)]

        # Each product's distance below the largest, then its window value, then its signed value.
        distances = []
        for lane, product in enumerate(products):
            distance = Signal(EXPONENT_SUM_BITS, name=f"distance{lane}")
            m.d.sync += distance.eq(largest - product.exponent)
            distances.append(distance)
        products = [delayed(m, product, 1, f"distanced{lane}_") for lane, product in enumerate(products)]
        largest = delayed(m, largest, 1, "largest_distanced")
        signed_values = []
        for lane, (product, distance) in enumerate(zip(products, distances)):
            value = Signal(window, name=f"window{lane}")
            inside = product.used & (distance < window)
            m.d.sync += value.eq(Mux(inside, (Cat(Const(0, guard), product.significand) >> distance)[:window], 0))
            negated = Signal(signed(window + 1), name=f"signed{lane}")
            sign = delayed(m, product.sign, 1, f"sign{lane}_")
            m.d.sync += negated.eq(Mux(sign, -value, value))
            signed_values.append(negated)
        largest = delayed(m, largest, 2, "largest_windowed")
        specials = Cat(
            Cat(*(product.nan for product in products)).any(),
            Cat(*(product.inf & ~product.sign for product in products)).any(),
            Cat(*(product.inf & product.sign for product in products)).any())
        specials = delayed(m, specials, 2, "specials_windowed")

        # The integer adder tree, a registered level at a time (an odd value passes up through a register).
        level = signed_values
        for depth in range(levels):
            sums = []
            for index in range(0, len(level), 2):
                pair = level[index:index + 2]
                register = Signal(signed(len(pair[0]) + 1), name=f"sum{depth}_{index // 2}")
                m.d.sync += register.eq(pair[0] if len(pair) == 1 else pair[0] + pair[1])
                sums.append(register)
            level = sums
        total = level[0]
        largest = delayed(m, largest, levels, "largest_summed")
        specials = delayed(m, specials, levels, "specials_summed")

        # Sign and magnitude, and the place in the frame (a step with no used product has magnitude 0).
        place = largest - 254 - 2 * (precision - 1) - guard - FIXED_POINT_FRAME[1]
        addend = self.addend
        m.d.sync += [addend.sign.eq(total < 0), addend.magnitude.eq(Mux(total < 0, -total, total)),
                     addend.shift.eq(place[:SHIFT_BITS]), addend.specials.eq(specials)]
        return m
