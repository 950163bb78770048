"""The TensorDash tile: a staging window (row schedulers, step skipping) feeding R x C PEs."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.baseline.tile import result_layout
from dashraker.hw.tensordash.pe import PE, pe_latency
from dashraker.hw.tensordash.scheduler import check_parameters
from dashraker.hw.tensordash.window import StagingWindow, chunk_layout
from dashraker.models.tensordash import DEFAULT_PATTERN

__all__ = ["Tile", "tile_result_layout", "CYCLE_BITS"]

CYCLE_BITS = 32


def tile_result_layout(rows, cols):
    """One output transfer per pass: every PE's fp32 accumulator and the pass's scheduled cycles."""
    return data.StructLayout({"sums": result_layout(rows, cols), "cycles": unsigned(CYCLE_BITS)})


class Tile(wiring.Component):
    """R x C TensorDash PEs sharing scheduled operands along rows and partner operands along columns.

    The ``StagingWindow`` takes chunks of up to H+1 steps, runs one ``Scheduler`` per
    row and skips steps that are zero in every row; each of its scheduled cycles
    drives every PE's operand muxes (``PE``). Those are exactly the reference
    model's cycles (``models.tensordash``): a pass of S dense steps takes ``cycles``
    scheduled cycles, counted here and reported with its result. A producer that
    offers H+1 steps per transfer keeps the window full, so passes run back to back
    with no idle cycle. Everything stalls while a result waits on a stalled output.
    The schedule uses only the scheduled (row) operand.

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
        self.latency = pe_latency(lanes, self.format)
        super().__init__({
            "steps": In(stream.Signature(chunk_layout(rows, cols, lanes, lookahead, self.format))),
            "results": Out(stream.Signature(tile_result_layout(rows, cols))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.window = window = StagingWindow(
            self.rows, self.cols, self.lanes, self.lookahead, self.pattern, self.format)
        wiring.connect(m, wiring.flipped(self.steps), window.steps)
        # Everything advances unless a result is waiting for the consumer.
        enable = ~self.results.valid | self.results.ready
        m.d.comb += window.en.eq(enable)

        # Cycles of the pass so far, delayed beside the PE pipelines.
        count = Signal(CYCLE_BITS)
        with m.If(window.valid & enable):
            m.d.sync += count.eq(Mux(window.last, 0, count + 1))
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
                    pe.valid.eq(window.valid),
                    pe.last.eq(window.last),
                    pe.select.eq(window.select[r]),
                    pe.a.eq(window.row_window[r]),
                    pe.b.eq(window.col_window[c]),
                    self.results.payload.sums[r][c].eq(pe.result),
                ]
                if r == c == 0:
                    m.d.comb += self.results.valid.eq(pe.result_valid)
        return m
