"""Dense baseline: an R x C tile of N-lane MAC PEs with stream interfaces."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.checks import check_count
from dashraker.hw.numerics import MacUnit, mac_latency
from dashraker.hw.reserved_queue import QUEUE_LATENCY, ReservedQueue
from dashraker.hw.tile_stream import push_results, result_layout, step_layout

__all__ = ["Tile"]


class Tile(wiring.Component):
    """R x C dense PEs: row r's operands are shared along the row, column c's along the column.

    PE (r, c) accumulates ``rows[r] . cols[c]`` step by step (``MacUnit``). A step is
    accepted every cycle unless a finished pass result waits on a stalled output, so a
    pass of S steps takes S cycles and its result comes out ``latency`` cycles after
    its last step. Every PE registers the operands it reads (``MacUnit``), so the
    producer's wires never join the multipliers' paths and a row's or column's operand
    reaches each PE from a register of its own. A 1 x 1 tile is the single PE.

    Parameters
    ----------
    rows, cols : int
        PEs per column and per row.
    lanes : int
        MAC lanes N per PE.
    fmt : "bf16" | "fp32"
        Operand format.
    accumulators : int
        Interleaved partial fp32 accumulators L per PE, 0 for the fixed-point one (``MacUnit``).
    dot : "tree" | "fused" | "fma"
        A step's sum: the fp32 adder tree or the fused dot product, or a fused multiply-add per lane into the
        lane's own accumulator (``MacUnit``).

    Attributes
    ----------
    pipeline_latency : int
        Cycles from accepting a pass's last step to its result leaving the PEs:
        ``mac_latency(lanes, fmt, accumulators, dot)``.
    latency : int
        Cycles from accepting a pass's last step to its result being valid at an empty
        queue's output: ``pipeline_latency + QUEUE_LATENCY``.

    Ports
    -----
    steps : In(stream.Signature(step_layout(rows, cols, lanes, fmt)))
        Operand steps; ``last`` closes a pass.
    results : Out(stream.Signature(result_layout(rows, cols)))
        One transfer per pass: every PE's accumulator in ``outputs``.
    """

    def __init__(self, rows, cols, lanes, fmt, accumulators, dot):
        self.format = float_format(fmt)
        check_count("rows", rows)
        check_count("cols", cols)
        self.rows, self.cols, self.lanes, self.accumulators, self.dot = rows, cols, lanes, accumulators, dot
        self.pipeline_latency = mac_latency(lanes, self.format, accumulators, dot)
        self.latency = self.pipeline_latency + QUEUE_LATENCY
        super().__init__({
            "steps": In(stream.Signature(step_layout(rows, cols, lanes, fmt))),
            "results": Out(stream.Signature(result_layout(rows, cols))),
        })

    def elaborate(self, platform):
        m = Module()
        # The queue counts a pass's end from a registered copy of the acceptance, a cycle late, so that the
        # producer's ``valid`` ends at that register rather than running on into the queue's counter (on ECP5 the
        # FPGA wrapper's handshake to the counter took 11.5 ns of routing in the 2x2 tile).
        # Three spare results let the PEs run that much further ahead of a stalled consumer.
        m.submodules.queue = queue = ReservedQueue(result_layout(self.rows, self.cols),
                                                   in_flight=self.pipeline_latency + 1, late=1, spare=3)
        wiring.connect(m, queue.pop, wiring.flipped(self.results))
        step = self.steps.payload
        accept = self.steps.valid & queue.room
        accepted_last = Signal()
        m.d.sync += accepted_last.eq(accept & step.last)
        m.d.comb += [self.steps.ready.eq(queue.room), queue.reserve.eq(accepted_last)]
        pes = [[MacUnit(self.lanes, self.format, self.accumulators, self.dot) for _ in range(self.cols)]
               for _ in range(self.rows)]
        for row in range(self.rows):
            for col in range(self.cols):
                pe = m.submodules[f"pe{row}_{col}"] = pes[row][col]
                m.d.comb += [pe.valid.eq(accept), pe.last.eq(step.last), pe.a.eq(step.rows[row]),
                             pe.b.eq(step.cols[col])]
        push_results(m, queue.push, pes)
        return m
