"""The gate-level charge (``asic.power``) against OpenSTA's ``report_power`` on one mapped tile at a global activity.

OpenSTA's own activity is right when every net switches alike: both are given that activity (toggles per clock
cycle of every net but the clock) and compared by category. Where they differ by their rules rather than by error
(Debian's OpenSTA of 2019 charges an output transition the sum of its arcs' rise and fall energies; the charge, as
today's OpenSTA, their weighted mean; OpenSTA reads its propagated slews, the charge the library's stated one), the
rows say so; the clock pins' internal energy is compared at no activity, where it is OpenSTA's internal power alone.

    .venv/bin/python bench/asic_power_check.py build/asic/baseline-...-target1ns-HASH --top baseline_tile
"""

import argparse
import itertools
import re
import sys
import time
from pathlib import Path

from dashraker.asic.liberty import read_liberty
from dashraker.asic.libraries import library
from dashraker.asic.netlist import Netlist
from dashraker.asic.power import charge
from dashraker.asic.synthesis import flat
from dashraker.asic.timing import sta_power


def _probability(function, names, fixed=None):
    """The probability that ``function`` holds with every pin of ``names`` at duty 0.5 (``fixed`` pins set)."""
    from dashraker.asic.liberty import evaluate

    free = [name for name in names if name not in (fixed or {})]
    hits = sum(evaluate(function, {**(fixed or {}), **dict(zip(free, bits))})
               for bits in itertools.product((0, 1), repeat=len(free)))
    return hits / 2 ** len(free)


def _difference(function, pin):
    """The probability of ``function``'s Boolean difference with respect to ``pin`` (its other pins at duty 0.5):
    how often a change of ``pin`` changes the output."""
    others = [name for name in _names(function) if name != pin]
    changes = sum(_probability(function, [], {**dict(zip(others, bits)), pin: 1})
                  != _probability(function, [], {**dict(zip(others, bits)), pin: 0})
                  for bits in itertools.product((0, 1), repeat=len(others)))
    return changes / 2 ** len(others)


def _names(text):
    return sorted(set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)))


def opensta_2019_internal(netlist, liberty, activity, cycles, slew, clock_pins=False):
    """The internal energy Debian's OpenSTA charges at a global activity, by its rule (search/Power.cc,
    findInternalPower, 0~20191111gitc018cb2) on the charge's tables and loads: per power arc of every pin, the sum
    of its rise and fall energies times a duty (the ``when`` state's probability; without one, the probability of
    the related pin's Boolean difference for an output, 1 from a clock, else 0.5) times the pin's transitions; the
    clock pins (twice a cycle) with ``clock_pins``, else every other pin."""
    total = 0.0
    for cell in netlist.cells:
        library_cell = liberty.cells[cell.type]
        for pin, info in library_cell.pins.items():
            bit = cell.pins.get(pin)
            is_clock = bit == netlist.clock
            if is_clock != clock_pins or (pin not in library_cell.outputs and bit is None):
                continue
            load = netlist.loads.get(bit, 0.0) if pin in library_cell.outputs else 0.0
            for arc in info.internal_power:
                energy = sum(table.lookup(input_transition_time=slew, total_output_net_capacitance=load)
                             for table in (arc.rise, arc.fall) if table)
                if arc.when:
                    duty = _probability(arc.when, _names(arc.when))
                elif arc.related_pin and info.function and arc.related_pin in _names(info.function):
                    duty = _difference(info.function, arc.related_pin)
                elif arc.related_pin and cell.pins.get(arc.related_pin) == netlist.clock:
                    duty = 1.0
                else:
                    duty = 0.5
                total += energy * duty * (2 * cycles if is_clock else activity * cycles)
    return total * liberty.internal_energy_fj


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a mapped tile's folder (dashraker asic's --build/<configuration>)")
    parser.add_argument("--top", required=True, help="its top module (<design>_tile)")
    parser.add_argument("--library", default="nangate45")
    parser.add_argument("--activity", type=float, default=0.2, help="toggles per cycle of every net (default 0.2)")
    parser.add_argument("--period-ns", type=float, default=2.0, help="clock period (default 2 ns)")
    args = parser.parse_args(argv)
    lib = library(args.library)
    liberty = read_liberty(lib.path("liberty"))
    began = time.perf_counter()
    netlist = Netlist(flat(args.folder, args.top, lib, progress=False), args.top, liberty)
    cycles = 1000
    bits = (set(netlist.drivers) | set(netlist.fanout)) - {netlist.clock}
    ours = charge(netlist, dict.fromkeys(bits, args.activity * cycles), cycles, args.period_ns, lib)
    ours_seconds = time.perf_counter() - began
    began = time.perf_counter()
    reports = [sta_power(args.folder / "netlist.v", args.top, lib.path("liberty"), args.period_ns, a,
                         args.folder / f"power-check-{a:g}") for a in (args.activity, 0.0)]
    sta_seconds = time.perf_counter() - began
    to_fj = cycles * args.period_ns * 1e6  # W over the run's ns, in fJ
    theirs, still = ({key: watts * to_fj for key, watts in report.total.items()} for report in reports)
    clock_net = 0.5 * netlist.loads.get(netlist.clock, 0.0) * liberty.voltage ** 2 * 2 * cycles
    rows = [("leakage", ours.total["leakage"], theirs["leakage"], "same rule"),
            ("switching, nets driven by cells", ours.total["switching"], theirs["switching"], "same rule"),
            ("clock pins' internal (OpenSTA: internal at activity 0)", ours.total["clock"] - clock_net,
             still["internal"], "same rule; OpenSTA's ideal clock has no slew, the charge's 0.02 ns"),
            ("other internal", ours.total["internal"], theirs["internal"] - still["internal"],
             "OpenSTA 2019: rise + fall per transition, arcs summed"),
            ("other internal by OpenSTA 2019's rule on the charge's tables",
             opensta_2019_internal(netlist, liberty, args.activity, cycles, lib.slew_ns),
             theirs["internal"] - still["internal"], "its propagated slews")]
    print(f"{args.folder.name}: {len(netlist.cells):,} cells, activity {args.activity:g} per cycle, "
          f"{args.period_ns:g} ns, {cycles} cycles; charge {ours_seconds:.1f} s, OpenSTA {sta_seconds:.1f} s")
    print("| category | charge fJ | OpenSTA fJ | charge / OpenSTA | why they may differ |\n|---|---|---|---|---|")
    for name, mine, sta, why in rows:
        print(f"| {name} | {mine:,.0f} | {sta:,.0f} | {mine / sta if sta else float('nan'):.3f} | {why} |")
    print(f"| (clock net switching, a port's net: not OpenSTA's) | {clock_net:,.0f} | - | - | - |")
    print(f"| (input ports' nets, no driving cell) | {ours.inputs:,.0f} | - | - | - |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
