"""The FPRaker tile's sequencer: runs the PEs' steps in lockstep and counts each pass's cycles."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dashraker.designs import FPRAKER
from dashraker.hw.fpraker.pe import pe_control_signature
from dashraker.hw.tile_stream import CYCLE_BITS

__all__ = ["Sequencer"]


class Sequencer(wiring.Component):
    """Lockstep control of the PEs: take a decoded step, run it until no PE has a term left, end the pass.

    A step is loaded into the PEs at a clock edge (``control.load``) and is active from
    the next cycle until the cycle in which no PE has a further in-bound term
    (``done``): at least one cycle. That cycle finishes the step, and the next waiting
    step is loaded at the same edge, so steps follow each other without bubbles.
    The finish of a pass's last step is also the pass's end, which waits (the PEs
    hold) while the output stage cannot capture the PEs' results.

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
        A decoded step waits.
    last, any_live : In(1)
        Of the waiting step: it closes a pass; some PE has a live lane in it.
    ready : Out(1)
        The PEs can take the waiting step at this clock edge: no step runs, or it finishes.
    done : In(1)
        No PE has an in-bound term after this cycle's (read while a step runs).
    capture_ready : In(1)
        The output stage can capture a pass's results at this clock edge.
    control : Out(pe_control_signature())
        To every PE: ``load`` (``valid & ready``), ``active``, ``first``, ``finish`` and
        ``pass_end`` (the finish of a last step; the output stage captures then).
    cycles : Out(32)
        The pass's cycle count including this cycle, as captured at ``control.pass_end``.
    """

    def __init__(self, zero_block_cycles):
        FPRAKER.params(zero_block_cycles=zero_block_cycles)
        self.zero_block_cycles = zero_block_cycles
        super().__init__({
            "valid": In(1),
            "last": In(1),
            "any_live": In(1),
            "ready": Out(1),
            "done": In(1),
            "capture_ready": In(1),
            "control": Out(pe_control_signature()),
            "cycles": Out(CYCLE_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        control = self.control
        busy, first, last, counted = Signal(), Signal(), Signal(), Signal()  # of the step loaded
        cycles = Signal(CYCLE_BITS)  # the pass's so far

        stall = busy & self.done & last & ~self.capture_ready
        counting = control.active & counted
        m.d.comb += [
            control.active.eq(busy & ~stall),
            control.first.eq(first),
            control.finish.eq(busy & self.done & ~stall),
            control.pass_end.eq(control.finish & last),
            control.load.eq(self.valid & self.ready),
            self.ready.eq(~busy | control.finish),
            self.cycles.eq(cycles + counting),
        ]

        with m.If(control.active):
            m.d.sync += first.eq(0)
        with m.If(control.finish):
            m.d.sync += busy.eq(0)
        with m.If(counting):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(control.load):
            m.d.sync += [
                busy.eq(1),
                first.eq(1),
                last.eq(self.last),
                counted.eq(self.any_live | int(self.zero_block_cycles == 1)),
            ]
        with m.If(control.pass_end):
            m.d.sync += cycles.eq(0)
        return m
