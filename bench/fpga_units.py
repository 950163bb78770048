"""Fmax of the single-cycle loops and units that bound the tiles' clock, each alone on ECP5 through the FPGA flow.

A tile cannot run faster than its slowest one-cycle loop: the fp32 accumulator
(with L = 1, ``acc = acc + sum``, an ``FPAdder`` between one register and itself;
with L interleaved partials, the ``Accumulator``'s loop through its pipelined adder)
and TensorDash's schedule-and-skip loop; nor faster than its slowest unit between
two pipeline registers (an adder-tree level, a multiplier, at each stage count).
This script puts each alone behind the flow's wrapper and prints LUTs, Fmax and
the critical path, so that a pipelining change can be judged in a minute rather
than by routing a whole tile.

    python bench/fpga_units.py [--out build/fpga-units] [--only adder-loop,window-loop]
"""

import argparse
from pathlib import Path

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.fpga.compare import breakdown
from dashraker.fpga.flow import run_flow
from dashraker.designs import BASELINE
from dashraker.hw.numerics import FP32_LAYOUT, Accumulator, FloatLayout, FPAdder, FPMultiplier, mac_stages
from dashraker.hw.numerics.float import canonical_nan, significand
from dashraker.hw.numerics.rounding import leading_zeros, round_nearest_even
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


