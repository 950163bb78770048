"""The FPRaker lane: one ``a`` operand's NAF terms, issued most significant first, times the bit-parallel ``b``."""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.designs import FPRAKER
from dashraker.hw.fpraker.encoder import TERM_POSITIONS, leading_term
from dashraker.hw.fpraker.rounder import EXPONENT_BITS

__all__ = ["DISTANCE_BITS", "lane_layout", "Lane"]

DISTANCE_BITS = EXPONENT_BITS + 2  # a lane's alignment distance M - Pe


def lane_layout():
    """One lane of a step as a PE receives it: the terms of ``a``, the signed ``b``, the product exponent."""
    return data.StructLayout({
        "plus": TERM_POSITIONS,  # NAF +1 digits of a's significand
        "minus": TERM_POSITIONS,  # NAF -1 digits
        "b": signed(9),  # b's significand with the product's sign applied
        "exponent": signed(EXPONENT_BITS),  # ea + eb - 127
        "live": 1,  # both operands finite and non-zero
    })


def _shift_term(m, value, amount, guard_bits):
    """``floor(value * 2**amount)`` for ``amount`` in -7 .. 17 + G: the lane's barrel shifter."""
    width = 26 + guard_bits
    shifted = Signal(signed(width))
    m.d.comb += shifted.eq((value << (amount + 7).as_unsigned()[:5])[7:7 + width].as_signed())
    return shifted


def _in_bounds(distance, position, guard_bits):
    """A term ``2**position`` at ``distance`` reaches the window: ``d <= t + 16 + G``."""
    return distance <= position + 16 + guard_bits


class Lane(wiring.Component):
    """One lane of a PE: each active cycle, the next in-bound term of ``a`` times ``b`` in window units.

    On ``load`` the lane latches its part of the next step: the NAF digits of ``a``
    (none when the lane is not live), the signed ``b`` and the product exponent
    ``Pe``. Each active cycle it picks its most significant remaining digit
    ``s * 2**t`` from the digits alone and issues it if in bounds (``d <= t + 16 + G``
    with ``d = M - Pe``): ``contribution`` is then ``floor(s * b * 2**(t + 9 + G - d))``
    and the digit is removed at the clock edge. An out-of-bounds term ends the lane,
    as every later term is out of bounds too. The step's first cycle takes ``d`` from
    ``distance`` (the exponent unit's), and the lane keeps it for the later cycles.

    Parameters
    ----------
    guard_bits : int
        G, guard bits of the accumulator window (0..7: the shifter's range).

    Ports
    -----
    step : In(lane_layout())
        This lane of the next step, latched on ``load``.
    load : In(1)
        Latch ``step``; the next active cycle is its first.
    active : In(1)
        This cycle issues ``contribution``: its digit is removed at the clock edge.
    first : In(1)
        This cycle is the step's first: ``d`` is ``distance`` (kept if ``active``).
    exponent : Out(signed(12))
        The current step's product exponent ``Pe``, for the exponent unit.
    distance : In(signed(14))
        ``M - Pe`` from the exponent unit, read in the step's first cycle.
    contribution : Out(signed(26 + G))
        This cycle's term in window units; 0 when no term is issued.
    more : Out(1)
        An in-bound term remains after this cycle's.
    """

    def __init__(self, guard_bits):
        FPRAKER.params(guard_bits=guard_bits)
        self.guard_bits = guard_bits
        super().__init__({
            "step": In(lane_layout()),
            "load": In(1),
            "active": In(1),
            "first": In(1),
            "exponent": Out(signed(EXPONENT_BITS)),
            "distance": In(signed(DISTANCE_BITS)),
            "contribution": Out(signed(26 + guard_bits)),
            "more": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.guard_bits
        plus, minus = Signal(TERM_POSITIONS), Signal(TERM_POSITIONS)  # the remaining digits
        b = Signal(signed(9))
        kept = Signal(signed(DISTANCE_BITS))  # d after the step's first cycle
        d = Signal(signed(DISTANCE_BITS))
        m.d.comb += d.eq(Mux(self.first, self.distance, kept))

        # the next term is picked from the digits alone, in parallel with the alignment
        digits = plus | minus
        position, present = leading_term(m, digits)
        issue = Signal()
        m.d.comb += issue.eq(present & _in_bounds(d, position, g))
        rest = Signal(TERM_POSITIONS)
        m.d.comb += rest.eq(digits & ~(Const(1, TERM_POSITIONS) << position))
        following, follows = leading_term(m, rest)
        term_b = Mux(minus.bit_select(position, 1), -b, b)
        issued = Signal(TERM_POSITIONS)
        m.d.comb += [
            self.more.eq(issue & follows & _in_bounds(d, following, g)),
            self.contribution.eq(Mux(issue, _shift_term(m, term_b, position + 9 + g - d, g), 0)),
            issued.eq(Mux(issue, Const(1, TERM_POSITIONS) << position, 0)),
        ]

        with m.If(self.active):
            m.d.sync += [plus.eq(plus & ~issued), minus.eq(minus & ~issued)]
            with m.If(self.first):
                m.d.sync += kept.eq(d)
        with m.If(self.load):
            live = self.step.live.replicate(TERM_POSITIONS)
            m.d.sync += [
                plus.eq(self.step.plus & live),
                minus.eq(self.step.minus & live),
                b.eq(self.step.b),
                self.exponent.eq(self.step.exponent),
            ]
        return m
