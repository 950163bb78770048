"""The FPRaker decoder: a PE's operands into its lanes (NAF digits, signed ``b``, product exponents, specials)."""

from amaranth.hdl import Cat, Module, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import BF16
from dashraker.hw.checks import check_count
from dashraker.hw.fpraker.encoder import TERM_POSITIONS, TermEncoder
from dashraker.hw.numerics.float import FloatLayout, classify, significand

__all__ = ["B_BITS", "EXPONENT_BITS", "NO_EXPONENT", "specials_layout", "lane_layout", "operands_layout",
           "decoded_layout", "Decoder"]

B_BITS = BF16.precision + 1  # a lane's b: the bf16 significand, hidden one included, with the product's sign
EXPONENT_BITS = 12  # signed product exponents: ea + eb - 127 in -125 .. 381
NO_EXPONENT = -(1 << (EXPONENT_BITS - 1))  # below every product exponent: stands in for a lane that is not live


def specials_layout():
    """Special products of a step (or of a pass so far): a NaN, an Inf of either sign."""
    return data.StructLayout({"nan": 1, "pos_inf": 1, "neg_inf": 1})


def lane_layout():
    """One lane of a PE's step: the NAF digits of ``a``, the signed ``b``, the product exponent."""
    return data.StructLayout({
        "plus": TERM_POSITIONS,  # NAF +1 digits of a's significand (none when the lane is not live)
        "minus": TERM_POSITIONS,  # NAF -1 digits
        "b": signed(B_BITS),  # b's significand with the product's sign applied
        "exponent": signed(EXPONENT_BITS),  # ea + eb - 127; NO_EXPONENT when the lane is not live
    })


def operands_layout(lanes):
    """A PE's operands of a step: its row's N bf16 ``a`` and its column's N bf16 ``b``."""
    lane_values = data.ArrayLayout(FloatLayout("bf16"), lanes)
    return data.StructLayout({"a": lane_values, "b": lane_values})


def decoded_layout(lanes):
    """A PE's decoded step: its lanes, whether any is live, its special products."""
    return data.StructLayout({"lanes": data.ArrayLayout(lane_layout(), lanes), "any_live": 1,
                              "specials": specials_layout()})


def _decode_lane(m, a, b, encoder, lane):
    """Drive ``lane`` from the bf16 pair (a, b) and a's ``encoder``; returns (live, nan, pos_inf, neg_inf)."""
    a_zero, a_inf, a_nan = classify(a)
    b_zero, b_inf, b_nan = classify(b)
    live = ~a_zero & ~a_inf & ~a_nan & ~b_zero & ~b_inf & ~b_nan
    negative = a.sign ^ b.sign
    sig_b = significand(b)
    m.d.comb += [
        lane.plus.eq(Mux(live, encoder.plus, 0)),
        lane.minus.eq(Mux(live, encoder.minus, 0)),
        lane.b.eq(Mux(negative, -sig_b, sig_b)),
        lane.exponent.eq(Mux(live, a.exp + b.exp - 127, NO_EXPONENT)),
    ]
    nan = a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)
    inf = (a_inf | b_inf) & ~nan
    return live, nan, inf & ~negative, inf & negative


class Decoder(wiring.Component):
    """Decodes a PE's part of a step (combinational): the first stage of the tile's front end.

    NAF term encoding of each ``a`` (a ``TermEncoder`` per lane), classification of
    each (a, b) pair, the signed ``b``, product exponents ``Pe = ea + eb - 127`` and the
    PE's special products (NaN: a NaN operand or Inf x 0; an Inf of the product's sign
    otherwise). Lanes that are not live carry no digits and ``NO_EXPONENT``. One per
    PE, each on its own copy of the operands, so that no operand's decoding is spread
    over the PEs that share it.

    Parameters
    ----------
    lanes : int
        Lanes N of the PE.

    Ports
    -----
    operands : In(operands_layout(lanes))
        The PE's N bf16 ``a`` and ``b``.
    decoded : Out(decoded_layout(lanes))
        The decoded step.
    """

    def __init__(self, lanes):
        check_count("lanes", lanes)
        self.lanes = lanes
        super().__init__({
            "operands": In(operands_layout(lanes)),
            "decoded": Out(decoded_layout(lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        a, b, decoded = self.operands.a, self.operands.b, self.decoded
        products = []
        for n in range(self.lanes):
            encoder = m.submodules[f"encoder{n}"] = TermEncoder()
            m.d.comb += encoder.significand.eq(significand(a[n]))
            products.append(_decode_lane(m, a[n], b[n], encoder, decoded.lanes[n]))
        live, nan, pos_inf, neg_inf = zip(*products)
        m.d.comb += [
            decoded.any_live.eq(Cat(*live).any()),
            decoded.specials.nan.eq(Cat(*nan).any()),
            decoded.specials.pos_inf.eq(Cat(*pos_inf).any()),
            decoded.specials.neg_inf.eq(Cat(*neg_inf).any()),
        ]
        return m
