"""The FPRaker term encoder: canonical signed-digit (NAF) recoding of a bf16 significand."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["TERM_POSITIONS", "TermEncoder"]

TERM_POSITIONS = 9  # an 8-bit significand's NAF has digits at positions 0..8


class TermEncoder(wiring.Component):
    """Recodes an 8-bit significand into non-adjacent form, as two digit masks (combinational).

    ``x == plus - minus`` and ``plus | minus`` has no two adjacent bits: with
    ``y = 3x``, the +1 digits are ``(y & ~x) >> 1`` and the -1 digits ``(~y & x) >> 1``.
    At most 5 digits are set for 8-bit inputs.

    Ports
    -----
    significand : In(8)
        The significand with its hidden one (0 for a zero operand: no terms).
    plus, minus : Out(9)
        Bit t set: a term ``+2**t`` / ``-2**t``.
    """

    def __init__(self):
        super().__init__({
            "significand": In(8),
            "plus": Out(TERM_POSITIONS),
            "minus": Out(TERM_POSITIONS),
        })

    def elaborate(self, platform):
        m = Module()
        x = Signal(TERM_POSITIONS + 1)  # widened so that ~x covers the carries of 3x
        triple = Signal(TERM_POSITIONS + 1)
        m.d.comb += [
            x.eq(self.significand),
            triple.eq(x + (x << 1)),
            self.plus.eq((triple & ~x)[1:]),
            self.minus.eq((~triple & x)[1:]),
        ]
        return m
