"""Fmax of the single-cycle loops and units that bound the tiles' clock, each alone on ECP5 through the FPGA flow.

A tile cannot run faster than its slowest one-cycle loop: the fp32 accumulator
(with L = 1, ``acc = acc + sum``, an ``FPAdder`` between one register and itself;
with L interleaved partials, the ``Accumulator``'s loop through its pipelined adder)
and TensorDash's schedule-and-skip loop; nor faster than its slowest unit between
two pipeline registers (an adder-tree level, a multiplier, at each stage count).
This script puts each alone behind the flow's wrapper and prints LUTs, Fmax and
the critical path, so that a pipelining change can be judged in a minute rather
than by routing a whole tile.

    python bench/fpga_units.py [--out build/fpga-units] [--only adder-loop,window-loop] [--seeds K]

With ``--seeds K`` (K > 1) each unit is placed and routed with seeds 1..K after one
synthesis: the row is the seed with the median Fmax, and a last column lists every seed's.
"""

import argparse
from pathlib import Path

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.fpga.compare import breakdown
from dashraker.fpga.flow import MAX_SEEDS, FlowOptions, run_flow
from dashraker.hw.numerics import (FP32_LAYOUT, Accumulator, FixedPointAccumulator, FloatLayout, FPAdder,
                                   FPMultiplier, mac_stages)
from dashraker.hw.numerics.fixed_accumulator import SEGMENTS
from dashraker.hw.tensordash import StagingWindow, chunk_layout
from dashraker.hw.tensordash.window import thread_streams
from dashraker.models.interconnect import T25_PATTERN


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


