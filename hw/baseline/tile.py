"""Dense baseline: an R x C tile of N-lane MAC PEs with stream interfaces."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.numerics import FP32_LAYOUT, FloatLayout, MacUnit, mac_latency

__all__ = ["Tile", "step_layout", "result_layout"]


def step_layout(rows, cols, lanes, fmt):
    """One step of a pass: N operands per row and per column, and the end-of-pass flag."""
    lane_values = data.ArrayLayout(FloatLayout(fmt), lanes)
    return data.StructLayout({
        "rows": data.ArrayLayout(lane_values, rows),
        "cols": data.ArrayLayout(lane_values, cols),
        "last": 1,
    })


def result_layout(rows, cols):
    """The fp32 accumulators of every PE, indexed [row][col]."""
    return data.ArrayLayout(data.ArrayLayout(FP32_LAYOUT, cols), rows)


class Tile(wiring.Component):
    """R x C dense PEs: row r's operands are shared along the row, column c's along the column.

    PE (r, c) accumulates ``rows[r] . cols[c]`` step by step (``MacUnit``). A step is
    accepted every cycle unless a finished pass result waits on a stalled output, so a
    pass of S steps takes S cycles and its result comes out ``latency`` cycles after
    its last step. Each step is registered once before it fans out to the PEs, so the
    producer's wires never join the multipliers' paths. A 1 x 1 tile is the single PE.

    Parameters
    ----------
    rows, cols : int
        PEs per column and per row.
    lanes : int
        MAC lanes N per PE.
    fmt : "bf16" | "fp32"
        Operand format.

    Attributes
    ----------
    latency : int
        Cycles from accepting a pass's last step to its result being valid:
        ``1 + mac_latency(lanes, fmt)``.

    Ports
    -----
    steps : In(stream.Signature(step_layout(rows, cols, lanes, fmt)))
        Operand steps; ``last`` closes a pass.
    results : Out(stream.Signature(result_layout(rows, cols)))
        One transfer per pass: every PE's accumulator.
    """

    def __init__(self, rows=1, cols=1, lanes=16, fmt="bf16"):
        for name, value in (("rows", rows), ("cols", cols), ("lanes", lanes)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Tile {name} must be a positive integer, not {value!r}")
        self.rows, self.cols, self.lanes = rows, cols, lanes
        self.format = float_format(fmt)
        self.latency = 1 + mac_latency(lanes, self.format)
        super().__init__({
            "steps": In(stream.Signature(step_layout(rows, cols, lanes, fmt))),
            "results": Out(stream.Signature(result_layout(rows, cols))),
        })

    def elaborate(self, platform):
        m = Module()
        # Everything advances unless a result is waiting for the consumer.
        enable = ~self.results.valid | self.results.ready
        m.d.comb += self.steps.ready.eq(enable)
        step = Signal.like(self.steps.payload)
        step_valid = Signal()
        with m.If(enable):
            m.d.sync += [step.eq(self.steps.payload), step_valid.eq(self.steps.valid)]
        for row in range(self.rows):
            for col in range(self.cols):
                pe = m.submodules[f"pe{row}_{col}"] = MacUnit(self.lanes, self.format)
                m.d.comb += [
                    pe.en.eq(enable),
                    pe.valid.eq(step_valid),
                    pe.last.eq(step.last),
                    pe.a.eq(step.rows[row]),
                    pe.b.eq(step.cols[col]),
                    self.results.payload[row][col].eq(pe.result),
                ]
                if row == col == 0:
                    m.d.comb += self.results.valid.eq(pe.result_valid)
        return m
