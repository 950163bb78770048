"""The FPRaker tile's output stage: a pass's accumulators captured, rounded to fp32 and streamed out."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.designs import FPRAKER
from dashraker.hw.fpraker.rounder import Rounder, accumulator_layout
from dashraker.hw.tile_stream import CYCLE_BITS, result_layout

__all__ = ["OutputStage"]


class OutputStage(wiring.Component):
    """Two registers after the PEs: the captured accumulators of a pass, then its rounded results.

    At ``capture`` the stage takes every PE's accumulator and the pass's cycle count;
    in the next stage each accumulator is rounded to fp32 (``Rounder``, one per PE)
    into the ``results`` register. Results appear two clock edges after their
    capture at the earliest, and the stage holds one captured pass while ``results``
    waits: ``capture_ready`` is low only when both registers are full and
    ``results`` is not taken.

    Parameters
    ----------
    rows, cols : int
        PEs per column and per row.
    guard_bits : int
        G, guard bits of the accumulator window (0..7).

    Ports
    -----
    accumulators : In(ArrayLayout(ArrayLayout(accumulator_layout(guard_bits), cols), rows))
        Every PE's accumulator [row][col]: window, exponent, non-empty and special flags.
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
        accumulators = data.ArrayLayout(data.ArrayLayout(accumulator_layout(guard_bits), cols), rows)
        super().__init__({
            "accumulators": In(accumulators),
            "cycles": In(CYCLE_BITS),
            "capture": In(1),
            "capture_ready": Out(1),
            "results": Out(stream.Signature(result_layout(rows, cols, cycles=True))),
        })

    def elaborate(self, platform):
        m = Module()
        results = self.results
        captured = Signal(self.accumulators.shape())
        captured_cycles = Signal(CYCLE_BITS)
        captured_valid = Signal()
        advance = ~results.valid | results.ready
        m.d.comb += self.capture_ready.eq(~captured_valid | advance)

        rounded = Signal(results.payload.outputs.shape())
        for r in range(self.rows):
            for c in range(self.cols):
                rounder = m.submodules[f"rounder{r}_{c}"] = Rounder(self.guard_bits)
                m.d.comb += [rounder.accumulator.eq(captured[r][c]), rounded[r][c].eq(rounder.result)]

        with m.If(advance):
            m.d.sync += [
                results.valid.eq(captured_valid),
                captured_valid.eq(0),
                results.payload.outputs.eq(rounded),
                results.payload.cycles.eq(captured_cycles),
            ]
        with m.If(self.capture):
            m.d.sync += [captured.eq(self.accumulators), captured_cycles.eq(self.cycles), captured_valid.eq(1)]
        return m
