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

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.fpga.compare import breakdown
from dashraker.fpga.flow import run_flow
from dashraker.hw.numerics import FP32_LAYOUT, FloatLayout, FPAdder, FPMultiplier
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
    """TensorDash's staging window of one row: schedule, move values, skip steps, once a cycle.

    Only the selects leave (folded to 16 bits), so synthesis drops the operand data
    slots: what remains is the loop through the non-zero flags.
    """

    def __init__(self, lanes):
        self.lanes = lanes
        super().__init__({"steps": In(stream.Signature(chunk_layout(1, 1, lanes, 2, "bf16"))),
                          "results": Out(stream.Signature(data.ArrayLayout(1, 16)))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.window = window = StagingWindow(1, 1, self.lanes)
        wiring.connect(m, wiring.flipped(self.steps), window.steps)
        selects = window.select.as_value()
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
    (bits below it dropped, towards zero); the ``width``-bit add is the only one-cycle loop; a
    pass's last step sends the sum through two registered rounding stages (magnitude and leading
    zeros; normalisation and rounding to nearest even). A sum of 2^(``width`` - 1 + ``lsb``) or
    more in magnitude, an Inf or a NaN, or a running sum out of the frame makes the pass's result
    the canonical NaN. A result waits in its register until taken or replaced by the next pass's.

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
        if not isinstance(width, int) or width < 26:
            raise ValueError(f"width must be an integer >= 26 (an fp32 significand and its sign), not {width!r}")
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
        aligned, aligned_bad, aligned_last, aligned_valid = Signal(signed(width)), Signal(), Signal(), Signal()
        distance = Signal(range(width + 150 + lsb + 1))  # an out-of-range exponent's wraps: its sum is bad anyway
        m.d.comb += distance.eq(width + 150 + lsb - step.sum.exp)
        magnitude = (Cat(Const(0, width), significand(step.sum)) >> distance)[:width]
        m.d.sync += [aligned.eq(Mux(step.sum.sign, -magnitude, magnitude)),
                     aligned_bad.eq(step.sum.exp >= width + 126 + lsb), aligned_last.eq(step.last),
                     aligned_valid.eq(self.steps.valid)]

        # the loop: the running sum and whether it has left the frame
        total, total_bad = Signal(signed(width)), Signal()
        added = Signal(signed(width + 1))
        bad = total_bad | aligned_bad | (added[width] != added[width - 1])
        passed, passed_bad, passed_valid = Signal(signed(width)), Signal(), Signal()
        m.d.comb += added.eq(total + aligned)
        m.d.sync += passed_valid.eq(aligned_valid & aligned_last)
        with m.If(aligned_valid & aligned_last):
            m.d.sync += [total.eq(0), total_bad.eq(0), passed.eq(added[:width]), passed_bad.eq(bad)]
        with m.Elif(aligned_valid):
            m.d.sync += [total.eq(added[:width]), total_bad.eq(bad)]

        # rounding, stage 1: sign, magnitude and its leading zeros
        sign, unsigned_sum, zeros, rounding_bad, rounding_valid = (Signal(), Signal(width), Signal(range(width + 1)),
                                                                   Signal(), Signal())
        absolute = Signal(width)
        m.d.comb += absolute.eq(Mux(passed < 0, -passed, passed))
        m.d.sync += [sign.eq(passed < 0), unsigned_sum.eq(absolute), zeros.eq(leading_zeros(m, absolute)),
                     rounding_bad.eq(passed_bad), rounding_valid.eq(passed_valid)]

        # rounding, stage 2: normalise (the leading one at the top), round to 24 bits, pack
        normalised = Signal(width)
        m.d.comb += normalised.eq(unsigned_sum << zeros)
        exponent = Signal(signed(10))
        m.d.comb += exponent.eq(width - 1 + lsb + 127 - zeros)
        mantissa, rounded_exponent = round_nearest_even(m, normalised[width - 24:], exponent,
                                                        guard=normalised[width - 25],
                                                        sticky=normalised[:width - 25].any())
        result = Signal(FP32_LAYOUT)
        with m.If(rounding_bad):
            m.d.comb += result.eq(canonical_nan())
        with m.Elif((unsigned_sum == 0) | (rounded_exponent <= 0)):  # zero, or below fp32's normals (FTZ)
            m.d.comb += result.eq(0)
        with m.Elif(rounded_exponent >= 255):
            m.d.comb += [result.sign.eq(sign), result.exp.eq(255)]
        with m.Else():
            m.d.comb += [result.sign.eq(sign), result.exp.eq(rounded_exponent), result.frac.eq(mantissa[:23])]
        with m.If(self.results.ready):
            m.d.sync += self.results.valid.eq(0)
        with m.If(rounding_valid):
            m.d.sync += [self.results.payload.eq(result), self.results.valid.eq(1)]
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
        report = run_flow(build(), args.device, 100, args.out / name, design=name, progress=False)
        parts = breakdown(report)
        path = report["critical_path"]
        print(f"| {title} | {parts['tile_lut']:,} | {parts['tile_ff']:,} | {report['fmax_mhz']:.1f} "
              f"| {path['delay_ns']:.1f} ({path['logic_ns']:.1f} + {path['routing_ns']:.1f}) | {path['logic_levels']} "
              f"| {path['from']} -> {path['to']} |", flush=True)


if __name__ == "__main__":
    main()
