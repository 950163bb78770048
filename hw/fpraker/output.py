"""The FPRaker tile's output stage: a pass's accumulators rounded to fp32, queued and streamed out."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from dashraker.hw.checks import check_count
from dashraker.hw.fpraker.bounds import MAX_GUARD_BITS
from dashraker.hw.fpraker.pe import pe_latency
from dashraker.hw.fpraker.rounder import ROUNDER_LATENCY, Rounder, accumulator_layout
from dashraker.hw.numerics.pipeline import delayed
from dashraker.hw.tile_stream import CYCLE_BITS, result_layout

__all__ = ["QUEUE_LATENCY", "OutputStage"]

QUEUE_LATENCY = 2  # clock edges through the result queue: its memory, then its output register


class OutputStage(wiring.Component):
    """The pass's accumulators, taken at ``capture``, through one ``Rounder`` per PE into a queue of results.

    Nothing here holds the PEs: the rounders always advance, and the sequencers end a
    pass only with ``room``, a reservation of a queue entry (``reserve``) that the
    result's leaving the queue returns. ``room`` is a register, a copy for each PE's
    sequencer (no logic between the count and the sequencers, one net each): it says
    whether two entries were free a cycle before, so that one is still free whatever
    that cycle reserved. The queue holds as many entries as passes can be on their way
    from the sequencers to ``results``, and one for that cycle, so passes run back to
    back while ``results`` is taken at once. Results appear ``ROUNDER_LATENCY + QUEUE_LATENCY`` clock
    edges after their capture at the earliest.

    Parameters
    ----------
    rows, cols : int
        PEs per column and per row.
    lanes : int
        Lanes N per PE (the PEs' latency sizes the queue).
    guard_bits : int
        G.

    Attributes
    ----------
    depth : int
        The queue's entries.

    Ports
    -----
    accumulators : In(ArrayLayout(ArrayLayout(accumulator_layout(), cols), rows))
        Every PE's accumulator [row][col].
    cycles : In(32)
        The pass's cycle count, with ``capture``.
    capture : In(1)
        ``accumulators`` and ``cycles`` hold a pass's: take them.
    reserve : In(1)
        A pass ends in this cycle (the sequencer's ``pass_end``): it takes the ``room``.
    room : Out(ArrayLayout(ArrayLayout(1, cols), rows))
        A queue entry is free for a pass that ends in this cycle: a register per PE [row][col].
    results : Out(stream.Signature(result_layout(rows, cols, cycles=True)))
        One transfer per pass: the fp32 ``outputs`` [row][col] and the pass's ``cycles``.
    """

    def __init__(self, rows, cols, lanes, guard_bits):
        for name, value in (("rows", rows), ("cols", cols), ("lanes", lanes)):
            check_count(name, value)
        check_count("guard_bits", guard_bits, 0, MAX_GUARD_BITS)
        self.rows, self.cols, self.guard_bits = rows, cols, guard_bits
        # passes on their way, the queue's own latency, and the cycle by which ``room`` is late
        self.depth = pe_latency(lanes) + ROUNDER_LATENCY + 5
        super().__init__({
            "accumulators": In(data.ArrayLayout(data.ArrayLayout(accumulator_layout(), cols), rows)),
            "cycles": In(CYCLE_BITS),
            "capture": In(1),
            "reserve": In(1),
            "room": Out(data.ArrayLayout(data.ArrayLayout(1, cols), rows)),
            "results": Out(stream.Signature(result_layout(rows, cols, cycles=True))),
        })

    def elaborate(self, platform):
        m = Module()
        results = self.results
        payload = Signal(results.payload.shape())
        m.submodules.queue = queue = SyncFIFOBuffered(width=len(payload.as_value()), depth=self.depth)
        rounders = []
        for r in range(self.rows):
            for c in range(self.cols):
                rounder = m.submodules[f"rounder{r}_{c}"] = Rounder(self.guard_bits)
                m.d.comb += [rounder.valid.eq(self.capture), rounder.accumulator.eq(self.accumulators[r][c]),
                             payload.outputs[r][c].eq(rounder.result)]
                rounders.append(rounder)
        m.d.comb += [
            payload.cycles.eq(delayed(m, self.cycles, ROUNDER_LATENCY, "rounding_cycles")),
            queue.w_en.eq(rounders[0].result_valid),
            queue.w_data.eq(payload),
            results.valid.eq(queue.r_rdy),
            results.payload.eq(queue.r_data),
            queue.r_en.eq(results.ready),
        ]

        # reservations: free entries, counted where passes end and where results leave
        free = Signal(range(self.depth + 1), init=self.depth)
        taken = results.valid & results.ready
        m.d.sync += free.eq(free - self.reserve + taken)
        for r in range(self.rows):
            for c in range(self.cols):
                room = Signal(init=1, name=f"room{r}_{c}", attrs={"keep": 1})
                m.d.sync += room.eq(free >= 2)
                m.d.comb += self.room[r][c].eq(room)
        return m
