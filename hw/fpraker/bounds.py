"""The FPRaker bounds unit: a step's terms that reach the accumulator, each lane's shift, the frame's move."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import (
    BF16,
    FPRAKER_ACCUMULATOR_BITS as ACCUMULATOR_BITS,
    FPRAKER_FRAME_BITS as FRAME_BITS,
    FPRAKER_MAX_TERMS as MAX_TERMS,
)
from dashraker.hw.checks import check_count
from dashraker.hw.fpraker.decoder import B_BITS, EXPONENT_BITS, lane_layout
from dashraker.hw.fpraker.encoder import TERM_POSITIONS

__all__ = ["REACH", "MAX_SHIFT", "SHIFT_AMOUNT_BITS", "MAX_GUARD_BITS", "MOVE_LIMIT", "bounded_lane_layout",
           "frame_layout", "Bounds", "lane_more_cycles"]

MOVE_LIMIT = -(-ACCUMULATOR_BITS // (1 << FRAME_BITS))  # frame moves of this many steps or more leave 0 or -1

# A digit 2**t of a lane d places below E is in bounds while d <= t + REACH + G: its product reaches the last place
# 2**(E - 150 - G) (a product's own 2p places, then G guard bits); the lane's shift is then REACH + G - d.
REACH = 2 * BF16.precision
MAX_SHIFT = TERM_POSITIONS - 1 + REACH  # the largest t + shift of an in-bound digit, besides G
SHIFT_AMOUNT_BITS = 5  # the lane shifter's amount, t + shift: 0 .. MAX_SHIFT + G
MAX_GUARD_BITS = (1 << SHIFT_AMOUNT_BITS) - 1 - MAX_SHIFT


def bounded_lane_layout():
    """A lane whose out-of-bounds digits are dropped: its remaining digits, signed ``b``, and ``shift``, where
    a term ``2**t`` adds ``floor(b * 2**(t + shift - 7))`` to the step's sum in units of ``2**(E - 150 - G)``."""
    return data.StructLayout({"plus": TERM_POSITIONS, "minus": TERM_POSITIONS, "b": signed(B_BITS), "shift": signed(6)})


def frame_layout():
    """A step's frame: the move of the accumulator's frame (in steps of ``2**FRAME_BITS`` bits, up to
    ``MOVE_LIMIT``), the offset of ``E`` above the frame, and the frame ``F = E >> FRAME_BITS``."""
    return data.StructLayout({
        "move": range(MOVE_LIMIT + 1),
        "offset": FRAME_BITS,
        "frame": signed(EXPONENT_BITS - FRAME_BITS),
    })


class Bounds(wiring.Component):
    """Aligns a PE's step to its exponent ``E`` (combinational).

    Each live lane is ``d = E - Pe`` below ``E``; its digit ``2**t`` is in bounds when
    ``d <= t + REACH + G`` (its product reaches the last place ``2**(E - 150 - G)``). The lane keeps
    only its in-bound digits, so that the PE issues all it holds and the step's length
    is known before it starts. The frame moves by the steps of ``2**FRAME_BITS`` that
    ``E`` rose past, and ``E``'s offset in its frame is the left shift of the step's sum.

    Parameters
    ----------
    lanes : int
        Lanes N of the PE.
    guard_bits : int
        G.

    Ports
    -----
    lanes : In(ArrayLayout(lane_layout(), lanes))
        The step's decoded lanes.
    exponent, previous : In(signed(12))
        ``E`` after and before the step (``ExponentUnit``).
    bounded : Out(ArrayLayout(bounded_lane_layout(), lanes))
        The lanes with their in-bound digits and shifts.
    frame : Out(frame_layout())
        The frame's move, the offset and the frame after the step.
    """

    def __init__(self, lanes, guard_bits):
        check_count("lanes", lanes)
        check_count("guard_bits", guard_bits, 0, MAX_GUARD_BITS)
        self.lane_count, self.guard_bits = lanes, guard_bits
        super().__init__({
            "lanes": In(data.ArrayLayout(lane_layout(), lanes)),
            "exponent": In(signed(EXPONENT_BITS)),
            "previous": In(signed(EXPONENT_BITS)),
            "bounded": Out(data.ArrayLayout(bounded_lane_layout(), lanes)),
            "frame": Out(frame_layout()),
        })

    def elaborate(self, platform):
        m = Module()
        reach = REACH + self.guard_bits
        for n in range(self.lane_count):
            lane, bounded = self.lanes[n], self.bounded[n]
            distance = Signal(signed(EXPONENT_BITS + 1), name=f"distance{n}")
            m.d.comb += distance.eq(self.exponent - lane.exponent)
            near = distance[5:] == 0  # d < 32, and not a lane below NO_EXPONENT's wrap
            kept = Cat(*(near & (distance[:5] <= t + reach) for t in range(TERM_POSITIONS)))
            m.d.comb += [
                bounded.plus.eq(lane.plus & kept),
                bounded.minus.eq(lane.minus & kept),
                bounded.b.eq(lane.b),
                bounded.shift.eq(reach - distance[:5]),
            ]
        frame, frames = self.frame, Signal(signed(EXPONENT_BITS - FRAME_BITS + 1))
        m.d.comb += [
            frames.eq((self.exponent >> FRAME_BITS) - (self.previous >> FRAME_BITS)),
            frame.move.eq(Mux(frames >= MOVE_LIMIT, MOVE_LIMIT, frames)),
            frame.offset.eq(self.exponent[:FRAME_BITS]),
            frame.frame.eq(self.exponent >> FRAME_BITS),
        ]
        return m


def lane_more_cycles(lane):
    """Thermometer of a bounded lane's length: bit j set when it holds more than j + 1 in-bound digits.

    A lookup of its 9 digits (a table, so that synthesis makes a few LUT levels of it
    rather than an adder's carry chain); a step's length is the OR over its lanes."""
    positions = 1 << TERM_POSITIONS
    return Cat(*(Const(sum(1 << x for x in range(positions) if bin(x).count("1") > j + 1), positions)
                 .bit_select(lane.plus | lane.minus, 1) for j in range(MAX_TERMS - 1)))
