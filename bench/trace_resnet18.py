"""Records a ResNet-18 trace on digits and prints its cost (time, peak memory, size) and its sparsity early vs late.

    .venv/bin/python bench/trace_resnet18.py OUT [--steps 1,100,300] [--batch-size 16] [--samples 4] [--threads N]

Sparsity is the share of exact zeros per tensor, per layer, at the first and the last
recorded step (columns: input activations, weights, output gradients).
"""

import argparse
import os
import resource
import time
from pathlib import Path

from dashraker.trace import open_trace, record
from dashraker.trace.check import check_trace, format_summary


def _size(folder):
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file())


def _sparsity_table(stats, first, last):
    by_key = {(s.step, s.layer, s.tensor): s.sparsity for s in stats}
    layers = list(dict.fromkeys(s.layer for s in stats))
    tensors = ("input", "weight", "output_grad")
    width = max(len(name) for name in layers)
    header = "  ".join(f"{t[:6] + '@' + str(step):>11}" for t in tensors for step in (first, last))
    lines = [f"{'layer':<{width}}  {header}   (% zeros)"]
    for layer in layers:
        cells = [f"{100 * by_key[step, layer, t]:11.1f}" for t in tensors for step in (first, last)]
        lines.append(f"{layer:<{width}}  " + "  ".join(cells))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--steps", default="1,100,300")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--prune", type=float)
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]

    load = os.getloadavg()[0]
    start = time.perf_counter()
    out = record(
        args.model, "digits", steps, args.samples, args.out, batch_size=args.batch_size, threads=args.threads,
        prune=args.prune, overwrite=True,
    )
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    trace = open_trace(out)
    size = _size(out)
    losses = trace.manifest["losses"]

    start = time.perf_counter()
    result = check_trace(out)
    check_seconds = time.perf_counter() - start
    assert result.ok, result.problems

    print(f"model {args.model}, digits 3x32x32, batch {args.batch_size}, {args.samples} samples saved, steps {steps}")
    print(f"load average at start {load:.1f} on {os.cpu_count()} cores, torch threads {args.threads or 'default'}")
    print(f"record: {seconds:.1f} s for {steps[-1]} optimizer steps ({seconds / steps[-1]:.2f} s/step incl. writing)")
    mib = size / 2**20
    print(f"peak RSS {peak:.0f} MiB; trace {mib:.1f} MiB on disk ({mib / len(steps):.1f} MiB per step)")
    print(f"check (read every file, NaN/Inf and zeros): {check_seconds:.1f} s, {mib / check_seconds:.0f} MiB/s")
    tail = losses[-10:]
    print(f"loss: step 1 {losses[0]:.3f}, mean of the last {len(tail)} steps {sum(tail) / len(tail):.3f}")
    print()
    print(format_summary(result.stats))
    print()
    print(_sparsity_table(result.stats, steps[0], steps[-1]))


if __name__ == "__main__":
    main()
