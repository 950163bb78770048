"""The TensorDash staging window: chunk buffer, row schedulers and tile-wide step skipping (SPEC section 3)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.tile_stream import step_layout
from dashraker.hw.tensordash.pe import staging_layout
from dashraker.hw.tensordash.scheduler import Scheduler, check_parameters, select_layout
from dashraker.models.tensordash import DEFAULT_PATTERN

__all__ = ["StagingWindow", "chunk_layout"]


def chunk_layout(rows, cols, lanes, lookahead, fmt):
    """One input transfer: up to H+1 consecutive steps (``count`` of them, 1..H+1).

    Each step is a ``step_layout`` (row and column operands and the
    end-of-pass flag ``last``); a chunk may hold the end of one pass and the start
    of the next.
    """
    return data.StructLayout({
        "steps": data.ArrayLayout(step_layout(rows, cols, lanes, fmt), lookahead + 1),
        "count": range(lookahead + 2),
    })


class StagingWindow(wiring.Component):
    """Buffers steps, schedules every row's window and advances it, as the reference model's cycles.

    Steps arrive in chunks of up to H+1 into a buffer of 3(H+1) slots whose first
    H+1 slots are the window. A cycle in which the window holds H+1 steps (or the
    end of a pass) is a scheduled cycle (``valid``): every row's ``Scheduler`` picks
    its lanes' values, and, when ``en`` is high, the window drops the head step and
    the following steps that are now zero in every row, at most H of them and never
    past the pass's last step (``last``). ``steps.ready`` depends only on the
    buffer's occupancy; a producer offering H+1 steps per transfer keeps the window
    full. Each slot keeps a non-zero flag per row and lane (exponent field non-zero:
    subnormals are zeros, DAZ); an issued value's flag is cleared, its data stays.

    Parameters
    ----------
    rows, cols, lanes, lookahead, pattern, fmt
        As ``Tile``.

    Attributes
    ----------
    depth : int
        Buffer slots, 3(H+1).
    slots, flags, occupancy : Signal
        The buffer state (steps, per-row non-zero flags, steps held), read by the formal harness.

    Ports
    -----
    en : In(1)
        Advance: the scheduled cycle (if ``valid``) is taken.
    steps : In(stream.Signature(chunk_layout(rows, cols, lanes, lookahead, fmt)))
        Operand steps; ``count`` must be 1..H+1; every pass has at least one step.
    valid : Out(1)
        The window holds a scheduled cycle.
    last : Out(1)
        That cycle ends its pass.
    select : Out(ArrayLayout(ArrayLayout(select_layout(pattern), lanes), rows))
        Every row scheduler's selects.
    row_window : Out(ArrayLayout(staging_layout(lanes, lookahead, fmt), rows))
        Scheduled operand values of the window, per row.
    col_window : Out(ArrayLayout(staging_layout(lanes, lookahead, fmt), cols))
        Partner operand values of the window, per column.
    """

    def __init__(self, rows=1, cols=1, lanes=16, lookahead=2, pattern=DEFAULT_PATTERN, fmt="bf16"):
        self.pattern = check_parameters(lanes, lookahead, pattern)
        self.rows, self.cols, self.lanes, self.lookahead = rows, cols, lanes, lookahead
        self.format = float_format(fmt)
        self.depth = depth = 3 * (lookahead + 1)
        layout = step_layout(rows, cols, lanes, self.format)
        self.slots = [Signal(layout, name=f"slot{j}") for j in range(depth)]
        self.flags = [[Signal(lanes, name=f"flags{j}_row{r}") for r in range(rows)] for j in range(depth)]
        self.occupancy = Signal(range(depth + 1))
        window = staging_layout(lanes, lookahead, self.format)
        super().__init__({
            "en": In(1),
            "steps": In(stream.Signature(chunk_layout(rows, cols, lanes, lookahead, self.format))),
            "valid": Out(1),
            "last": Out(1),
            "select": Out(data.ArrayLayout(data.ArrayLayout(select_layout(self.pattern), lanes), rows)),
            "row_window": Out(data.ArrayLayout(window, rows)),
            "col_window": Out(data.ArrayLayout(window, cols)),
        })

    def elaborate(self, platform):
        m = Module()
        width, depth = self.lookahead + 1, self.depth
        slots, flags, occupancy = self.slots, self.flags, self.occupancy
        m.d.comb += self.steps.ready.eq(occupancy <= depth - width)
        accept = self.steps.valid & self.steps.ready

        # Window slots that belong to the head's pass, and where that pass ends.
        in_pass, ends = [], []
        before_end = Const(1, 1)
        for j in range(width):
            member = Signal(name=f"in_pass{j}")
            m.d.comb += member.eq((occupancy > j) & before_end)
            in_pass.append(member)
            ends.append(member & slots[j].last)
            before_end = before_end & ~slots[j].last
        m.d.comb += self.valid.eq((occupancy >= width) | _any(ends))
        fire = self.valid & self.en

        # Row schedulers on the masked window.
        schedulers = []
        for r in range(self.rows):
            scheduler = m.submodules[f"scheduler{r}"] = Scheduler(self.lanes, self.lookahead, self.pattern)
            for j in range(width):
                m.d.comb += scheduler.window[j].eq(Mux(in_pass[j], flags[j][r], 0))
            schedulers.append(scheduler)
            m.d.comb += self.select[r].eq(scheduler.select)

        # Step skipping: consume step j >= 1 while steps 1..j are empty in every row and
        # the pass did not end before it.
        consumed = [Const(1, 1)]
        for j in range(1, width):
            empty = Signal(name=f"empty{j}")
            m.d.comb += empty.eq(~_any(scheduler.remaining[j] != 0 for scheduler in schedulers))
            consumed.append(consumed[-1] & empty & ~ends[j - 1])
        advance = Signal(range(width + 1))
        m.d.comb += [
            advance.eq(sum(consumed)),
            self.last.eq(_any(end & take for end, take in zip(ends, consumed))),
        ]
        shift = Mux(fire, advance, 0)

        # Buffer: drop `shift` slots, append the accepted chunk after the rest.
        chunk = self.steps.payload
        with m.Switch(shift):
            for amount in range(width + 1):
                with m.Case(amount) if amount < width else m.Default():  # complete case (lint)
                    for j in range(depth):
                        self._refill(m, j, j + amount, slots, flags, schedulers, in_pass, occupancy, chunk)
        m.d.sync += occupancy.eq(occupancy - shift + Mux(accept, chunk.count, 0))

        for j in range(width):
            for r in range(self.rows):
                m.d.comb += self.row_window[r][j].eq(slots[j].rows[r])
            for c in range(self.cols):
                m.d.comb += self.col_window[c][j].eq(slots[j].cols[c])
        return m

    def _refill(self, m, j, source, slots, flags, schedulers, in_pass, occupancy, chunk):
        """Slot j takes buffer slot ``source`` if the buffer holds it, else the chunk's matching step."""
        if source >= self.depth:
            self._take_chunk(m, j, source, slots, flags, occupancy, chunk)
            return
        with m.If(occupancy > source):
            m.d.sync += slots[j].eq(slots[source])
            for r in range(self.rows):
                kept = flags[source][r]
                if source <= self.lookahead and source != j:  # a consumed window: issued values are gone
                    kept = Mux(in_pass[source], schedulers[r].remaining[source], kept)
                m.d.sync += flags[j][r].eq(kept)
        with m.Else():
            self._take_chunk(m, j, source, slots, flags, occupancy, chunk)

    def _take_chunk(self, m, j, source, slots, flags, occupancy, chunk):
        """Slot j takes step ``source - occupancy`` of the incoming chunk (garbage beyond its count is never used)."""
        held_values = range(max(0, source - self.lookahead), min(source, self.depth) + 1)
        with m.Switch(occupancy):
            for held in held_values:
                step = chunk.steps[source - held]
                # The last possible occupancy is the default: the case is complete, for lint.
                with m.Case(held) if held != held_values[-1] else m.Default():
                    m.d.sync += slots[j].eq(step)
                    for r in range(self.rows):
                        nonzero = [step.rows[r][lane].exp != 0 for lane in range(self.lanes)]
                        m.d.sync += flags[j][r].eq(Cat(*nonzero))


def _any(values):
    """OR of one-bit values (an empty list gives 0)."""
    values = list(values)
    return Cat(*values).any() if values else Const(0, 1)