class PartialAccumulators(wiring.Component):
    """The MAC's ``Accumulator`` alone: L partials through one pipelined adder, combined at the end of each pass."""

    def __init__(self, accumulators, stages):
        self.accumulators, self.stages = accumulators, stages
        steps = data.StructLayout({"sum": FP32_LAYOUT, "last": 1})
        super().__init__({"steps": In(stream.Signature(steps)), "results": Out(stream.Signature(FP32_LAYOUT))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.accumulate = accumulate = Accumulator(self.accumulators, self.stages)
        m.d.comb += [
            accumulate.en.eq(1),
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
        selects = window.row_picks.as_value()
        folded = selects[:15]
        for start in range(15, len(selects), 15):
            folded = folded ^ selects[start:start + 15]
        m.d.comb += [window.en.eq(self.results.ready), self.results.valid.eq(window.valid),
                     self.results.payload.eq(Cat(folded, window.last))]
        return m


class FixedPointAccumulator(wiring.Component):
    """fp32 tree sums added in a wide two's complement frame, the pass's sum rounded once to fp32.

    SPEC section 2's alternative to the fp32 loop, as bench/accumulation_error.py models it. A
    registered shifter aligns each sum to the frame, whose least significant bit weighs 2^``lsb``
    (bits below it dropped, towards zero), and a second stage negates it where it is negative; the
    ``width``-bit add is the only one-cycle loop. A pass's last step sends the sum through six
    registered rounding stages (once per pass: latency, no throughput): magnitude; leading and
    trailing zeros; normalisation by 16 places, then by the rest; rounding to nearest even;
    packing. A sum of 2^(``width`` - 1 + ``lsb``) or more in magnitude, an Inf or a NaN, or a
    running sum out of the frame makes the pass's result the canonical NaN. A result waits in its
    register until taken or replaced by the next pass's.

    Parameters
    ----------
    width : int
        Bits of the accumulator.
    lsb : int
        Exponent of the weight of its least significant bit.

    Ports
    -----
    steps : In(stream.Signature(StructLayout({"sum": FP32_LAYOUT, "last": 1})))
        A tree sum; ``last`` ends the pass. Always ready.
    results : Out(stream.Signature(FP32_LAYOUT))
        Each pass's sum, rounded.
    """

    def __init__(self, width=128, lsb=-64):
        if not isinstance(width, int) or width < 40:
            raise ValueError(f"width must be an integer >= 40 (the rounding shifts 24 bits by 16 places), "
                             f"not {width!r}")
        if not isinstance(lsb, int) or not 0 < width - 1 + lsb + 127 < 255:
            raise ValueError(f"the frame's top 2^(width - 1 + lsb) must be a normal fp32 power of two, not lsb={lsb!r}")
        self.width, self.lsb = width, lsb
        steps = data.StructLayout({"sum": FP32_LAYOUT, "last": 1})
        super().__init__({"steps": In(stream.Signature(steps)), "results": Out(stream.Signature(FP32_LAYOUT))})

    def elaborate(self, platform):
        m = Module()
        width, lsb = self.width, self.lsb
        step = self.steps.payload
        m.d.comb += self.steps.ready.eq(1)

        # align: the significand times 2^(exp - 150 - lsb), as a right shift of it placed above the frame
        shifted = Signal(width)
        shifted_sign = Signal()
        shifted_stage = Signal(3)  # (valid, last, bad) of the step in each aligning stage
        distance = Signal(range(width + 150 + lsb + 1))  # an out-of-range exponent's wraps: its sum is bad anyway
        m.d.comb += distance.eq(width + 150 + lsb - step.sum.exp)
        m.d.sync += [shifted.eq((Cat(Const(0, width), significand(step.sum)) >> distance)[:width]),
                     shifted_sign.eq(step.sum.sign),
                     shifted_stage.eq(Cat(self.steps.valid, step.last, step.sum.exp >= width + 126 + lsb))]
        # then two's complement (a carry chain of its own, out of the loop)
        aligned = Signal(signed(width))
        aligned_stage = Signal(3)
        m.d.sync += [aligned.eq(Mux(shifted_sign, -shifted, shifted)), aligned_stage.eq(shifted_stage)]
        aligned_valid, aligned_last, aligned_bad = aligned_stage

        # the loop: the running sum and whether it has left the frame
        total = Signal(signed(width))
        total_bad = Signal()
        added = Signal(signed(width + 1))
        bad = total_bad | aligned_bad | (added[width] != added[width - 1])
        passed = Signal(signed(width))
        passed_bad = Signal()
        passed_valid = Signal()
        m.d.comb += added.eq(total + aligned)
        m.d.sync += passed_valid.eq(aligned_valid & aligned_last)
        with m.If(aligned_valid & aligned_last):
            m.d.sync += [total.eq(0), total_bad.eq(0), passed.eq(added[:width]), passed_bad.eq(bad)]
        with m.Elif(aligned_valid):
            m.d.sync += [total.eq(added[:width]), total_bad.eq(bad)]

        # rounding, stage 1: sign and magnitude; stage 2: its leading zeros
        sign = Signal()
        unsigned_sum = Signal(width)
        rounding = Signal(2)  # (valid, bad) of the pass in each rounding stage
        m.d.sync += [sign.eq(passed < 0), unsigned_sum.eq(Mux(passed < 0, -passed, passed)),
                     rounding.eq(Cat(passed_valid, passed_bad))]
        counted_sign = Signal()
        counted_sum = Signal(width)
        zeros = Signal(range(width + 1))
        trailing = Signal(range(width + 1))
        counted = Signal(2)
        m.d.sync += [counted_sign.eq(sign), counted_sum.eq(unsigned_sum), zeros.eq(leading_zeros(m, unsigned_sum)),
                     trailing.eq(leading_zeros(m, unsigned_sum[::-1])), counted.eq(rounding)]

        # rounding, stage 3: shift the leading one into the top 16 places; the sticky bit: ones below the
        # guard bit (the leading one's place - 24), so more than 25 places from the top after the shift
        coarse = Signal(40)
        fine = Signal(4)
        sticky = Signal()
        exponent = Signal(signed(10))
        coarse_sign = Signal()
        coarse_stage = Signal(2)
        m.d.sync += [coarse.eq((counted_sum << Cat(Const(0, 4), zeros[4:]))[width - 40:]), fine.eq(zeros[:4]),
                     sticky.eq(trailing + zeros < width - 25),
                     exponent.eq(Mux(counted_sum == 0, 0, width - 1 + lsb + 127 - zeros)),
                     coarse_sign.eq(counted_sign), coarse_stage.eq(counted)]

        # rounding, stage 4: the leading one at the top: 24 bits, the guard bit, the sticky bit
        normalised = Signal(26)
        normalised_exponent = Signal(signed(10))
        normalised_sign = Signal()
        normalised_stage = Signal(2)
        m.d.sync += [normalised.eq(Cat(sticky, (coarse << fine)[15:40])), normalised_exponent.eq(exponent),
                     normalised_sign.eq(coarse_sign), normalised_stage.eq(coarse_stage)]

        # rounding, stage 5: to nearest even; then pack (zero and below fp32's normals flush to +0, FTZ)
        mantissa, exponent = round_nearest_even(m, normalised[2:], normalised_exponent, guard=normalised[1],
                                                sticky=normalised[0])
        rounded_mantissa = Signal(24)
        rounded_exponent = Signal(signed(11))
        rounded_sign = Signal()
        rounded_stage = Signal(2)
        m.d.sync += [rounded_mantissa.eq(mantissa), rounded_exponent.eq(exponent), rounded_sign.eq(normalised_sign),
                     rounded_stage.eq(normalised_stage)]
        result = Signal(FP32_LAYOUT)
        with m.If(rounded_stage[1]):
            m.d.comb += result.eq(canonical_nan())
        with m.Elif(rounded_exponent <= 0):
            m.d.comb += result.eq(0)
        with m.Elif(rounded_exponent >= 255):
            m.d.comb += [result.sign.eq(rounded_sign), result.exp.eq(255)]
        with m.Else():
            m.d.comb += [result.sign.eq(rounded_sign), result.exp.eq(rounded_exponent),
                         result.frac.eq(rounded_mantissa[:23])]
        with m.If(self.results.ready):
            m.d.sync += self.results.valid.eq(0)
        with m.If(rounded_stage[0]):
            m.d.sync += [self.results.payload.eq(result), self.results.valid.eq(1)]
        return m


def _adder(stages):
    return Registered(lambda: FPAdder(stages), "fp32", "sum")


def _multiplier(fmt, stages):
    return Registered(lambda: FPMultiplier(fmt, stages), fmt, "product")


ACCUMULATORS = BASELINE.parameter("accumulators").default
ACCUMULATOR_STAGES = mac_stages("bf16", ACCUMULATORS)[2]

UNITS = {
    "adder-loop": ("fp32 accumulator loop (FPAdder, register to itself)", AccumulatorLoop),
    "accumulator": (f"fp32 accumulator, L = {ACCUMULATORS} partials, {ACCUMULATOR_STAGES}-stage adder and combining "
                    "tree (MacUnit's default)", lambda: PartialAccumulators(ACCUMULATORS, ACCUMULATOR_STAGES)),
    "adder": ("fp32 adder between registers (an adder-tree level of L = 1)", lambda: _adder(0)),
    **{f"adder-{stages}": (f"fp32 adder, {stages} stages, between registers", lambda stages=stages: _adder(stages))
       for stages in (2, 3, 4, 5)},
    **{f"mul-{fmt}-{stages}": (f"{fmt} multiplier, {stages} stages, between registers",
                               lambda fmt=fmt, stages=stages: _multiplier(fmt, stages))
       for fmt in ("bf16", "fp32") for stages in (0, 2, 3, 4)},
    "window-loop": ("TensorDash window loop, 16 lanes T<2,5> H=2, one row", lambda: WindowLoop(16)),
    "window-loop-8": ("TensorDash window loop, 8 lanes T<2,5> H=2, one row", lambda: WindowLoop(8)),
    "fixed-accumulator": ("128-bit fixed-point accumulator from 2^-64 (aligning shifter, add loop, rounding to fp32)",
                          FixedPointAccumulator),
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
