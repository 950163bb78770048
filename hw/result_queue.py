"""A tile's results queued at its output, so that its pipeline never stalls."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

__all__ = ["ResultQueue", "QUEUE_LATENCY"]

QUEUE_LATENCY = 2  # cycles from a result entering an empty queue to its being valid at the output


class ResultQueue(wiring.Component):
    """Holds a tile's finished results and tells it when it may accept another step.

    A pipeline stalled by its consumer needs one enable for every register, a net
    that spans the whole tile (on ECP5 a 2x2 tile's clock enables took 20-26 ns of
    routing). Instead the pipeline runs freely and its results wait here: a step is
    accepted only while every pass that could end in the pipeline still has room,
    counting the results already queued and the passes whose last step is in
    flight. The queue holds ``in_flight + late + 4`` results, so that a consumer that
    is always ready never throttles the steps (results also spend the queue's own
    latency in it).

    Parameters
    ----------
    layout : Layout
        A result.
    in_flight : int
        The most passes whose last step is accepted but whose result is not yet in
        the queue: the tile's pipeline latency plus one.
    late : int
        Cycles by which ``accepted_last`` follows the acceptance it reports (a tile may
        report a registered copy to keep its own decision logic off the counter); so
        many more results are kept free.

    Ports
    -----
    accepted_last : In(1)
        A pass's last step was accepted this cycle (``late`` cycles ago).
    push : In(stream.Signature(layout))
        Results from the pipeline, one per pass; ``push.ready`` is always high (room is
        reserved when the pass's last step is accepted).
    room : Out(1)
        A step may be accepted this cycle.
    results : Out(stream.Signature(layout))
        The queued results, in order.
    """

    def __init__(self, layout, in_flight, late=0):
        if not isinstance(in_flight, int) or in_flight < 1:
            raise ValueError(f"in_flight must be a positive integer, not {in_flight!r}")
        if not isinstance(late, int) or late < 0:
            raise ValueError(f"late must be a non-negative integer, not {late!r}")
        self.in_flight, self.late, self.depth = in_flight, late, in_flight + late + 4
        super().__init__({
            "accepted_last": In(1),
            "push": In(stream.Signature(layout)),
            "room": Out(1),
            "results": Out(stream.Signature(layout)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=len(self.push.payload.as_value()), depth=self.depth)
        # Results queued or on their way (passes whose last step is accepted): one counter rather than the queue's
        # level plus another count; and ``room`` a register of its own, compared from the counter's next value,
        # so that the tile's handshake starts at a register rather than at the counter's comparison.
        reserved, after = Signal(range(self.depth + 1)), Signal(range(self.depth + 1))
        room = Signal(init=1)
        read = self.results.valid & self.results.ready
        m.d.comb += after.eq(reserved + self.accepted_last - read)
        m.d.sync += [reserved.eq(after), room.eq(after < self.depth - self.late)]
        m.d.comb += [
            self.room.eq(room),
            fifo.w_en.eq(self.push.valid),
            fifo.w_data.eq(self.push.payload),
            self.push.ready.eq(1),
            self.results.valid.eq(fifo.r_rdy),
            self.results.payload.eq(fifo.r_data),
            fifo.r_en.eq(self.results.ready),
        ]
        return m
