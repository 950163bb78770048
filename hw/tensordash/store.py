"""TensorDash's operand store: steps written once into H+1 banks, read as a rotated window of H+1 steps."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.tile_stream import step_layout

__all__ = ["StepStore"]


class StepStore(wiring.Component):
    """A circular buffer of 3(H+1) steps whose data never moves once written.

    Position p is entry p // (H+1) of bank p mod (H+1). A write of up to H+1
    consecutive steps and a read of the H+1 steps from ``read_at`` both touch each
    bank at most once, so each bank has one (H+1)-input write mux shared by its
    entries (which only take a write enable) and one 3-input read mux; the banks'
    outputs are rotated into window order by ``read_at mod (H+1)``. This replaces a
    buffer whose every slot is a mux over the slots 1..H+1 behind it.

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

    Ports
    -----
    write : In(1)
        Store ``count`` steps at ``write_at`` onwards this cycle.
    write_at : In(range(depth))
        Position of the first step written.
    count : In(range(lookahead + 2))
        Steps written, 0..H+1.
    steps : In(ArrayLayout(step_layout(rows, cols, lanes, fmt), lookahead + 1))
        The steps to write (those beyond ``count`` are ignored).
    read_at : In(range(depth))
        Position of the window's first step.
    window : Out(ArrayLayout(step_layout(rows, cols, lanes, fmt), lookahead + 1))
        The steps at ``read_at`` .. ``read_at + H`` (modulo ``depth``), combinational.
    """

    def __init__(self, rows=1, cols=1, lanes=16, lookahead=2, fmt="bf16"):
        if not isinstance(lookahead, int) or lookahead < 0:
            raise ValueError(f"TensorDash lookahead must be a non-negative integer, not {lookahead!r}")
        self.lookahead = lookahead
        self.depth = depth = 3 * (lookahead + 1)
        layout = step_layout(rows, cols, lanes, float_format(fmt))
        self.positions = [Signal(layout, name=f"position{p}") for p in range(depth)]
        steps = data.ArrayLayout(layout, lookahead + 1)
        super().__init__({
            "write": In(1),
            "write_at": In(range(depth)),
            "count": In(range(lookahead + 2)),
            "steps": In(steps),
            "read_at": In(range(depth)),
            "window": Out(steps),
        })

    def elaborate(self, platform):
        m = Module()
        banks = self.lookahead + 1
        entries = self.depth // banks
        first_bank, first_entry = self.write_at % banks, self.write_at // banks
        read_bank, read_entry = self.read_at % banks, self.read_at // banks
        outputs = []
        for bank in range(banks):
            stored = self.positions[bank::banks]
            # The write's step that lands in this bank, and the entry it lands in.
            wrapped = bank < first_bank
            index = Signal(range(banks), name=f"write_index{bank}")
            m.d.comb += index.eq(Mux(wrapped, bank + banks - first_bank, bank - first_bank))
            entry = _next_entry(first_entry, wrapped, entries)
            value = _pick(m, index, list(self.steps), f"write_value{bank}")
            for number, position in enumerate(stored):
                with m.If(self.write & (index < self.count) & (entry == number)):
                    m.d.sync += position.eq(value)
            outputs.append(_pick(m, _next_entry(read_entry, bank < read_bank, entries), stored, f"bank{bank}"))
        for step in range(banks):
            rotated = [outputs[(first + step) % banks] for first in range(banks)]
            m.d.comb += self.window[step].eq(_pick(m, read_bank, rotated, f"window{step}"))
        return m


def _next_entry(entry, wrapped, entries):
    """``entry``, or the one after it (modulo ``entries``) where the position wrapped past the last bank."""
    return Mux(wrapped, Mux(entry == entries - 1, 0, entry + 1), entry)


def _pick(m, index, values, name):
    """``values[index]`` through a mux whose last value is the default (a complete case, for lint)."""
    picked = Signal.like(values[0], name=name)
    with m.Switch(index):
        for number, value in enumerate(values):
            with m.Case(number) if number < len(values) - 1 else m.Default():
                m.d.comb += picked.eq(value)
    return picked
