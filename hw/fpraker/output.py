"""The FPRaker tile's output stage: a pass's accumulators rounded to fp32 and streamed out."""

from amaranth.hdl import EnableInserter, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.designs import FPRAKER
from dashraker.hw.fpraker.rounder import ROUNDER_LATENCY, Rounder, accumulator_layout
from dashraker.hw.tile_stream import CYCLE_BITS, result_layout

__all__ = ["OutputStage"]


class OutputStage(wiring.Component):
    """The pass's accumulators, taken at ``capture``, through one ``Rounder`` per PE into ``results``.

    The rounders' stages and the pass's cycle count beside them advance together
    whenever ``results`` is empty or taken (``capture_ready``); results appear
    ``ROUNDER_LATENCY`` clock edges after their capture at the earliest.

    Parameters
    ----------
    rows, cols : int
        PEs per column and per row.
    guard_bits : int
        G.

    Ports
    -----
    accumulators : In(ArrayLayout(ArrayLayout(accumulator_layout(), cols), rows))
        Every PE's accumulator [row][col].
    cycles : In(32)
        The pass's cycle count.
    capture : In(1)
        Take ``accumulators`` and ``cycles`` at this clock edge (only while ``capture_ready``).
    capture_ready : Out(1)
        A capture at this clock edge is taken.
    results : Out(stream.Signature(result_layout(rows, cols, cycles=True)))
        One transfer per pass: the fp32 ``outputs`` [row][col] and the pass's ``cycles``.
    """

    def __init__(self, rows, cols, guard_bits):
        FPRAKER.params(rows=rows, cols=cols, guard_bits=guard_bits)
        self.rows, self.cols, self.guard_bits = rows, cols, guard_bits
        super().__init__({
            "accumulators": In(data.ArrayLayout(data.ArrayLayout(accumulator_layout(), cols), rows)),
            "cycles": In(CYCLE_BITS),
            "capture": In(1),
            "capture_ready": Out(1),
            "results": Out(stream.Signature(result_layout(rows, cols, cycles=True))),
        })

    def elaborate(self, platform):
        m = Module()
        results = self.results
        advance = Signal()
        m.d.comb += [advance.eq(~results.valid | results.ready), self.capture_ready.eq(advance)]
        for r in range(self.rows):
            for c in range(self.cols):
                rounder = Rounder(self.guard_bits)
                m.submodules[f"rounder{r}_{c}"] = EnableInserter(advance)(rounder)
                m.d.comb += [rounder.valid.eq(self.capture), rounder.accumulator.eq(self.accumulators[r][c]),
                             results.payload.outputs[r][c].eq(rounder.result)]
                if (r, c) == (0, 0):
                    m.d.comb += results.valid.eq(rounder.result_valid)
        cycles = self.cycles
        for _ in range(ROUNDER_LATENCY):
            delayed = Signal(CYCLE_BITS)
            with m.If(advance):
                m.d.sync += delayed.eq(cycles)
            cycles = delayed
        m.d.comb += results.payload.cycles.eq(cycles)
        return m
