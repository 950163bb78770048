"""Validation of the ASIC area measure on blocks of known relative cost, beside Horowitz's 45 nm energy ratios.

Each block is synthesised alone by ``dashraker.fpga.area.measure`` (Yosys generic
gates, CMOS transistors): the bf16 and fp32 multipliers, the fp32 adder against a
32-bit integer adder, and an 8:1 multiplexer (per bit, against a 2:1). The energy
ratios printed beside them come from the mapper's packaged table (horowitz45, 45 nm):
energy and area are different quantities, so they are a sanity check, not a target.

    python bench/area_units.py [--out build/area-units]
"""

import argparse
import time
from pathlib import Path

from amaranth.hdl import Module, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dashraker.fpga.area import measure
from dashraker.hw.numerics import FPAdder, FPMultiplier
from dashraker.hw.verilog import to_verilog
from dashraker.mapping.config import load_energy_table


class IntAdder(wiring.Component):
    """``sum = a + b`` modulo 2**width."""

    def __init__(self, width=32):
        super().__init__({"a": In(width), "b": In(width), "sum": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.sum.eq(self.a + self.b)
        return m


class Mux(wiring.Component):
    """``inputs`` words of ``width`` bits, one picked by ``select``."""

    def __init__(self, inputs, width=16):
        self.inputs = inputs
        super().__init__({"words": In(unsigned(inputs * width)), "select": In(range(inputs)), "out": Out(width)})

    def elaborate(self, platform):
        m = Module()
        width = len(self.out)
        m.d.comb += self.out.eq(self.words.word_select(self.select, width))
        return m


UNITS = {
    "mul_bf16": lambda: FPMultiplier("bf16"),
    "mul_fp32": lambda: FPMultiplier("fp32"),
    "add_fp32": FPAdder,
    "add_int32": lambda: IntAdder(32),
    "mux8_16b": lambda: Mux(8),
    "mux2_16b": lambda: Mux(2),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/area-units"))
    args = parser.parse_args()
    found = {}
    for name, build in UNITS.items():
        start = time.perf_counter()
        area = measure(to_verilog(build(), name), name, args.out / name, progress=False)
        found[name] = area["transistors"]
        print(f"{name:<10} {area['transistors']:>8,} transistors {area['gates']:>9,.0f} GE "
              f"({time.perf_counter() - start:.1f} s)")
    energy = load_energy_table("horowitz45").entries
    print("\nratio                      transistors   horowitz45 energy")
    for label, (a, b) in {"fp32 mul / bf16 mul": ("mul_fp32", "mul_bf16"),
                          "fp32 add / int32 add": ("add_fp32", "add_int32")}.items():
        print(f"{label:<26} {found[a] / found[b]:>11.2f}   {energy[a] / energy[b]:>8.2f}")
    print(f"{'fp32 add / bf16 mul':<26} {found['add_fp32'] / found['mul_bf16']:>11.2f}   "
          f"{energy['add_fp32'] / energy['mul_bf16']:>8.2f}")
    per_bit = found["mux8_16b"] / 16
    print(f"8:1 mux per bit: {per_bit:.1f} transistors ({per_bit / (found['mux2_16b'] / 16):.1f} 2:1 muxes; the "
          f"energy table's derivation assumes 7 2:1 muxes of 6 transistors = 42)")


if __name__ == "__main__":
    main()
