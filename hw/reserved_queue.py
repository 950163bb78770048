"""A queue whose entries are reserved ahead of their pushes, so that the pipeline that fills it never stalls."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["STORAGE_EDGES", "OUTPUT_EDGES", "QUEUE_LATENCY", "ReservedQueue"]

STORAGE_EDGES = 1  # a push written into the storage
OUTPUT_EDGES = 1  # the storage read into the output register (a buffered queue's)
QUEUE_LATENCY = STORAGE_EDGES + OUTPUT_EDGES  # clock edges from a push into an empty buffered queue to ``pop.valid``


class ReservedQueue(wiring.Component):
    """Entries reserved when a pipeline accepts the work that will push them, freed when they are popped.

    A pipeline stalled by its consumer needs one enable for every register, a net that
    spans the whole tile. Instead the pipeline runs freely and what it makes waits here:
    work is accepted only with ``room``, and its acceptance reserves an entry
    (``reserve``), so every push finds one free. The storage is therefore written on
    every push: its write enable is the pipeline's ``push.valid`` alone (a register in
    every tile), not gated by a comparison of the queue's level as a FIFO's is (on ECP5 such a gate,
    fanned out to the write enables of the distributed RAM, was the 2x2x8 baseline
    tile's critical path). One counter holds the entries reserved and not yet popped;
    ``room`` is a register (a copy per consumer of it, marked ``keep`` when there are
    several), compared from the counter's next value (from its value with
    ``room_late``), so that the pipeline's handshake starts at a register.

    The depth is the sum of named terms: ``in_flight + latency + room_late + spare``.
    With a consumer that is always ready and an acceptance every cycle, ``in_flight``
    entries are reserved but not pushed, ``latency`` are pushed but not yet out, and
    the ``room_late`` cycles by which ``room`` follows the counter cost as many more: so
    many entries never throttle the pipeline (``late`` cancels: the counter misses the
    last ``late`` reservations and keeps as many entries free for them). ``spare`` entries more let the pipeline run further ahead
    of a stalled consumer.

    Parameters
    ----------
    layout : Layout
        An entry.
    in_flight : int
        The most entries reserved but not yet pushed: the clock edges from an acceptance
        to its push, plus one.
    late : int
        Cycles by which ``reserve`` follows the acceptance it reports (a pipeline may
        report a registered copy to keep its own decision logic off the counter); so
        many more entries are kept free.
    room_late : 0 or 1
        Cycles by which ``room`` follows the counter: 1 compares the counter's value
        rather than its next one, keeping the reservations and pops of the cycle off
        ``room``'s registers; so many more entries are kept free.
    spare : int
        Entries beyond those that keep a consumer that is always ready from throttling.
    buffered : bool
        ``pop`` from an output register (``QUEUE_LATENCY`` edges from a push to
        ``pop.valid``; the storage read synchronously, as a block RAM can be) rather
        than read straight from the storage (``STORAGE_EDGES``).
    copies : int
        Copies of ``room``.

    Attributes
    ----------
    depth : int
        Entries.
    latency : int
        Clock edges from a push into an empty queue to its ``pop.valid``.

    Ports
    -----
    reserve : In(1)
        Work was accepted ``late`` cycles ago that will push an entry.
    push : In(stream.Signature(layout))
        One entry per reservation, in the order reserved; ``push.ready`` is always high.
    room : Out(copies)
        Each bit: work may be accepted this cycle.
    pop : Out(stream.Signature(layout))
        The entries, in order.
    """

    def __init__(self, layout, *, in_flight, late=0, room_late=0, spare=0, buffered=True, copies=1):
        if not isinstance(layout, data.Layout):
            raise TypeError(f"layout must be a data.Layout, not {layout!r}")
        for name, value, least in (("in_flight", in_flight, 1), ("late", late, 0), ("spare", spare, 0),
                                   ("copies", copies, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"{name} must be an integer of at least {least}, not {value!r}")
        if room_late not in (0, 1) or isinstance(room_late, bool):
            raise ValueError(f"room_late must be 0 or 1, not {room_late!r}")
        if not isinstance(buffered, bool):
            raise TypeError(f"buffered must be a bool, not {buffered!r}")
        self.in_flight, self.late, self.room_late, self.spare = in_flight, late, room_late, spare
        self.buffered, self.copies = buffered, copies
        self.latency = STORAGE_EDGES + OUTPUT_EDGES * buffered
        self.depth = in_flight + self.latency + room_late + spare
        super().__init__({
            "reserve": In(1),
            "push": In(stream.Signature(layout)),
            "room": Out(copies),
            "pop": Out(stream.Signature(layout)),
        })

    def elaborate(self, platform):
        m = Module()
        popped = self.pop.valid & self.pop.ready
        self._reservations(m, popped)
        if self.buffered:
            # the oldest entry moves to the output register when that is empty or popped (Amaranth's
            # ``SyncFIFOBuffered``): the storage holds ``depth - 1`` entries, the register the last
            fetch = Signal()
            read, stored = self._storage(m, self.depth - 1, fetch, "sync")
            m.d.comb += [fetch.eq((stored != 0) & (~self.pop.valid | self.pop.ready)), read.en.eq(fetch)]
            m.d.sync += self.pop.valid.eq(fetch | (self.pop.valid & ~self.pop.ready))
        else:
            # the oldest entry read straight from the storage (Amaranth's ``SyncFIFO``)
            read, stored = self._storage(m, self.depth, popped, "comb")
            m.d.comb += self.pop.valid.eq(stored != 0)
        m.d.comb += self.pop.payload.eq(read.data)
        return m

    def _reservations(self, m, popped):
        """The counter of entries reserved and not yet popped, and ``room``'s registers."""
        reserved, after = Signal(range(self.depth + 1)), Signal(range(self.depth + 1))
        m.d.comb += after.eq(reserved + self.reserve - popped)
        m.d.sync += reserved.eq(after)
        fits = (after if self.room_late == 0 else reserved) < self.depth - self.late - self.room_late
        attrs = {"keep": 1} if self.copies > 1 else {}
        for copy in range(self.copies):
            room = Signal(init=1, name=f"room{copy}", attrs=attrs)
            m.d.sync += room.eq(fits)
            m.d.comb += self.room[copy].eq(room)

    def _storage(self, m, entries, take, domain):
        """A ring of ``entries`` written on every push; returns its read port (at the oldest entry, which ``take``
        moves on from) and the count of entries it holds."""
        m.submodules.storage = storage = Memory(shape=len(self.push.payload.as_value()), depth=entries, init=[])
        write, read = storage.write_port(), storage.read_port(domain=domain)
        produce, consume, stored = Signal(range(entries)), Signal(range(entries)), Signal(range(entries + 1))
        m.d.comb += [
            self.push.ready.eq(1),
            write.addr.eq(produce),
            write.data.eq(self.push.payload),
            write.en.eq(self.push.valid),
            read.addr.eq(consume),
        ]
        m.d.sync += [
            produce.eq(_next(produce, self.push.valid, entries)),
            consume.eq(_next(consume, take, entries)),
            stored.eq(stored + self.push.valid - take),
        ]
        return read, stored


def _next(position, step, depth):
    """A ring position after ``step`` (0 or 1) moves."""
    return Mux(step, Mux(position == depth - 1, 0, position + 1), position)
