"""TensorDash's operand store: steps written once into H+1 banks, read as a rotated window of H+1 steps."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.numerics import FloatLayout
from dashraker.hw.tensordash.mux import one_hot_mux
from dashraker.hw.tile_stream import step_layout

__all__ = ["StepStore", "ENTRIES"]

ENTRIES = 3  # per bank: the store holds 3(H+1) steps


class StepStore(wiring.Component):
    """A circular buffer of 3(H+1) steps whose data never moves once written.

    Position p is entry p // (H+1) of bank p mod (H+1). Writes append at the
    store's own tail; a write of up to H+1 consecutive steps and a read of the H+1
    steps from a position both touch each bank at most once, so each bank has one
    (H+1)-input write mux shared by its entries (which only take a write enable)
    and one 3-input read mux, and the banks' outputs are rotated into window order.
    Every mux is an AND-OR whose one-hot selects come straight from registers (the
    tail, and the read position registered by ``read``, in a copy per operand value),
    so no address decoding lands in the data bits' logic. The rotated window is
    registered: a read takes a cycle for the store's muxes and leaves the next to its
    users' operand muxes (in one cycle the two took 10-13 ns of routing across a 1x1x8
    tile on ECP5).

    A write lands a cycle after it is offered: the banks' write values and every
    position's write enable (in a copy per operand value, as the read selects) are
    registered first, so that the input handshake (``write``, the producer's valid and
    the window's ready) ends at a few enable registers instead of fanning out to the
    enables of every stored bit. The tail moves at once. No read misses
    a write: the window reads a step two cycles after it is offered at the earliest (the
    flag buffer holds it from the next cycle, whose decision is read the cycle after), a
    cycle after the write lands. No write clobbers a step still to be read either: it
    lands later than an unregistered write, which already came after the step's last read
    (the window register takes a read's data the cycle before the earliest write lands).

    Parameters
    ----------
    rows, cols, lanes, lookahead, fmt
        As ``Tile``.

    Attributes
    ----------
    depth : int
        Positions, 3(H+1).
    positions : list of Signal
        The stored steps by position (read by the formal harness).
    tail_bank, tail_entry : Signal
        The tail (where the next write starts) as one-hot bank and entry (read by the formal harness).
    write_enables : list of list of Signal
        Per position, whether the registered write lands there at the next edge, in a copy per operand value
        (read by the formal harness).
    write_values : list of Signal
        Per bank, the registered value it writes (read by the formal harness).

    Ports
    -----
    write : In(1)
        Append ``count`` steps this cycle.
    count : In(range(lookahead + 2))
        Steps appended, 0..H+1.
    steps : In(ArrayLayout(step_layout(rows, cols, lanes, fmt), lookahead + 1))
        The steps to append (those beyond ``count`` are ignored).
    read : In(1)
        Take ``read_at`` as the window's position (registered).
    read_at : In(range(depth))
        Position of the window's first step.
    window : Out(ArrayLayout(step_layout(rows, cols, lanes, fmt), lookahead + 1))
        The steps from the position of the ``read`` two cycles before, modulo ``depth`` (registered).
    """

    def __init__(self, rows, cols, lanes, lookahead, fmt):
        if not isinstance(lookahead, int) or lookahead < 0:
            raise ValueError(f"TensorDash lookahead must be a non-negative integer, not {lookahead!r}")
        self.lookahead = lookahead
        self.depth = depth = ENTRIES * (lookahead + 1)
        layout = step_layout(rows, cols, lanes, float_format(fmt))
        # Bit ranges of a step with their own read selects and write enables: one per operand value, the last with
        # ``last``.
        value_bits, values = FloatLayout(float_format(fmt)).size, (rows + cols) * lanes
        self._parts = [(value * value_bits, (value + 1) * value_bits if value < values - 1 else layout.size)
                       for value in range(values)]
        self.positions = [Signal(layout, name=f"position{p}") for p in range(depth)]
        self.tail_bank = Signal(lookahead + 1, init=1)
        self.tail_entry = Signal(ENTRIES, init=1)
        self.write_enables = [[Signal(name=f"write_enable{p}_part{part}", attrs={"keep": 1})
                               for part in range(len(self._parts))] for p in range(depth)]
        self.write_values = [Signal(layout, name=f"write_value{bank}") for bank in range(lookahead + 1)]
        steps = data.ArrayLayout(layout, lookahead + 1)
        super().__init__({
            "write": In(1),
            "count": In(range(lookahead + 2)),
            "steps": In(steps),
            "read": In(1),
            "read_at": In(range(depth)),
            "window": Out(steps),
        })

    def elaborate(self, platform):
        m = Module()
        self._write(m, self._tail(m))
        self._read(m)
        return m

    def _tail(self, m):
        """The tail, moved at once by a write; returns its bank's registered copies, one per operand value."""
        banks = self.lookahead + 1
        tail_bank, tail_entry = self.tail_bank, self.tail_entry
        # The tail moves at once; the banks' write muxes take their selects from a copy of the tail's bank per
        # operand value, marked ``keep``: one register drove the muxes of every written bit (12.6 ns of routing in
        # a 1x1x8 tile).
        next_bank, next_entry = Signal.like(tail_bank), Signal.like(tail_entry)
        m.d.comb += [next_bank.eq(tail_bank), next_entry.eq(tail_entry)]
        with m.If(self.write):
            with m.Switch(self.count):
                for count in range(banks + 1):
                    with m.Case(count) if count < banks else m.Default():  # complete case (lint)
                        wraps = _any(tail_bank[banks - count:]) if count else 0
                        m.d.comb += [next_bank.eq(tail_bank.rotate_left(count)),
                                     next_entry.eq(Mux(wraps, tail_entry.rotate_left(1), tail_entry))]
        value_banks = [Signal(banks, init=1, name=f"tail_bank_part{part}", attrs={"keep": 1})
                       for part in range(len(self._parts))]
        m.d.sync += [tail_bank.eq(next_bank), tail_entry.eq(next_entry), *(copy.eq(next_bank) for copy in value_banks)]
        return value_banks

    def _write(self, m, value_banks):
        """The write, landing a cycle after it is offered: the banks' values and the positions' enables registered."""
        banks = self.lookahead + 1
        tail_bank, tail_entry = self.tail_bank, self.tail_entry
        # Write: bank b takes the chunk's step i where the tail's bank is b - i, in the
        # tail's entry, or the next one where the chunk wrapped past the last bank; the value
        # and the enables are registered, and the write lands at the next edge.
        for bank in range(banks):
            for value_bank, (start, stop) in zip(value_banks, self._parts):
                m.d.sync += self.write_values[bank].as_value()[start:stop].eq(one_hot_mux(
                    [value_bank[(bank - i) % banks] for i in range(banks)],
                    [step.as_value()[start:stop] for step in self.steps]))
            takes = [tail_bank[(bank - i) % banks] for i in range(banks)]
            written = Signal(name=f"written{bank}")
            m.d.comb += written.eq(self.write & _any(take & (self.count > i) for i, take in enumerate(takes)))
            wrapped = _any(tail_bank[bank + 1:])
            for entry in range(ENTRIES):
                position = entry * banks + bank
                hit = (~wrapped & tail_entry[entry]) | (wrapped & tail_entry[entry - 1])
                for enable, (start, stop) in zip(self.write_enables[position], self._parts):
                    m.d.sync += enable.eq(written & hit)
                    with m.If(enable):
                        m.d.sync += self.positions[position].as_value()[start:stop].eq(
                            self.write_values[bank].as_value()[start:stop])

    def _read(self, m):
        """The read: ``read_at`` as registered one-hot selects, each bank's entry, the rotation, the window register."""
        banks = self.lookahead + 1
        # Read: the registered position as one-hot selects, then each bank's entry and the rotation. The selects
        # are decoded from a comparison per position (``read_at % banks`` and ``// banks`` became carry chains, 7 ns
        # of the 1x1x8 tile's critical path) and registered in a copy per operand value, marked ``keep`` (the FPGA
        # flow keeps such registers apart): one register selecting a bank's entry for the whole step spanned the
        # tile (7.8 ns of routing).
        at = [self.read_at == position for position in range(self.depth)]
        bank_select = Signal(banks, name="bank_select")
        entry_selects = [Signal(ENTRIES, name=f"entry_select{bank}") for bank in range(banks)]
        m.d.comb += bank_select.eq(Cat(_any(at[bank::banks]) for bank in range(banks)))
        for bank, entry_select in enumerate(entry_selects):
            # A bank before the first one holds the window's later steps: the next entry.
            entries = [(position // banks + (bank < position % banks)) % ENTRIES for position in range(self.depth)]
            m.d.comb += entry_select.eq(Cat(_any(hit for hit, first in zip(at, entries) if first == entry)
                                            for entry in range(ENTRIES)))
        window_parts = [[] for _ in range(banks)]
        for part, (start, stop) in enumerate(self._parts):
            read_bank = Signal(banks, name=f"read_bank_part{part}", attrs={"keep": 1})
            read_entries = [Signal(ENTRIES, name=f"read_entry{bank}_part{part}", attrs={"keep": 1})
                            for bank in range(banks)]
            with m.If(self.read):
                m.d.sync += [read_bank.eq(bank_select),
                             *(read_entry.eq(select) for read_entry, select in zip(read_entries, entry_selects))]
            held = [position.as_value()[start:stop] for position in self.positions]
            outputs = [_one_hot_mux(m, list(read_entry), held[bank::banks], f"bank{bank}_part{part}")
                       for bank, read_entry in enumerate(read_entries)]
            for step in range(banks):
                rotated = [outputs[(first + step) % banks] for first in range(banks)]
                window_parts[step].append(_one_hot_mux(m, list(read_bank), rotated, f"window{step}_part{part}"))
        for step, parts in enumerate(window_parts):
            m.d.sync += self.window[step].eq(Cat(*parts))


def _one_hot_mux(m, selects, values, name):
    """``one_hot_mux`` into a signal named ``name``."""
    picked = Signal(len(values[0]), name=name)
    m.d.comb += picked.eq(one_hot_mux(selects, values))
    return picked


def _any(values):
    """OR of one-bit values (an empty list gives 0)."""
    values = list(values)
    return Cat(*values).any() if values else Const(0, 1)
