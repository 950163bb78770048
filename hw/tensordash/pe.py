"""A TensorDash PE: scheduled-operand and partner-operand muxes in front of the shared MAC datapath."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.numerics import FP32_LAYOUT, FloatLayout, MacUnit, mac_latency
from dashraker.hw.tensordash.scheduler import check_parameters, select_layout
from dashraker.models.tensordash import DEFAULT_PATTERN

__all__ = ["PE", "staging_layout", "pe_latency"]


def staging_layout(lanes, lookahead, fmt):
    """Operand values of the window's H+1 steps, one lane array per step."""
    return data.ArrayLayout(data.ArrayLayout(FloatLayout(fmt), lanes), lookahead + 1)


def pe_latency(lanes, fmt="bf16", accumulators=1):
    """Enabled cycles from a PE's inputs to the result of the pass they end: operand registers + MAC."""
    return 1 + mac_latency(lanes, fmt, accumulators)


class PE(wiring.Component):
    """N MAC lanes fed through the sparse interconnect.

    Lane i multiplies the scheduled value at window slot ``(ds, (i + dl) mod N)`` of
    pattern entry ``select[i].index`` by the partner value at the same slot (the
    partner's own 8-input mux, driven by the same select). Idle lanes get +0 * +0, so
    they add +0 to the tree. The muxed operands are registered, then the shared
    ``MacUnit`` multiplies, sums and accumulates.

    Parameters
    ----------
    lanes, lookahead, pattern
        As ``Scheduler``.
    fmt : "bf16" | "fp32"
        Operand format.
    accumulators : int
        Interleaved partial fp32 accumulators L (``MacUnit``).

    Attributes
    ----------
    latency : int
        Enabled cycles from a cycle's inputs to the result of a pass ended by it
        (``pe_latency``: 1 for the operand registers + ``MacUnit``'s).

    Ports
    -----
    en : In(1)
        Pipeline enable: nothing advances while low.
    valid : In(1)
        A scheduled cycle is on the inputs.
    last : In(1)
        It ends the pass.
    select : In(ArrayLayout(select_layout(pattern), lanes))
        The row scheduler's selects.
    a : In(staging_layout(lanes, lookahead, fmt))
        The scheduled operand's window (this PE's row).
    b : In(staging_layout(lanes, lookahead, fmt))
        The partner operand's window (this PE's column).
    result : Out(FP32_LAYOUT)
        The accumulated sum of the last finished pass.
    result_valid : Out(1)
        ``result`` holds a new pass result (held while ``en`` is low).
    """

    def __init__(self, lanes=16, lookahead=2, pattern=DEFAULT_PATTERN, fmt="bf16", accumulators=1):
        self.pattern = check_parameters(lanes, lookahead, pattern)
        self.lanes, self.lookahead = lanes, lookahead
        self.format = float_format(fmt)
        self.accumulators = accumulators
        self.latency = pe_latency(lanes, self.format, accumulators)
        window = staging_layout(lanes, lookahead, self.format)
        super().__init__({
            "en": In(1),
            "valid": In(1),
            "last": In(1),
            "select": In(data.ArrayLayout(select_layout(self.pattern), lanes)),
            "a": In(window),
            "b": In(window),
            "result": Out(FP32_LAYOUT),
            "result_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mac = mac = MacUnit(self.lanes, self.format, self.accumulators)
        operands = data.ArrayLayout(FloatLayout(self.format), self.lanes)
        a, b = Signal(operands), Signal(operands)
        valid, last = Signal(), Signal()
        with m.If(self.en):
            m.d.sync += [valid.eq(self.valid), last.eq(self.last)]
            for lane in range(self.lanes):
                select = self.select[lane]
                with m.If(select.valid):
                    with m.Switch(select.index):
                        for k, (step, offset) in enumerate(self.pattern):
                            source = (lane + offset) % self.lanes
                            # The last index is the default, so the case is complete (lint).
                            with m.Case(k) if k < len(self.pattern) - 1 else m.Default():
                                m.d.sync += [a[lane].eq(self.a[step][source]), b[lane].eq(self.b[step][source])]
                with m.Else():
                    m.d.sync += [a[lane].eq(0), b[lane].eq(0)]
        m.d.comb += [
            mac.en.eq(self.en),
            mac.valid.eq(valid),
            mac.last.eq(last),
            mac.a.eq(a),
            mac.b.eq(b),
            self.result.eq(mac.result),
            self.result_valid.eq(mac.result_valid),
        ]
        return m
