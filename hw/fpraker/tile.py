"""The FPRaker R x C tile: a pipelined front end, lockstep term-serial PEs, and a rounding output stage."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.checks import check_count
from dashraker.hw.fpraker.bounds import MAX_GUARD_BITS
from dashraker.hw.fpraker.front_end import FrontEnd, front_end_stages
from dashraker.hw.fpraker.output import OutputStage
from dashraker.hw.fpraker.pe import PE, pe_latency
from dashraker.hw.fpraker.rounder import ROUNDER_LATENCY
from dashraker.hw.fpraker.sequencer import Sequencer
from dashraker.hw.numerics.pipeline import delayed
from dashraker.hw.reserved_queue import QUEUE_LATENCY
from dashraker.hw.tile_stream import result_layout, step_layout

__all__ = ["tile_fill", "Tile"]


def tile_fill(lanes):
    """Clock edges a stream of passes takes beyond their cycles, from its first step's transfer to its last
    result's: the front end's stages, then the last pass's way through the PEs' pipelines, the rounding and
    the output queue."""
    return front_end_stages(lanes) + pe_latency(lanes) + ROUNDER_LATENCY + QUEUE_LATENCY


class Tile(wiring.Component):
    """R x C FPRaker PEs in lockstep: row r's ``a`` operands are shared along the row (term-serial),
    column c's ``b`` operands along the column (bit-parallel).

    Pipeline: the ``FrontEnd`` decodes each step and decides, from the operands alone,
    each PE's alignment exponent, in-bound terms, frame move and the step's length;
    each PE's ``Sequencer`` (a copy per PE, so that no control net spans the tile; the
    copies see the same steps and the same ``room`` and so run in lockstep) loads a step
    into its ``PE`` when the previous one finishes, so steps follow each other without
    bubbles, and runs it for its length (the maximum over PEs and lanes of the in-bound
    terms, at least one cycle). The PEs' lanes,
    adder trees and accumulators are pipelined behind it and never stall; a pass's
    accumulators are rounded to fp32 by the ``OutputStage`` and queued for ``results``.
    A pass ends only when the queue has room for it, so backpressure stops the
    sequencer and the front end, never the pipelines behind them.

    ``cycles`` counts the cycles the PEs spent on the pass's steps; a step without any
    live lane (in every PE) takes one, so ``zero_block_cycles`` is 1 (the registry's
    only value).

    Parameters
    ----------
    rows, cols : int
        PEs per column and per row.
    lanes : int
        Lanes N per PE.
    guard_bits : int
        G, guard bits of the accumulator's frame below the fp32 significand (at most 7).
    zero_block_cycles : 1
        Cost of an all-zero step (the registry offers 1 only).

    Attributes
    ----------
    latency : int
        Clock edges from a pass's last step finishing to its result being valid.
    fill : int
        ``tile_fill(lanes)``: what a stream of passes takes beyond their cycles.

    Ports
    -----
    steps : In(stream.Signature(step_layout(rows, cols, lanes, "bf16")))
        One step per transfer: N bf16 operands per row and per column; ``last`` closes a pass.
    results : Out(stream.Signature(result_layout(rows, cols, cycles=True)))
        One transfer per pass: the fp32 ``outputs`` [row][col] and the pass's ``cycles``.
    """

    def __init__(self, rows, cols, lanes, guard_bits, zero_block_cycles):
        for name, value in (("rows", rows), ("cols", cols), ("lanes", lanes)):
            check_count(name, value)
        check_count("guard_bits", guard_bits, 0, MAX_GUARD_BITS)
        check_count("zero_block_cycles", zero_block_cycles, 1, 1)
        self.rows, self.cols, self.lanes = rows, cols, lanes
        self.guard_bits, self.zero_block_cycles = guard_bits, zero_block_cycles
        self.latency = pe_latency(lanes) + ROUNDER_LATENCY + QUEUE_LATENCY
        self.fill = tile_fill(lanes)
        super().__init__({
            "steps": In(stream.Signature(step_layout(rows, cols, lanes, "bf16"))),
            "results": Out(stream.Signature(result_layout(rows, cols, cycles=True))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.front_end = front_end = FrontEnd(self.rows, self.cols, self.lanes, self.guard_bits)
        m.submodules.output = output = OutputStage(self.rows, self.cols, self.lanes, self.guard_bits)
        wiring.connect(m, wiring.flipped(self.steps), front_end.steps)
        wiring.connect(m, output.results, wiring.flipped(self.results))

        sequencers, pes = [], []
        for r in range(self.rows):
            for c in range(self.cols):
                sequencer = m.submodules[f"sequencer{r}_{c}"] = Sequencer(self.zero_block_cycles)
                pe = m.submodules[f"pe{r}_{c}"] = PE(self.lanes, self.guard_bits)
                step = front_end.scheduled[r][c]
                wiring.connect(m, sequencer.control, pe.control)
                m.d.comb += [
                    sequencer.valid.eq(step.valid),
                    sequencer.last.eq(step.payload.last),
                    sequencer.more.eq(step.payload.more),
                    sequencer.room.eq(output.room[r][c]),
                    step.ready.eq(sequencer.ready),
                    pe.step.eq(step.payload.step),
                    output.accumulators[r][c].eq(pe.result),
                ]
                sequencers.append(sequencer)
                pes.append(pe)
        m.d.comb += [
            output.reserve.eq(sequencers[0].control.pass_end),  # the sequencers and PEs run in lockstep
            output.capture.eq(pes[0].done),
        ]

        # the pass's cycle count travels beside the PEs' pipelines
        m.d.comb += output.cycles.eq(delayed(m, sequencers[0].cycles, pes[0].latency, "pass_cycles"))
        return m

