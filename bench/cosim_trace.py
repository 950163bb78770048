"""Co-simulate passes of every layer and training operation of a trace on each design; print the agreement table.

For each layer (every ``--layer-stride``-th) and each operation the mapper maps (no input
gradient for the first layer), ``--passes`` passes from pass ``--start`` on are run on the
RTL (pyverilator) and compared with the golden model and the mapper. Exit status 1 on
any mismatch.

    .venv/bin/python bench/cosim_trace.py traces/r18 --passes 12 --rows 2 --cols 2 --lanes 8 [--threads 2]
"""

import argparse
import sys
import time

from tqdm import tqdm

from dashraker.mapping.runner import layer_ops
from dashraker.designs import DESIGNS
from dashraker.sim.cosim import Cosim
from dashraker.sim.cosim_check import CosimReport, cosimulate
from dashraker.trace import open_trace

__all__ = ["main"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--designs", default=",".join(DESIGNS))
    parser.add_argument("--passes", type=int, default=12, help="passes per layer and operation (default 12)")
    parser.add_argument("--start", type=int, default=0, help="first pass of each operation (default 0)")
    parser.add_argument("--layer-stride", type=int, default=1, help="every n-th layer (default all)")
    parser.add_argument("--rows", type=int, default=2)
    parser.add_argument("--cols", type=int, default=2)
    parser.add_argument("--lanes", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="TensorDash's window threads (default 1)")
    parser.add_argument("--build", default="build/cosim")
    args = parser.parse_args(argv)
    trace = open_trace(args.trace)
    step = trace.steps[-1]
    indices = list(range(0, len(trace.layers), args.layer_stride))
    failed = False
    print(f"{trace.path} ({trace.manifest.get('model')}), step {step}, {len(indices)} layers, "
          f"{args.passes} passes per layer and operation from pass {args.start}")
    for design in args.designs.split(","):
        params = {"rows": args.rows, "cols": args.cols, "lanes": args.lanes}
        if design == "tensordash":
            params["threads"] = args.threads
        cosim = Cosim(design, params, build_root=args.build)
        totals = {op: CosimReport(design, "*", op) for op in ("fwd", "bwd_input", "bwd_weight")}
        began = time.perf_counter()
        jobs = [(index, op) for index in indices for op in layer_ops(index, trace.layers[index])]
        for index, op in tqdm(jobs, desc=design, unit="op"):
            layer = trace.layers[index]
            report = cosimulate(cosim, layer, trace.load(layer.name, step), op, args.passes, args.start)
            totals[op].add(report)
            for text in report.problems:
                tqdm.write(f"{design} {layer.name} {op}: {text}")
        wall = time.perf_counter() - began
        threads = f", {args.threads} threads" if "threads" in params else ""
        print(f"\n{design} {args.rows}x{args.cols} tile, {args.lanes} lanes{threads} ({wall:.0f} s in all)")
        print(f"  {'op':11s} {'passes':>7s} {'output mism.':>12s} {'cycle mism.':>11s} {'timing mism.':>12s} "
              f"{'RTL cycles':>10s} {'mapper cycles':>13s} {'dense steps':>11s} {'cycles/s':>10s}")
        for op, report in totals.items():
            failed |= not report.ok
            print(f"  {op:11s} {report.passes:7d} {report.output_mismatches:12d} {report.cycle_mismatches:11d} "
                  f"{report.timing_mismatches:12d} {report.rtl_cycles:10d} {report.mapper_cycles:13d} "
                  f"{report.dense_steps:11d} {report.cycles_per_second:10,.0f}")
        print(f"  total passes {sum(r.passes for r in totals.values())}, "
              f"{'all agree' if all(r.ok for r in totals.values()) else 'MISMATCHES'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
