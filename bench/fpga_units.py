"""Fmax of the single-cycle loops and units that bound the tiles' clock, each alone on ECP5 through the FPGA flow.

A tile cannot run faster than its slowest one-cycle loop: the fp32 accumulator
(``acc = acc + sum``, an ``FPAdder`` between one register and itself, as SPEC
section 2 orders the additions) and TensorDash's schedule-and-skip loop; nor faster
than its slowest unit between two pipeline registers (an adder-tree level, a
multiplier). This script puts each alone behind the flow's wrapper and prints
LUTs, Fmax and the critical path, so that a pipelining change can be judged in a
minute rather than by routing a whole tile.

    python bench/fpga_units.py [--out build/fpga-units] [--only adder-loop,window-loop]
"""

import argparse
from pathlib import Path

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.fpga.compare import breakdown
from dashraker.fpga.flow import run_flow
from dashraker.hw.numerics import FP32_LAYOUT, FloatLayout, FPAdder, FPMultiplier
from dashraker.hw.tensordash import StagingWindow, chunk_layout


class AccumulatorLoop(wiring.Component):
    """``acc = acc + x`` for every step ``x``: the MAC's accumulator loop alone."""

    def __init__(self):
        super().__init__({"steps": In(stream.Signature(FP32_LAYOUT)), "results": Out(stream.Signature(FP32_LAYOUT))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.add = add = FPAdder()
        accumulator = Signal(FP32_LAYOUT)
        m.d.comb += [add.a.eq(accumulator), add.b.eq(self.steps.payload), self.steps.ready.eq(1),
                     self.results.valid.eq(1), self.results.payload.eq(accumulator)]
        with m.If(self.steps.valid):
            m.d.sync += accumulator.eq(add.sum)
        return m


class Registered(wiring.Component):
    """A two-operand FP unit between an input and an output register (an adder-tree level, a multiplier)."""

    def __init__(self, unit, fmt, output):
        self.unit, self.output = unit, output
        operands = data.StructLayout({"a": FloatLayout(fmt), "b": FloatLayout(fmt)})
        super().__init__({"steps": In(stream.Signature(operands)), "results": Out(stream.Signature(FP32_LAYOUT))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self.unit()
        operands = Signal.like(self.steps.payload)
        m.d.comb += [unit.a.eq(operands.a), unit.b.eq(operands.b), self.steps.ready.eq(1), self.results.valid.eq(1)]
        if getattr(unit, "latency", 0):  # a unit with registers of its own
            m.d.comb += unit.en.eq(1)
        m.d.sync += [operands.eq(self.steps.payload), self.results.payload.eq(getattr(unit, self.output))]
        return m


class WindowLoop(wiring.Component):
    """TensorDash's staging window of one row: schedule, clear the issued flags, skip steps, once a cycle.

    Only the registered one-hot selects leave (folded to 16 bits), so synthesis drops
    the operand store and the row mux: what remains is the loop through the non-zero flags.
    """

    def __init__(self, lanes):
        self.lanes = lanes
        super().__init__({"steps": In(stream.Signature(chunk_layout(1, 1, lanes, 2, "bf16"))),
                          "results": Out(stream.Signature(data.ArrayLayout(1, 16)))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.window = window = StagingWindow(1, 1, self.lanes)
        wiring.connect(m, wiring.flipped(self.steps), window.steps)
        selects = window.picks.as_value()
        folded = selects[:15]
        for start in range(15, len(selects), 15):
            folded = folded ^ selects[start:start + 15]
        m.d.comb += [window.en.eq(self.results.ready), self.results.valid.eq(window.valid),
                     self.results.payload.eq(Cat(folded, window.last))]
        return m


def _multiplier(fmt, registered=False):
    return Registered(lambda: FPMultiplier(fmt, registered=registered), fmt, "product")


UNITS = {
    "adder-loop": ("fp32 accumulator loop (FPAdder, register to itself)", AccumulatorLoop),
    "adder": ("fp32 adder between registers (an adder-tree level)", lambda: Registered(FPAdder, "fp32", "sum")),
    "mul-bf16": ("bf16 multiplier between registers", lambda: _multiplier("bf16")),
    "mul-fp32": ("fp32 multiplier between registers", lambda: _multiplier("fp32")),
    "mul-fp32-registered": ("fp32 multiplier with its own register (as MacUnit uses it)",
                            lambda: _multiplier("fp32", registered=True)),
    "window-loop": ("TensorDash window loop, 16 lanes T<2,5> H=2, one row", lambda: WindowLoop(16)),
    "window-loop-8": ("TensorDash window loop, 8 lanes T<2,5> H=2, one row", lambda: WindowLoop(8)),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("build/fpga-units"))
    parser.add_argument("--device", default="ecp5-85k")
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(UNITS)}")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(UNITS)
    unknown = [name for name in names if name not in UNITS]
    if unknown:
        parser.error(f"unknown unit {unknown[0]!r}; choose from {', '.join(UNITS)}")

    print("| unit | LUTs | FFs | Fmax MHz | critical path ns (logic + routing) | levels | from -> to |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        title, build = UNITS[name]
        # Flat below the unit, so that logic whose outputs lead nowhere (the window's operand store) is dropped.
        report = run_flow(build(), args.device, 100, args.out / name, design=name, keep_depth=1, progress=False)
        parts = breakdown(report)
        path = report["critical_path"]
        print(f"| {title} | {parts['tile_lut']:,} | {parts['tile_ff']:,} | {report['fmax_mhz']:.1f} "
              f"| {path['delay_ns']:.1f} ({path['logic_ns']:.1f} + {path['routing_ns']:.1f}) | {path['logic_levels']} "
              f"| {path['from']} -> {path['to']} |", flush=True)


if __name__ == "__main__":
    main()
