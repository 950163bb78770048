"""The FPRaker decode stage: a step payload into every PE's step (terms, signed ``b``, exponents, specials)."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.designs import FPRAKER
from dashraker.hw.fpraker.encoder import TermEncoder
from dashraker.hw.fpraker.pe import pe_step_layout
from dashraker.hw.fpraker.rounder import EXPONENT_BITS
from dashraker.hw.numerics.float import classify, significand
from dashraker.hw.tile_stream import step_layout

__all__ = ["decoded_layout", "Decoder"]

_NO_EXPONENT = -(1 << (EXPONENT_BITS - 1))  # below every product exponent: stands in for a lane that is not live


def decoded_layout(rows, cols, lanes):
    """A decoded step of the tile: every PE's step [row][col], whether any PE has a live lane, end of pass."""
    return data.StructLayout({
        "pes": data.ArrayLayout(data.ArrayLayout(pe_step_layout(lanes), cols), rows),
        "any_live": 1,
        "last": 1,
    })


def _maximum(values):
    """Balanced tree of comparators."""
    while len(values) > 1:
        values = [Mux(values[i] > values[i + 1], values[i], values[i + 1]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


def _term_encoder(m, value, name):
    """A ``TermEncoder`` of the bf16 ``value``'s significand."""
    encoder = m.submodules[f"encoder{name}"] = TermEncoder()
    m.d.comb += encoder.significand.eq(significand(value))
    return encoder


def _decode_lane(m, a, b, terms, lane, name):
    """Drive ``lane`` (``lane_layout``) from the bf16 pair (a, b) and a's terms; returns (live, exponent or
    ``_NO_EXPONENT``, nan, pos_inf, neg_inf) of the product."""
    a_zero, a_inf, a_nan = classify(a)
    b_zero, b_inf, b_nan = classify(b)
    live = ~a_zero & ~a_inf & ~a_nan & ~b_zero & ~b_inf & ~b_nan
    negative = a.sign ^ b.sign
    sig_b = significand(b)
    exponent = Signal(signed(EXPONENT_BITS), name=f"pexp{name}")
    m.d.comb += [
        lane.plus.eq(terms.plus),
        lane.minus.eq(terms.minus),
        lane.b.eq(Mux(negative, -sig_b, sig_b)),
        exponent.eq(a.exp + b.exp - 127),
        lane.exponent.eq(exponent),
        lane.live.eq(live),
    ]
    nan = a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)
    inf = (a_inf | b_inf) & ~nan
    return live, Mux(live, exponent, _NO_EXPONENT), nan, inf & ~negative, inf & negative


class Decoder(wiring.Component):
    """Decodes each step into a register, one step per transfer (a pipeline stage of the tile).

    Combinationally: NAF term encoding of every row's ``a`` operands (one ``TermEncoder``
    per row and lane, shared along the row), classification of every (a, b) pair of
    every PE, the signed ``b``, product exponents ``Pe = ea + eb - 127``, each PE's
    maximum ``Pe`` over its live lanes and its special products (NaN: a NaN operand
    or Inf x 0; an Inf of the product's sign otherwise). The result is registered:
    ``steps`` is ready while the register is empty or ``decoded`` is being taken.

    Parameters
    ----------
    rows, cols : int
        PEs per column and per row.
    lanes : int
        Lanes N per PE.

    Ports
    -----
    steps : In(stream.Signature(step_layout(rows, cols, lanes, "bf16")))
        One step per transfer: N bf16 operands per row and per column; ``last`` closes a pass.
    decoded : Out(stream.Signature(decoded_layout(rows, cols, lanes)))
        The decoded steps, one cycle after they were accepted at the earliest.
    """

    def __init__(self, rows, cols, lanes):
        FPRAKER.params(rows=rows, cols=cols, lanes=lanes)
        self.rows, self.cols, self.lanes = rows, cols, lanes
        super().__init__({
            "steps": In(stream.Signature(step_layout(rows, cols, lanes, "bf16"))),
            "decoded": Out(stream.Signature(decoded_layout(rows, cols, lanes))),
        })

    def elaborate(self, platform):
        m = Module()
        decoded = Signal(decoded_layout(self.rows, self.cols, self.lanes))
        self._decode(m, self.steps.payload, decoded)
        m.d.comb += self.steps.ready.eq(~self.decoded.valid | self.decoded.ready)
        with m.If(self.steps.valid & self.steps.ready):
            m.d.sync += [self.decoded.payload.eq(decoded), self.decoded.valid.eq(1)]
        with m.Elif(self.decoded.ready):
            m.d.sync += self.decoded.valid.eq(0)
        return m

    def _decode(self, m, payload, decoded):
        """Combinational decode of a step ``payload`` into ``decoded``."""
        terms = [[_term_encoder(m, payload.rows[r][n], f"{r}_{n}") for n in range(self.lanes)]
                 for r in range(self.rows)]
        any_live = []
        for r in range(self.rows):
            for c in range(self.cols):
                step = decoded.pes[r][c]
                products = [_decode_lane(m, payload.rows[r][n], payload.cols[c][n], terms[r][n], step.lanes[n],
                                         f"{r}_{c}_{n}") for n in range(self.lanes)]
                live, exponents, nan, pos_inf, neg_inf = zip(*products)
                any_live.extend(live)
                m.d.comb += [
                    step.any_live.eq(Cat(*live).any()),
                    step.max_exponent.eq(_maximum(list(exponents))),
                    step.specials.nan.eq(Cat(*nan).any()),
                    step.specials.pos_inf.eq(Cat(*pos_inf).any()),
                    step.specials.neg_inf.eq(Cat(*neg_inf).any()),
                ]
        m.d.comb += [decoded.any_live.eq(Cat(*any_live).any()), decoded.last.eq(payload.last)]
