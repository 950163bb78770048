"""The FPRaker tile's sequencer: runs a PE's steps, each for the cycles the front end counted."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import FPRAKER_MAX_TERMS as MAX_TERMS
from dashraker.hw.checks import check_count
from dashraker.hw.fpraker.pe import pe_control_signature
from dashraker.hw.tile_stream import CYCLE_BITS

__all__ = ["Sequencer"]


class Sequencer(wiring.Component):
    """Control of a PE: take a scheduled step, run it for its length, count the pass's cycles.

    The tile has one per PE, next to it; fed the same steps and the same ``room``, they
    run in lockstep.

    A step is loaded into the PE at a clock edge (``control.load``) and is active from
    the next cycle for as many cycles as its ``more`` thermometer says (at least one);
    its last cycle's clock edge loads the next waiting step, so steps follow each other
    without bubbles. The length is known before the step starts, so nothing here waits
    on the PE. A pass's last cycle waits (the PE idles) until the output stage has
    ``room`` for its results: so the pipelines behind never stall.

    ``cycles`` counts the active cycles of the pass's steps; with
    ``zero_block_cycles=0`` the cycles of a step without any live lane (in every PE)
    are not counted: it models such steps being skipped before they reach the tile,
    as the golden model's cost does, though the step still takes a clock here.

    Parameters
    ----------
    zero_block_cycles : 0 | 1
        Whether a step without any live lane is counted.

    Ports
    -----
    valid : In(1)
        A scheduled step waits.
    last, any_live : In(1)
        Of the waiting step: it closes a pass; some PE has a live lane in it.
    more : In(4)
        Of the waiting step: bit j set when it lasts more than j + 1 cycles.
    room : In(1)
        The output stage will take the results of a pass that ends in this cycle.
    ready : Out(1)
        The PEs take the waiting step at this clock edge: no step runs, or it finishes.
    control : Out(pe_control_signature())
        To the PE.
    cycles : Out(32)
        The pass's cycle count including this cycle (read with ``control.pass_end``).
    """

    def __init__(self, zero_block_cycles):
        check_count("zero_block_cycles", zero_block_cycles, 0, 1)
        self.zero_block_cycles = zero_block_cycles
        super().__init__({
            "valid": In(1),
            "last": In(1),
            "any_live": In(1),
            "more": In(MAX_TERMS - 1),
            "room": In(1),
            "ready": Out(1),
            "control": Out(pe_control_signature()),
            "cycles": Out(CYCLE_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        control = self.control
        busy, first, last, counted, starts = Signal(), Signal(), Signal(), Signal(), Signal()  # of the step loaded
        remaining = Signal(MAX_TERMS - 1)  # thermometer: bit j, more than j + 1 cycles left
        fresh = Signal(init=1)  # the next step loaded starts a pass
        cycles = Signal(CYCLE_BITS)  # the pass's so far

        ending = busy & ~remaining[0]
        hold = ending & last & ~self.room
        finish = ending & ~hold
        counting = control.active & counted
        m.d.comb += [
            control.active.eq(busy & ~hold),
            control.first.eq(first),
            control.pass_start.eq(first & starts),
            control.pass_end.eq(finish & last),
            control.load.eq(self.valid & self.ready),
            self.ready.eq(~busy | finish),
            self.cycles.eq(cycles + counting),
        ]
        with m.If(control.active):
            m.d.sync += [first.eq(0), remaining.eq(remaining >> 1)]
        with m.If(finish):
            m.d.sync += busy.eq(0)
        with m.If(counting):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(control.pass_end):
            m.d.sync += cycles.eq(0)
        with m.If(control.load):
            m.d.sync += [
                busy.eq(1),
                first.eq(1),
                remaining.eq(self.more),
                last.eq(self.last),
                counted.eq(self.any_live | int(self.zero_block_cycles == 1)),
                starts.eq(fresh),
                fresh.eq(self.last),
            ]
        return m
