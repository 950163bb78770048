"""Co-simulation speed with and without toggle counting: the same tile, C++ level and stimulus on both models.

The stimulus is ``bench/cosim_speed.py``'s (half zeros); each model runs it ``--repeat`` times
(``Cosim.run`` end to end) and the best time counts; the toggle model's counts are read once
at the end (the cost of reading them is printed apart). Outputs of both models must agree.

    .venv/bin/python bench/toggle_speed.py --design baseline --opt-level 0
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from cosim_speed import stimulus  # noqa: E402

from dashraker.designs import DESIGNS  # noqa: E402
from dashraker.sim.cosim import Cosim  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", choices=list(DESIGNS), default="baseline")
    parser.add_argument("--passes", type=int, default=32)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--opt-level", type=int, default=0)
    parser.add_argument("--build", default="build/cosim")
    args = parser.parse_args(argv)
    speeds, outputs = {}, {}
    for toggles in (False, True):
        cosim = Cosim(args.design, {}, build_root=args.build, optimize=f"-O{args.opt_level}", toggles=toggles)
        tile = cosim.tile
        a, b = stimulus(args.passes, tile.rows, tile.cols, args.steps, tile.lanes)
        best = None
        for _ in range(args.repeat):
            began = time.perf_counter()
            run = cosim.run(a, b)
            took = time.perf_counter() - began
            best = took if best is None else min(best, took)
        speeds[toggles], outputs[toggles] = run.sim_cycles / best, run.outputs
        if toggles:
            began = time.perf_counter()
            counts = cosim.toggle_counts()
            read = time.perf_counter() - began
            print(f"toggle counts read in {read:.2f} s ({len(counts)} instances, "
                  f"{sum(c.bits for c in counts.values()):,} net bits)")
    assert np.array_equal(outputs[False], outputs[True]), "the two models disagree"
    print(f"{args.design} {tile.rows}x{tile.cols} tile, {tile.lanes} lanes, -O{args.opt_level}: "
          f"{speeds[False]:,.0f} cycles/s without toggle counting, {speeds[True]:,.0f} with "
          f"({speeds[False] / speeds[True]:.1f}x slower)")


if __name__ == "__main__":
    main()
