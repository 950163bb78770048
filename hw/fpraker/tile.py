"""The FPRaker R x C tile: a decode stage, lockstep term-serial PEs, and a rounding output stage."""

from amaranth.hdl import Cat, Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.designs import FPRAKER
from dashraker.hw.fpraker.decoder import Decoder
from dashraker.hw.fpraker.output import OutputStage
from dashraker.hw.fpraker.pe import PE
from dashraker.hw.fpraker.sequencer import Sequencer
from dashraker.hw.tile_stream import result_layout, step_layout

__all__ = ["Tile"]


class Tile(wiring.Component):
    """R x C FPRaker PEs in lockstep: row r's ``a`` operands are shared along the row (term-serial),
    column c's ``b`` operands along the column (bit-parallel).

    Pipeline: the ``Decoder`` decodes each step payload (classification, NAF term
    encoding of ``a``, product exponents and signs, per-PE exponent maximum) into a
    register; the ``Sequencer`` loads a decoded step into the ``PE``s when the previous
    one finishes, so steps follow each other without bubbles; a step lasts the
    maximum over PEs and lanes of the in-bound terms (at least one cycle). A pass's
    accumulators are captured at its last step by the ``OutputStage``, rounded to
    fp32 in its next register and presented on ``results``.

    ``cycles`` counts the cycles the PEs spent on the pass's steps. With
    ``zero_block_cycles=0`` a step without any live lane (in every PE) is not
    counted: it models such steps being skipped before they reach the tile, as
    the golden model's cost does; this RTL still takes one clock to consume it.

    Parameters
    ----------
    rows, cols : int
        PEs per column and per row.
    lanes : int
        Lanes N per PE (default 8).
    guard_bits : int
        G, guard bits of the accumulator window below the fp32 significand (default 3, at most 7).
    zero_block_cycles : 0 | 1
        Cost of an all-zero step (default 1).

    Attributes
    ----------
    latency : int
        Cycles from a pass's last step finishing to its result being valid (2).

    Ports
    -----
    steps : In(stream.Signature(step_layout(rows, cols, lanes, "bf16")))
        One step per transfer: N bf16 operands per row and per column; ``last`` closes a pass.
    results : Out(stream.Signature(result_layout(rows, cols, cycles=True)))
        One transfer per pass: the fp32 ``outputs`` [row][col] and the pass's ``cycles``.
    """

    def __init__(self, rows=1, cols=1, lanes=8, guard_bits=3, zero_block_cycles=1):
        FPRAKER.params(rows=rows, cols=cols, lanes=lanes, guard_bits=guard_bits, zero_block_cycles=zero_block_cycles)
        self.rows, self.cols, self.lanes = rows, cols, lanes
        self.guard_bits, self.zero_block_cycles = guard_bits, zero_block_cycles
        self.latency = 2
        super().__init__({
            "steps": In(stream.Signature(step_layout(rows, cols, lanes, "bf16"))),
            "results": Out(stream.Signature(result_layout(rows, cols, cycles=True))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.decoder = decoder = Decoder(self.rows, self.cols, self.lanes)
        m.submodules.sequencer = sequencer = Sequencer(self.zero_block_cycles)
        m.submodules.output = output = OutputStage(self.rows, self.cols, self.guard_bits)
        wiring.connect(m, wiring.flipped(self.steps), decoder.steps)
        wiring.connect(m, output.results, wiring.flipped(self.results))

        step = decoder.decoded
        m.d.comb += [
            sequencer.valid.eq(step.valid),
            sequencer.last.eq(step.payload.last),
            sequencer.any_live.eq(step.payload.any_live),
            step.ready.eq(sequencer.ready),
            sequencer.capture_ready.eq(output.capture_ready),
            output.capture.eq(sequencer.control.pass_end),
            output.cycles.eq(sequencer.cycles),
        ]
        pes = []
        for r in range(self.rows):
            for c in range(self.cols):
                pe = m.submodules[f"pe{r}_{c}"] = PE(self.lanes, self.guard_bits)
                m.d.comb += [pe.step.eq(step.payload.pes[r][c]), output.accumulators[r][c].eq(pe.result)]
                pes.append(pe)
        wiring.connect(m, sequencer.control, *(pe.control for pe in pes))
        m.d.comb += sequencer.done.eq(~Cat(*(pe.more for pe in pes)).any())
        return m
