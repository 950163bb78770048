"""The TensorDash tile: staging window, row schedulers, tile-wide step skipping and R x C PEs."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.baseline.tile import result_layout, step_layout
from dashraker.hw.tensordash.pe import PE, pe_latency
from dashraker.hw.tensordash.scheduler import Scheduler, check_parameters
from dashraker.models.tensordash import DEFAULT_PATTERN

__all__ = ["Tile", "chunk_layout", "tile_result_layout", "CYCLE_BITS"]

CYCLE_BITS = 32


def chunk_layout(rows, cols, lanes, lookahead, fmt):
    """One input transfer: up to H+1 consecutive steps (``count`` of them, 1..H+1).

    Each step is the dense baseline's ``step_layout`` (row and column operands and the
    end-of-pass flag ``last``); a chunk may hold the end of one pass and the start
    of the next.
    """
    return data.StructLayout({
        "steps": data.ArrayLayout(step_layout(rows, cols, lanes, fmt), lookahead + 1),
        "count": range(lookahead + 2),
    })


def tile_result_layout(rows, cols):
    """One output transfer per pass: every PE's fp32 accumulator and the pass's scheduled cycles."""
    return data.StructLayout({"sums": result_layout(rows, cols), "cycles": unsigned(CYCLE_BITS)})


class Tile(wiring.Component):
    """R x C TensorDash PEs sharing scheduled operands along rows and partner operands along columns.

    Steps arrive in chunks of up to H+1 into a buffer of 3(H+1) slots whose first
    H+1 slots are the window. Each cycle in which the window holds H+1 steps (or the
    end of a pass) is a scheduled cycle: every row's ``Scheduler`` picks its lanes'
    values, then the window drops the head step and the following steps that are
    now zero in every row, at most H of them and never past the pass's last step.
    Those are exactly the reference model's cycles (``models.tensordash``): a pass
    of S dense steps takes ``cycles`` scheduled cycles, reported with its result.
    ``steps.ready`` depends only on the buffer's occupancy, and a producer that
    offers H+1 steps per transfer keeps the window full, so passes run back to back
    with no idle cycle. Everything stalls while a result waits on a stalled output.

    Flags: a step's value is non-zero when its exponent field is (subnormals are
    zeros, DAZ). The schedule uses only the scheduled (row) operand.

    Parameters
    ----------
    rows, cols : int
        PEs per column and per row (R, C).
    lanes : int
        MAC lanes N per PE.
    lookahead : int
        Lookahead H; the window holds steps t .. t+H.
    pattern : str or sequence of (step_offset, lane_offset)
        Interconnect pattern (default T<2,5>).
    fmt : "bf16" | "fp32"
        Operand format.

    Attributes
    ----------
    latency : int
        Cycles from a pass's last scheduled cycle to its result being valid.
    depth : int
        Buffer slots, 3(H+1).

    Ports
    -----
    steps : In(stream.Signature(chunk_layout(rows, cols, lanes, lookahead, fmt)))
        Operand steps, up to H+1 per transfer; ``last`` closes a pass. Every pass has
        at least one step.
    results : Out(stream.Signature(tile_result_layout(rows, cols)))
        One transfer per pass, in order.
    """

    def __init__(self, rows=1, cols=1, lanes=16, lookahead=2, pattern=DEFAULT_PATTERN, fmt="bf16"):
        for name, value in (("rows", rows), ("cols", cols)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Tile {name} must be a positive integer, not {value!r}")
        self.pattern = check_parameters(lanes, lookahead, pattern)
        self.rows, self.cols, self.lanes, self.lookahead = rows, cols, lanes, lookahead
        self.format = float_format(fmt)
        self.depth = 3 * (lookahead + 1)
        self.latency = pe_latency(lanes)
        super().__init__({
            "steps": In(stream.Signature(chunk_layout(rows, cols, lanes, lookahead, self.format))),
            "results": Out(stream.Signature(tile_result_layout(rows, cols))),
        })

    def elaborate(self, platform):
        m = Module()
        width, depth = self.lookahead + 1, self.depth
        layout = step_layout(self.rows, self.cols, self.lanes, self.format)
        slots = [Signal(layout, name=f"slot{j}") for j in range(depth)]
        flags = [[Signal(self.lanes, name=f"flags{j}_row{r}") for r in range(self.rows)] for j in range(depth)]
        occupancy = Signal(range(depth + 1))
        enable = ~self.results.valid | self.results.ready
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
        ready = Signal()
        m.d.comb += ready.eq((occupancy >= width) | _any(ends))
        fire = ready & enable

        # Row schedulers on the masked window.
        remaining = []
        for r in range(self.rows):
            scheduler = m.submodules[f"scheduler{r}"] = Scheduler(self.lanes, self.lookahead, self.pattern)
            for j in range(width):
                m.d.comb += scheduler.window[j].eq(Mux(in_pass[j], flags[j][r], 0))
            remaining.append(scheduler)

        # Step skipping: consume step j >= 1 while steps 1..j are empty in every row and
        # the pass did not end before it.
        consumed = [Const(1, 1)]
        for j in range(1, width):
            empty = Signal(name=f"empty{j}")
            m.d.comb += empty.eq(~_any(scheduler.remaining[j] != 0 for scheduler in remaining))
            consumed.append(consumed[-1] & empty & ~ends[j - 1])
        advance = Signal(range(width + 1))
        pass_end = Signal()
        m.d.comb += [
            advance.eq(sum(consumed)),
            pass_end.eq(_any(end & take for end, take in zip(ends, consumed))),
        ]
        shift = Mux(fire, advance, 0)

        # Buffer: drop `shift` slots, append the accepted chunk after the rest.
        chunk = self.steps.payload
        with m.Switch(shift):
            for amount in range(width + 1):
                with m.Case(amount):
                    for j in range(depth):
                        self._refill(m, j, j + amount, slots, flags, remaining, in_pass, occupancy, chunk)
        m.d.sync += occupancy.eq(occupancy - shift + Mux(accept, chunk.count, 0))

        # Cycles of the pass so far, delayed beside the PE pipelines.
        count = Signal(CYCLE_BITS)
        with m.If(fire):
            m.d.sync += count.eq(Mux(pass_end, 0, count + 1))
        delayed = count + 1
        for stage in range(self.latency):
            register = Signal(CYCLE_BITS, name=f"cycles{stage}")
            with m.If(enable):
                m.d.sync += register.eq(delayed)
            delayed = register
        m.d.comb += self.results.payload.cycles.eq(delayed)

        for r in range(self.rows):
            for c in range(self.cols):
                pe = m.submodules[f"pe{r}_{c}"] = PE(self.lanes, self.lookahead, self.pattern, self.format)
                m.d.comb += [
                    pe.en.eq(enable),
                    pe.valid.eq(ready),
                    pe.last.eq(pass_end),
                    pe.select.eq(remaining[r].select),
                    self.results.payload.sums[r][c].eq(pe.result),
                ]
                for j in range(width):
                    m.d.comb += [pe.a[j].eq(slots[j].rows[r]), pe.b[j].eq(slots[j].cols[c])]
                if r == c == 0:
                    m.d.comb += self.results.valid.eq(pe.result_valid)
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
