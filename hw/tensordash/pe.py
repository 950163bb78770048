"""A TensorDash PE: its partner-operand mux in front of the shared MAC datapath."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.numerics import FP32_LAYOUT, FloatLayout, MacUnit, mac_latency
from dashraker.hw.tensordash.mux import OperandMux, picks_layout, staging_layout
from dashraker.hw.tensordash.scheduler import check_parameters
from dashraker.hw.tensordash.window import check_threads

__all__ = ["PE"]


class PE(wiring.Component):
    """N MAC lanes fed through the sparse interconnect.

    The scheduled operand arrives already picked by its row's ``OperandMux``
    (``StagingWindow`` builds one per row and broadcasts it); lane i's partner is
    picked from this PE's column window by the PE's own ``OperandMux``, driven by the
    same select, so both operands come from the promoted value's original (step,
    lane). The shared ``MacUnit`` then registers both, multiplies, sums and accumulates.

    Parameters
    ----------
    lanes, lookahead, pattern
        As ``Scheduler``.
    fmt : "bf16" | "fp32"
        Operand format.
    accumulators : int
        Interleaved partial fp32 accumulators L, 0 for the fixed-point one (``MacUnit``).
    dot : "tree" | "fused"
        A step's sum: the fp32 adder tree or the fused dot product (``MacUnit``).
    threads : int
        The window's threads, 1 or 2: with 2 the cycles alternate between them and the PE keeps
        an accumulator context per thread (``MacUnit``'s ``contexts``), each pass's result leaving
        alone as with one thread.

    Attributes
    ----------
    latency : int
        Cycles from a cycle's inputs to the result of a pass ended by it (``MacUnit``'s,
        ``mac_latency``).

    Ports
    -----
    valid : In(1)
        A scheduled cycle is on the inputs.
    last : In(1)
        It ends the pass.
    picks : In(picks_layout(lanes, pattern))
        The row scheduler's selects, one-hot.
    a : In(ArrayLayout(FloatLayout(fmt), lanes))
        The scheduled operand values this PE's row issues for the cycle (the row's
        ``OperandMux``), with ``valid`` and ``picks``.
    b : In(staging_layout(lanes, lookahead, fmt))
        The partner operand's window (this PE's column).
    result : Out(FP32_LAYOUT)
        The accumulated sum of the last finished pass.
    result_valid : Out(1)
        ``result`` holds a new pass result (high for one cycle per pass; ``result`` keeps it until the next).
    """

    def __init__(self, lanes, lookahead, pattern, fmt, accumulators, dot, threads):
        self.pattern = check_parameters(lanes, lookahead, pattern)
        self.lanes, self.lookahead = lanes, lookahead
        self.format = float_format(fmt)
        self.accumulators, self.dot, self.threads = accumulators, dot, check_threads(threads)
        self.latency = mac_latency(lanes, self.format, accumulators, dot)
        super().__init__({
            "valid": In(1),
            "last": In(1),
            "picks": In(picks_layout(lanes, self.pattern)),
            "a": In(data.ArrayLayout(FloatLayout(self.format), lanes)),
            "b": In(staging_layout(lanes, lookahead, self.format)),
            "result": Out(FP32_LAYOUT),
            "result_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.partner_mux = partner = OperandMux(self.lanes, self.lookahead, self.pattern, self.format)
        m.submodules.mac = mac = MacUnit(self.lanes, self.format, self.accumulators, self.dot,
                                                    contexts=self.threads)
        m.d.comb += [
            partner.picks.eq(self.picks),
            partner.window.eq(self.b),
            mac.valid.eq(self.valid),
            mac.last.eq(self.last),
            mac.a.eq(self.a),
            mac.b.eq(partner.operands),
            self.result.eq(mac.result),
            self.result_valid.eq(mac.result_valid),
        ]
        return m
