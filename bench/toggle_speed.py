"""Co-simulation speed and build time with and without toggle counting: the same tile and stimulus on each model.

Models: ``plain`` (no toggle counting), ``counters`` (counters generated into the model's C++) and
``coverage`` (Verilator's toggle coverage), each at every ``--opt-levels`` C++ level (``dashraker.sim.toggles``).
The stimulus is ``bench/cosim_speed.py``'s (half zeros); each model runs it ``--repeat`` times
(``Cosim.run`` end to end) and the best time counts. A model's build time is printed when this run
built it (a fresh ``--build`` folder builds every one), else ``cached``. For ``counters`` the run is
also timed with counting switched off (``cosim_toggles_enable(0)``: the cost of keeping every net
as a variable, ``--public-flat-rw``, apart from the counting). Reading the counts is timed once, after
the counted run (coverage: Verilator writing its file, then Python parsing it; counters: the first
read, the nets' layout loaded with it). Every model's outputs must agree, and both counting methods must give the same
toggles per instance: each model's counts are of its second run of the stimulus, from the same state.

    .venv/bin/python bench/toggle_speed.py --design baseline --methods plain,counters,coverage --opt-levels 0
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from cosim_speed import stimulus  # noqa: E402

from dashraker.designs import DESIGNS  # noqa: E402
from dashraker.sim import toggles as toggles_module  # noqa: E402
from dashraker.sim.cosim import Cosim  # noqa: E402

METHODS = ("plain", *toggles_module.METHODS)


def _best(cosim, a, b, repeat):
    best, run = None, None
    for _ in range(repeat):
        began = time.perf_counter()
        run = cosim.run(a, b)
        took = time.perf_counter() - began
        best = took if best is None else min(best, took)
    return run, run.sim_cycles / best


def _read_time(cosim):
    """Seconds to read the counts: {"read"} (counters), {"write", "parse"} (coverage); and the counts."""
    began = time.perf_counter()
    if cosim.toggles == "counters":
        counts = cosim.toggle_counts()
        return {"read": time.perf_counter() - began}, counts
    with tempfile.TemporaryDirectory(prefix="dashraker-toggles-") as folder:
        path = os.path.join(folder, "coverage.dat")
        cosim.sim.lib.cosim_toggles_write(path.encode())
        wrote = time.perf_counter()
        counts = toggles_module.per_instance(toggles_module.read_dat(path), cosim.top)
        return {"write": wrote - began, "parse": time.perf_counter() - wrote}, counts


def measure(design, method, opt_level, args):
    """One model's figures: build seconds (None: cached), cycles/s, cycles/s with counting off (counters), read
    seconds, counts and outputs."""
    began = time.perf_counter()
    cosim = Cosim(design, {}, build_root=args.build, optimize=f"-O{opt_level}",
                  toggles=False if method == "plain" else method)
    built = time.perf_counter() - began if cosim.built else None
    tile = cosim.tile
    a, b = stimulus(args.passes, tile.rows, tile.cols, args.steps, tile.lanes)
    row = {"model": method, "opt": opt_level, "build_s": built, "tile": tile}
    if method != "plain":  # counted first, from the same state in every model (its queue's place included)
        cosim.run(a, b)
        cosim.zero_toggles()
        row["outputs"] = cosim.run(a, b).outputs
        row["read_s"], row["counts"] = _read_time(cosim)
    run, row["cycles_s"] = _best(cosim, a, b, args.repeat)
    row.setdefault("outputs", run.outputs)
    if method == "counters":
        cosim.sim.lib.cosim_toggles_enable(0)
        _, row["off_cycles_s"] = _best(cosim, a, b, args.repeat)
        cosim.sim.lib.cosim_toggles_enable(1)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", choices=list(DESIGNS), default="baseline")
    parser.add_argument("--methods", default="plain,counters,coverage", help=f"of {', '.join(METHODS)}")
    parser.add_argument("--opt-levels", default="0", help="C++ optimisation levels, e.g. 0,2")
    parser.add_argument("--passes", type=int, default=32)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--build", default="build/cosim")
    args = parser.parse_args(argv)
    methods = args.methods.split(",")
    if not set(methods) <= set(METHODS):
        parser.error(f"--methods: of {', '.join(METHODS)}, not {args.methods}")
    rows = [measure(args.design, method, int(level), args) for level in args.opt_levels.split(",")
            for method in methods]
    for row in rows[1:]:
        assert np.array_equal(row["outputs"], rows[0]["outputs"]), f"{row['model']} -O{row['opt']}: outputs differ"
    counted = [row for row in rows if "counts" in row]
    differ = []
    for row in counted[1:]:
        first, other = counted[0]["counts"], row["counts"]
        for name in sorted(set(first) | set(other)):
            pair = [(c.toggles, c.bits) if c else None for c in (first.get(name), other.get(name))]
            if pair[0] != pair[1]:
                differ.append(f"{row['model']} -O{row['opt']} against {counted[0]['model']} -O{counted[0]['opt']}, "
                              f"instance {name!r}: (toggles, bits) {pair[1]} against {pair[0]}")
    tile = rows[0]["tile"]
    plain = {row["opt"]: row["cycles_s"] for row in rows if row["model"] == "plain"}
    print(f"{args.design} {tile.rows}x{tile.cols} tile, {tile.lanes} lanes, {args.passes} passes of {args.steps} "
          f"steps, best of {args.repeat}")
    print("| model | C++ | build | cycles/s | slower than plain | counting off, cycles/s | reading the counts |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        speed = row["cycles_s"]
        build = "cached" if row["build_s"] is None else f"{row['build_s']:.0f} s"
        slower = f"{plain[row['opt']] / speed:.1f}x" if row["opt"] in plain and row["model"] != "plain" else "-"
        off = f"{row['off_cycles_s']:,.0f}" if "off_cycles_s" in row else "-"
        read = ", ".join(f"{what} {s:.3f} s" for what, s in row["read_s"].items()) if "read_s" in row else "-"
        print(f"| {row['model']} | -O{row['opt']} | {build} | {speed:,.0f} | {slower} | {off} | {read} |")
    if differ:
        sys.exit("toggles differ:\n" + "\n".join(differ))
    if counted:
        counts = counted[0]["counts"]
        print(f"toggles per instance equal across {', '.join(r['model'] + ' -O' + str(r['opt']) for r in counted)} "
              f"({len(counts)} instances, {sum(c.bits for c in counts.values()):,} net bits)")


if __name__ == "__main__":
    main()
