"""The TensorDash tile: a staging window (row schedulers, step skipping, operand store, row muxes) feeding R x C PEs."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.checks import check_count
from dashraker.hw.numerics import mac_latency
from dashraker.hw.numerics.pipeline import delayed
from dashraker.hw.reserved_queue import QUEUE_LATENCY, ReservedQueue
from dashraker.hw.tensordash.pe import PE
from dashraker.hw.tensordash.scheduler import check_parameters
from dashraker.hw.tensordash.window import StagingWindow, check_threads, chunk_layout, thread_streams
from dashraker.hw.tile_stream import CYCLE_BITS, push_results, result_layout

__all__ = ["Tile"]


class Tile(wiring.Component):
    """R x C TensorDash PEs sharing scheduled operands along rows and partner operands along columns.

    The ``StagingWindow`` takes chunks of up to H+1 steps, runs one ``Scheduler`` per
    row and skips steps that are zero in every row; two cycles after each of its
    scheduled cycles it issues every row's scheduled values (one ``OperandMux`` per
    row) and every column's partner window, which each ``PE`` muxes with the same
    selects. Those are exactly the reference
    model's cycles (``models.tensordash``): a pass of S dense steps takes ``cycles``
    scheduled cycles, counted here and reported with its result. A producer that
    offers H+1 steps per transfer keeps the window full, so passes run back to back
    with no idle cycle. Only the window's decisions wait: the PEs run every cycle and
    their results wait in a ``ReservedQueue``, which holds the decisions back while it
    could fill.
    The schedule uses only the scheduled (row) operand.

    Two threads (SPEC section 3) take two pass streams, one per ``steps`` port: a tile's
    stream of passes in the mapper's order goes pass 2k to thread 0 (``steps[0]``), 2k+1 to
    thread 1 (``steps[1]``), as the reference model's ``interleave``. The window decides for
    each thread on alternate cycles, each pass as alone; each PE keeps an accumulator context
    per thread, the pass's cycles are counted per thread, and the thread travels beside the
    PEs' pipeline into the result. Results leave as their passes end, each carrying its
    ``thread``: each thread's in its own order, the two threads' in the order of their passes'
    last decisions (``models.threads.pass_ends`` when both streams keep the window full).

    Parameters
    ----------
    rows, cols : int
        PEs per column and per row (R, C).
    lanes : int
        MAC lanes N per PE.
    lookahead : int
        Lookahead H; the window holds steps t .. t+H.
    pattern : str or sequence of (step_offset, lane_offset)
        Interconnect pattern (``'T<2,5>'``, or the offsets).
    fmt : "bf16" | "fp32"
        Operand format.
    accumulators : int
        Interleaved partial fp32 accumulators L per PE, 0 for the fixed-point one (``MacUnit``).
    scheduler : str
        The row schedulers' algorithm, ``"greedy"`` or a separable allocator (``Scheduler``).
    dot : "tree" | "fused"
        A step's sum: the fp32 adder tree or the fused dot product (``MacUnit``).
    threads : int
        Pass streams sharing the window's loop, 1 or 2 (``StagingWindow``).

    Attributes
    ----------
    pipeline_latency : int
        Cycles from a pass's last scheduled cycle to its result leaving the PEs: the
        window's decision register and its store's read register, then the PE's
        (``mac_latency``).
    latency : int
        Cycles from a pass's last scheduled cycle to its result being valid at an empty
        queue's output: ``pipeline_latency + QUEUE_LATENCY``.

    Ports
    -----
    steps : In(stream.Signature(chunk_layout(rows, cols, lanes, lookahead, fmt)))
        Operand steps, up to H+1 per transfer; ``last`` closes a pass. Every pass has
        at least one step. With two threads an array of two such streams, one per thread.
    results : Out(stream.Signature(result_layout(rows, cols, cycles=True, threads=threads)))
        One transfer per pass, in order (with two threads: as the passes end, each with its ``thread``).
    """

    def __init__(self, rows, cols, lanes, lookahead, pattern, fmt, accumulators, scheduler, dot, threads):
        self.format = float_format(fmt)
        check_count("rows", rows)
        check_count("cols", cols)
        self.scheduler, self.threads = scheduler, check_threads(threads)
        self.pattern = check_parameters(lanes, lookahead, pattern)
        self.rows, self.cols, self.lanes, self.lookahead = rows, cols, lanes, lookahead
        self.accumulators, self.dot = accumulators, dot
        self.pipeline_latency = 2 + mac_latency(lanes, self.format, accumulators, dot)
        self.latency = self.pipeline_latency + QUEUE_LATENCY
        chunks = In(stream.Signature(chunk_layout(rows, cols, lanes, lookahead, self.format)))
        super().__init__({
            "steps": chunks if threads == 1 else chunks.array(threads),
            "results": Out(stream.Signature(result_layout(rows, cols, cycles=True, threads=threads))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.window = window = StagingWindow(
            self.rows, self.cols, self.lanes, self.lookahead, self.pattern, self.format, self.scheduler,
            threads=self.threads)
        for steps, window_steps in zip(thread_streams(self.steps, self.threads), window.chunk_streams):
            wiring.connect(m, wiring.flipped(steps), window_steps)
        # The queue counts a pass's end from the window's registered decision, a cycle late, so that the
        # scheduler's end-of-pass logic stays off its counter; three spare results let the PEs run that much
        # further ahead of a stalled consumer.
        layout = result_layout(self.rows, self.cols, cycles=True, threads=self.threads)
        m.submodules.queue = queue = ReservedQueue(layout, in_flight=self.pipeline_latency + 1, late=1, spare=3)
        wiring.connect(m, queue.pop, wiring.flipped(self.results))
        m.d.comb += [window.en.eq(queue.room), queue.reserve.eq(window.valid & window.last)]

        # Cycles of the pass so far (counted on the window's registered decisions), delayed beside the PE pipelines.
        pe_delay = mac_latency(self.lanes, self.format, self.accumulators, self.dot)
        m.d.comb += queue.push.payload.cycles.eq(delayed(m, self._pass_cycles(m, window), pe_delay, "cycles"))
        if self.threads > 1:
            m.d.comb += queue.push.payload.thread.eq(delayed(m, window.thread, pe_delay, "result_thread"))

        pes = [[PE(self.lanes, self.lookahead, self.pattern, self.format, self.accumulators, self.dot, self.threads)
                for _ in range(self.cols)] for _ in range(self.rows)]
        for r in range(self.rows):
            for c in range(self.cols):
                pe = m.submodules[f"pe{r}_{c}"] = pes[r][c]
                m.d.comb += [pe.valid.eq(window.valid), pe.last.eq(window.last), pe.picks.eq(window.row_picks[r]),
                             pe.a.eq(window.row_operands[r]), pe.b.eq(window.col_window[c])]
        push_results(m, queue.push, pes)
        return m

    def _pass_cycles(self, m, window):
        """The issued cycle's pass's cycles so far, itself included: one count per thread, the issued thread's."""
        threaded = self.threads > 1
        counts = [Signal(CYCLE_BITS, name=f"count{thread}" if threaded else "count") for thread in range(self.threads)]
        for thread, count in enumerate(counts):
            with m.If(window.valid & (window.thread == thread) if threaded else window.valid):
                m.d.sync += count.eq(Mux(window.last, 0, count + 1))
        return ((Mux(window.thread, counts[1], counts[0]) if threaded else counts[0]) + 1)[:CYCLE_BITS]
