"""The FPRaker PE: term-serial lanes, a pipelined integer adder tree and the wide accumulator with a moving frame."""

import operator
from functools import reduce

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import FPRAKER_ACCUMULATOR_BITS as ACCUMULATOR_BITS, FPRAKER_FRAME_BITS as FRAME_BITS
from dashraker.hw.checks import check_count
from dashraker.hw.fpraker.bounds import MAX_GUARD_BITS, MOVE_LIMIT, frame_layout
from dashraker.hw.fpraker.decoder import specials_layout
from dashraker.hw.fpraker.front_end import pe_step_layout
from dashraker.hw.fpraker.lane import LANE_LATENCY, Lane

from dashraker.hw.fpraker.rounder import accumulator_layout
from dashraker.hw.numerics.pipeline import delayed

__all__ = ["pe_control_signature", "pe_latency", "PE"]

TREE_LEVELS_PER_STAGE = 2
# The accumulator's move is selected by registers of their own for every slice of this many bits, each marked
# ``keep`` (the FPGA flow keeps such registers apart), so that no select net spans the 64-bit loop.
SELECT_SLICE_BITS = 8


def pe_control_signature():
    """The sequencer's strobes to every PE, as the sequencer drives them (a PE takes it flipped):

    ``load`` takes the next step at this clock edge; ``active``: this cycle issues terms;
    ``first``: this cycle is the step's first; ``pass_start``: ... and the pass's first;
    ``pass_end``: this cycle is the pass's last.
    """
    return wiring.Signature({name: Out(1) for name in ("load", "active", "first", "pass_start", "pass_end")})


