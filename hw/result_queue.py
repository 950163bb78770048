"""A tile's results queued at its output, so that its pipeline never stalls."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
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

    Since room is reserved, a result is written whenever one is pushed: unlike a FIFO's, the
    storage's write enable is the pipeline's ``push.valid`` alone, not gated by a comparison of
    the queue's level (on ECP5 that gate, fanned out to the write enables of the distributed RAM,
    was the 2x2x8 baseline tile's critical path). The storage holds ``depth - 1`` results and an
    output register the last, as Amaranth's ``SyncFIFOBuffered``.

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
        inner = self.depth - 1
        m.submodules.storage = storage = Memory(shape=len(self.push.payload.as_value()), depth=inner, init=[])
        write, read_port = storage.write_port(), storage.read_port(domain="sync")
        # Results queued or on their way (passes whose last step is accepted): one counter rather than the queue's
        # level plus another count; and ``room`` a register of its own, compared from the counter's next value,
        # so that the tile's handshake starts at a register rather than at the counter's comparison.
        reserved, after = Signal(range(self.depth + 1)), Signal(range(self.depth + 1))
        room = Signal(init=1)
        read = self.results.valid & self.results.ready
        m.d.comb += after.eq(reserved + self.accepted_last - read)
        m.d.sync += [reserved.eq(after), room.eq(after < self.depth - self.late)]
        # The storage: written at ``produce`` on every push, moved to the output register from ``consume``.
        produce, consume, stored = Signal(range(inner)), Signal(range(inner)), Signal(range(inner + 1))
        fetch = (stored != 0) & (~self.results.valid | self.results.ready)
        m.d.comb += [
            self.room.eq(room),
            self.push.ready.eq(1),
            write.addr.eq(produce),
            write.data.eq(self.push.payload),
            write.en.eq(self.push.valid),
            read_port.addr.eq(consume),
            read_port.en.eq(fetch),
            self.results.payload.eq(read_port.data),
        ]
        m.d.sync += [
            produce.eq(_next(produce, self.push.valid, inner)),
            consume.eq(_next(consume, fetch, inner)),
            stored.eq(stored + self.push.valid - fetch),
            self.results.valid.eq(fetch | (self.results.valid & ~self.results.ready)),
        ]
        return m


def _next(position, step, depth):
    """A ring position after ``step`` (0 or 1) moves."""
    return Mux(step, Mux(position == depth - 1, 0, position + 1), position)
