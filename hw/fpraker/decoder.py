"""The FPRaker decoder: a step payload into every PE's lanes (NAF digits, signed ``b``, product exponents, specials)."""

from amaranth.hdl import Cat, Module, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.designs import FPRAKER
from dashraker.hw.fpraker.encoder import TERM_POSITIONS, TermEncoder
from dashraker.hw.numerics.float import classify, significand
from dashraker.hw.tile_stream import step_layout

__all__ = ["EXPONENT_BITS", "NO_EXPONENT", "specials_layout", "lane_layout", "decoded_layout", "Decoder"]

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
        "b": signed(9),  # b's significand with the product's sign applied
        "exponent": signed(EXPONENT_BITS),  # ea + eb - 127; NO_EXPONENT when the lane is not live
    })


def decoded_layout(rows, cols, lanes):
    """A decoded step: every PE's lanes, live flag and special products [row][col]; any PE live; end of pass."""
    pe = data.StructLayout({"lanes": data.ArrayLayout(lane_layout(), lanes), "any_live": 1,
                            "specials": specials_layout()})
    return data.StructLayout({"pes": data.ArrayLayout(data.ArrayLayout(pe, cols), rows), "any_live": 1, "last": 1})


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
    """Decodes a step (combinational): the first stage of the tile's front end.

    NAF term encoding of every row's ``a`` operands (one ``TermEncoder`` per row and
    lane, shared along the row), classification of every (a, b) pair of every PE, the
    signed ``b``, product exponents ``Pe = ea + eb - 127`` and each PE's special products
    (NaN: a NaN operand or Inf x 0; an Inf of the product's sign otherwise). Lanes that
    are not live carry no digits and ``NO_EXPONENT``.

    Parameters
    ----------
    rows, cols : int
        PEs per column and per row.
    lanes : int
        Lanes N per PE.

    Ports
    -----
    step : In(step_layout(rows, cols, lanes, "bf16"))
        N bf16 operands per row and per column; ``last`` closes a pass.
    decoded : Out(decoded_layout(rows, cols, lanes))
        The decoded step.
    """

    def __init__(self, rows, cols, lanes):
        FPRAKER.params(rows=rows, cols=cols, lanes=lanes)
        self.rows, self.cols, self.lanes = rows, cols, lanes
        super().__init__({
            "step": In(step_layout(rows, cols, lanes, "bf16")),
            "decoded": Out(decoded_layout(rows, cols, lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        step, decoded = self.step, self.decoded
        encoders = [[self._encoder(m, step.rows[r][n], f"{r}_{n}") for n in range(self.lanes)]
                    for r in range(self.rows)]
        any_live = []
        for r in range(self.rows):
            for c in range(self.cols):
                pe = decoded.pes[r][c]
                products = [_decode_lane(m, step.rows[r][n], step.cols[c][n], encoders[r][n], pe.lanes[n])
                            for n in range(self.lanes)]
                live, nan, pos_inf, neg_inf = zip(*products)
                any_live.extend(live)
                m.d.comb += [
                    pe.any_live.eq(Cat(*live).any()),
                    pe.specials.nan.eq(Cat(*nan).any()),
                    pe.specials.pos_inf.eq(Cat(*pos_inf).any()),
                    pe.specials.neg_inf.eq(Cat(*neg_inf).any()),
                ]
        m.d.comb += [decoded.any_live.eq(Cat(*any_live).any()), decoded.last.eq(step.last)]
        return m

    @staticmethod
    def _encoder(m, value, name):
        """A ``TermEncoder`` of the bf16 ``value``'s significand."""
        encoder = m.submodules[f"encoder{name}"] = TermEncoder()
        m.d.comb += encoder.significand.eq(significand(value))
        return encoder