def pe_latency(lanes):
    """Clock edges from a pass's last active cycle to ``done``: the strobes' register, the lane's stages, the
    adder tree's registers (one after every two levels), the frame's shift, the accumulator."""
    return 1 + LANE_LATENCY + -(-(lanes - 1).bit_length() // TREE_LEVELS_PER_STAGE) + 2


def _issue_layout():
    """What travels beside a cycle's terms to the accumulator."""
    return data.StructLayout({"active": 1, "first": 1, "pass_start": 1, "pass_end": 1, "frame": frame_layout(),
                              "specials": specials_layout()})


class PE(wiring.Component):
    """One FPRaker PE: N lanes of ``a`` terms times bit-parallel ``b``, summed into a 64-bit accumulator.

    Each active cycle every lane issues its next in-bound term (``Lane``); an integer
    adder tree, registered every two levels, sums them in units of ``2**(E - 150 - G)`` (``E`` the
    step's exponent); the sum is shifted left by ``E``'s offset in its frame and
    added into the accumulator ``U``. At a step's first cycle ``U`` first follows the
    frame's move (an arithmetic right shift by a multiple of ``2**FRAME_BITS`` bits: a
    few multiplexers, so that the add is the only one-cycle loop); at a pass's first it
    starts from 0. Everything else was decided by the front end before the step began.

    Parameters
    ----------
    lanes : int
        N.
    guard_bits : int
        G.

    Attributes
    ----------
    latency : int
        Clock edges from a pass's last active cycle to ``done``.

    Ports
    -----
    step : In(pe_step_layout(lanes))
        The next step, taken on ``control.load``.
    control : In(pe_control_signature())
        The sequencer's strobes; they and ``step`` act one clock edge later (they are registered first).
    done : Out(1)
        ``result`` holds a pass's accumulator (until the next active cycle reaches it).
    result : Out(accumulator_layout())
        ``U``, the pass's frame and its special products.
    """

    def __init__(self, lanes, guard_bits):
        check_count("lanes", lanes)
        check_count("guard_bits", guard_bits, 0, MAX_GUARD_BITS)
        self.lanes, self.guard_bits = lanes, guard_bits
        self.latency = pe_latency(lanes)
        super().__init__({
            "step": In(pe_step_layout(lanes)),
            "control": In(pe_control_signature()),
            "done": Out(1),
            "result": Out(accumulator_layout()),
        })

    def elaborate(self, platform):
        m = Module()
        # The sequencer's strobes and the step, registered here: every PE has its own copy, so that no strobe
        # reaches every lane of the tile in one cycle.
        control = Signal(data.StructLayout({name: 1 for name in ("load", "active", "first", "pass_start", "pass_end")}))
        step = Signal(pe_step_layout(self.lanes))
        m.d.sync += [step.eq(self.step), *(control[name].eq(getattr(self.control, name)) for name, _ in control.shape())]
        current = Signal(data.StructLayout({"frame": frame_layout(), "specials": specials_layout()}))
        with m.If(control.load):
            m.d.sync += [current.frame.eq(step.frame), current.specials.eq(step.specials)]

        issue = Signal(_issue_layout())
        m.d.comb += [
            issue.active.eq(control.active), issue.first.eq(control.first),
            issue.pass_start.eq(control.pass_start), issue.pass_end.eq(control.pass_end),
            issue.frame.eq(current.frame), issue.specials.eq(current.specials),
        ]
        contributions = []
        for n in range(self.lanes):
            lane = m.submodules[f"lane{n}"] = Lane(self.guard_bits)
            m.d.comb += [lane.step.eq(step.lanes[n]), lane.load.eq(control.load), lane.active.eq(control.active)]
            contributions.append(lane.contribution)
        issue = delayed(m, issue, LANE_LATENCY, "picked")

        # the adder tree, registered every two levels
        level = 0
        while len(contributions) > 1:
            contributions = [contributions[i] + contributions[i + 1] if i + 1 < len(contributions)
                             else contributions[i] for i in range(0, len(contributions), 2)]
            level += 1
            if level % TREE_LEVELS_PER_STAGE == 0 or len(contributions) == 1:
                contributions = [delayed(m, value, 1, f"sum{level}_") for value in contributions]
                issue = delayed(m, issue, 1, f"summed{level}_")
        total = contributions[0]

        # into the frame: the offset's left shift; the frame's move chosen for the step's first cycle, or 0 for
        # the pass's start, one-hot (0 to MOVE_LIMIT steps; none: U starts from 0), decoded a cycle ahead into a
        # register of its own for every slice of the accumulator: each bit of the moved U is then an OR of ANDs
        # of plain data, with no decoding in the loop and no select net spanning it
        framed = Signal(signed(len(total) + (1 << FRAME_BITS) - 1))
        m.d.sync += framed.eq(total << issue.frame.offset)
        value = self.result.value
        move = Mux(issue.first, issue.frame.move, 0)
        moved = Signal(signed(ACCUMULATOR_BITS))
        for first in range(0, ACCUMULATOR_BITS, SELECT_SLICE_BITS):
            index, bits = first // SELECT_SLICE_BITS, slice(first, first + SELECT_SLICE_BITS)
            chosen = Signal(MOVE_LIMIT + 1, name=f"move_chosen{index}", attrs={"keep": 1})
            m.d.sync += chosen.eq(Mux(issue.pass_start, 0, Cat(*(move == steps for steps in range(MOVE_LIMIT + 1)))))
            # MOVE_LIMIT steps leave only the sign (an arithmetic shift keeps the width)
            m.d.comb += moved[bits].eq(reduce(operator.or_, (
                chosen[steps].replicate(SELECT_SLICE_BITS) & (value >> (steps << FRAME_BITS))[bits]
                for steps in range(MOVE_LIMIT + 1))))
        issue = delayed(m, issue, 1, "framed")

        # the loop: U = U moved with the frame (0 at a pass's start) + framed
        with m.If(issue.active):
            m.d.sync += value.eq(moved + framed)
        m.d.sync += self.done.eq(issue.active & issue.pass_end)
        with m.If(issue.active & issue.pass_end):
            m.d.sync += [self.result.frame.eq(issue.frame.frame), self.result.specials.eq(issue.specials)]
        return m
