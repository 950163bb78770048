"""The FPRaker tile's output stage: a pass's accumulators rounded to fp32, queued and streamed out."""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.checks import check_count
from dashraker.hw.fpraker.bounds import MAX_GUARD_BITS
from dashraker.hw.fpraker.pe import pe_latency
from dashraker.hw.fpraker.rounder import ROUNDER_LATENCY, Rounder, accumulator_layout
from dashraker.hw.numerics.pipeline import delayed
from dashraker.hw.reserved_queue import ReservedQueue
from dashraker.hw.tile_stream import CYCLE_BITS, push_results, result_layout

__all__ = ["OutputStage"]


class OutputStage(wiring.Component):
    """The pass's accumulators, taken at ``capture``, through one ``Rounder`` per PE into a queue of results.

    Nothing here holds the PEs: the rounders always advance, and the sequencers end a
    pass only with ``room``, a reservation of an entry of a ``ReservedQueue``
    (``reserve``) that the result's leaving the queue returns. ``room`` is a register, a
    copy for each PE's sequencer (no logic between the count and the sequencers, one net
    each), compared from the count a cycle before (``room_late=1``: the sequencers'
    ``pass_end`` and the consumer's ``ready`` stay off those registers): it says whether
    two entries were free a cycle before, so that one is still free whatever that cycle
    reserved. Passes run back to back while ``results`` is taken at once. Results appear
    ``ROUNDER_LATENCY + QUEUE_LATENCY`` (``hw.reserved_queue``) clock edges after their capture at the earliest.

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
        # a pass reserves its entry as it ends; its result is pushed after the PEs' and the rounders' pipelines
        self._queue = ReservedQueue(result_layout(rows, cols, cycles=True),
                                    in_flight=pe_latency(lanes) + ROUNDER_LATENCY + 1, room_late=1, spare=1,
                                    copies=rows * cols)
        self.depth = self._queue.depth
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
        m.submodules.queue = queue = self._queue
        rounders = [[Rounder(self.guard_bits) for _ in range(self.cols)] for _ in range(self.rows)]
        for r in range(self.rows):
            for c in range(self.cols):
                rounder = m.submodules[f"rounder{r}_{c}"] = rounders[r][c]
                m.d.comb += [rounder.valid.eq(self.capture), rounder.accumulator.eq(self.accumulators[r][c]),
                             self.room[r][c].eq(queue.room[r * self.cols + c])]
        push_results(m, queue.push, rounders)
        m.d.comb += [
            queue.push.payload.cycles.eq(delayed(m, self.cycles, ROUNDER_LATENCY, "rounding_cycles")),
            queue.reserve.eq(self.reserve),
        ]
        wiring.connect(m, queue.pop, wiring.flipped(self.results))
        return m