class AccumulatorAlone(wiring.Component):
    """One of the MAC's accumulators alone (``Accumulator`` or ``FixedPointAccumulator``)."""

    def __init__(self, build):
        self.build = build
        steps = data.StructLayout({"sum": FP32_LAYOUT, "last": 1})
        super().__init__({"steps": In(stream.Signature(steps)), "results": Out(stream.Signature(FP32_LAYOUT))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.accumulate = accumulate = self.build()
        m.d.comb += [
            accumulate.valid.eq(self.steps.valid),
            accumulate.last.eq(self.steps.payload.last),
            accumulate.sum.eq(self.steps.payload.sum),
            self.steps.ready.eq(1),
            self.results.valid.eq(accumulate.result_valid),
            self.results.payload.eq(accumulate.result),
        ]
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
        m.d.sync += [operands.eq(self.steps.payload), self.results.payload.eq(getattr(unit, self.output))]
        return m


class WindowLoop(wiring.Component):
    """TensorDash's staging window of one row: schedule, clear the issued flags, skip steps, once a cycle.

    Only the registered one-hot selects leave (folded to 16 bits), so synthesis drops
    the operand store and the row mux: what remains is the loop through the non-zero flags.
    With two threads (the C-slow window, SPEC section 3) the loop is cut in two, a steps stream per thread.
    """

    def __init__(self, lanes, scheduler="greedy", threads=1):
        self.lanes, self.scheduler, self.threads = lanes, scheduler, threads
        chunks = In(stream.Signature(chunk_layout(1, 1, lanes, 2, "bf16")))
        super().__init__({"steps": chunks if threads == 1 else chunks.array(threads),
                          "results": Out(stream.Signature(data.ArrayLayout(1, 16)))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.window = window = StagingWindow(1, 1, self.lanes, 2, T25_PATTERN, "bf16", self.scheduler,
                                                     threads=self.threads)
        for outer, inner in zip(thread_streams(self.steps, self.threads), window.chunk_streams):
            wiring.connect(m, wiring.flipped(outer), inner)
        selects = window.row_picks.as_value()
        folded = selects[:15]
        for start in range(15, len(selects), 15):
            folded = folded ^ selects[start:start + 15]
        m.d.comb += [window.en.eq(self.results.ready), self.results.valid.eq(window.valid),
                     self.results.payload.eq(Cat(folded, window.last))]
        return m


def _adder(stages):
    return Registered(lambda: FPAdder(stages), "fp32", "sum")


def _multiplier(fmt, stages):
    return Registered(lambda: FPMultiplier(fmt, stages), fmt, "product")


PARTIALS = 6  # the fewest partials whose loop takes the 5-stage adder
PARTIAL_STAGES = mac_stages("bf16", PARTIALS)[2]

UNITS = {
    "adder-loop": ("fp32 accumulator loop (FPAdder, register to itself)", AccumulatorLoop),
    "accumulator": (f"fp32 accumulator, L = {PARTIALS} partials, {PARTIAL_STAGES}-stage adder and combining tree",
                    lambda: AccumulatorAlone(lambda: Accumulator(PARTIALS, PARTIAL_STAGES))),
    "adder": ("fp32 adder between registers (an adder-tree level of L = 1)", lambda: _adder(0)),
    **{f"adder-{stages}": (f"fp32 adder, {stages} stages, between registers", lambda stages=stages: _adder(stages))
       for stages in (2, 3, 4, 5)},
    **{f"mul-{fmt}-{stages}": (f"{fmt} multiplier, {stages} stages, between registers",
                               lambda fmt=fmt, stages=stages: _multiplier(fmt, stages))
       for fmt in ("bf16", "fp32") for stages in (0, 2, 3, 4)},
    "window-loop": ("TensorDash window loop, 16 lanes T<2,5> H=2, one row", lambda: WindowLoop(16)),
    "window-loop-8": ("TensorDash window loop, 8 lanes T<2,5> H=2, one row", lambda: WindowLoop(8)),
    "window-loop-8-threads2": ("TensorDash window loop, 8 lanes T<2,5> H=2, one row, two threads",
                               lambda: WindowLoop(8, threads=2)),
    **{f"window-loop-{lanes}-{scheduler}": (f"TensorDash window loop, {lanes} lanes T<2,5> H=2, one row, {scheduler}",
                                            lambda lanes=lanes, scheduler=scheduler: WindowLoop(lanes, scheduler))
       for lanes in (8, 16) for scheduler in ("separable1", "separable2")},
    "fixed-accumulator": (f"384-bit fixed-point accumulator from 2^-192 (aligning stages, an add loop of {SEGMENTS} "
                          "segments, carry resolution, rounding to fp32; MacUnit's default)",
                          lambda: AccumulatorAlone(FixedPointAccumulator)),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("build/fpga-units"))
    parser.add_argument("--device", default="ecp5-85k")
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(UNITS)}")
    parser.add_argument("--seeds", type=int, default=1, help="placement seeds 1..K per unit (median Fmax reported)")
    args = parser.parse_args()
    if not 1 <= args.seeds <= MAX_SEEDS:
        parser.error(f"--seeds must be 1..{MAX_SEEDS}, not {args.seeds}")
    names = args.only.split(",") if args.only else list(UNITS)
    unknown = [name for name in names if name not in UNITS]
    if unknown:
        parser.error(f"unknown unit {unknown[0]!r}; choose from {', '.join(UNITS)}")

    several = args.seeds > 1
    print("| unit | LUTs | FFs | Fmax MHz | critical path ns (logic + routing) | levels | from -> to |"
          + (" Fmax per seed |" if several else ""))
    print("|---|---|---|---|---|---|---|" + ("---|" if several else ""))
    for name in names:
        title, build = UNITS[name]
        # Flat below the unit, so that logic whose outputs lead nowhere (the window's operand store) is dropped.
        report = run_flow(build(), args.out / name,
                          FlowOptions(device=args.device, keep_depth=1, seeds=args.seeds, jobs=args.seeds),
                          design=name, progress=False)
        parts = breakdown(report)
        path = report["critical_path"]
        print(f"| {title} | {parts['tile_lut']:,} | {parts['tile_ff']:,} | {report['fmax_mhz']:.1f} "
              f"| {path['delay_ns']:.1f} ({path['logic_ns']:.1f} + {path['routing_ns']:.1f}) | {path['logic_levels']} "
              f"| {path['from']} -> {path['to']} |" + (f" {_per_seed(report['seeds'])} |" if several else ""),
              flush=True)


def _per_seed(runs):
    """Every seed's Fmax, as ``seed: MHz`` in seed order."""
    return ", ".join(f"{run['seed']}: {run['fmax_mhz'] or 0:.1f}" for run in runs)


if __name__ == "__main__":
    main()
