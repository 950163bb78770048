"""Simulated cycles per second of the dense baseline tile under cocotb, on Icarus and on Verilator.

    .venv/bin/python bench/baseline_tile_speed.py [--rows 4 --cols 4 --lanes 16 --passes 50]

Builds the tile once per simulator (build time reported apart) and streams back-to-back
passes of 16 steps through the same cocotb testbench as the regression, which checks
every result against the golden model; the golden model's time is included.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

from dashraker.designs import DESIGNS
from dashraker.sim.runner import SIMULATORS, run_tile

TESTBENCH = Path(__file__).resolve().parent.parent / "tests" / "baseline" / "cocotb_baseline_tile.py"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--cols", type=int, default=4)
    parser.add_argument("--lanes", type=int, default=16)
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--passes", type=int, default=50)
    args = parser.parse_args()
    design = DESIGNS["baseline"]
    params = design.params(rows=args.rows, cols=args.cols, lanes=args.lanes, fmt=args.dtype)
    name = f"tile_{args.rows}x{args.cols}x{args.lanes}_{args.dtype}"
    print(f"{name}: {args.passes} passes x 16 steps")
    with tempfile.TemporaryDirectory() as tmp:
        for simulator in SIMULATORS:
            report = Path(tmp) / f"{simulator}.json"
            start = time.perf_counter()
            run_tile(design, params, toplevel=name, test_module=TESTBENCH, build_dir=Path(tmp) / "build",
                     simulator=simulator, testcase="sustained_stream", optimize=True, seed=5,
                     stream_passes=args.passes, speed_report=str(report))
            total = time.perf_counter() - start
            figures = json.loads(report.read_text())
            print(f"{simulator:10s} {figures['cycles'] / figures['seconds']:10.1f} simulated cycles/s "
                  f"({figures['cycles']} cycles in {figures['seconds']:.1f} s; build + run {total:.1f} s)")


if __name__ == "__main__":
    main()
