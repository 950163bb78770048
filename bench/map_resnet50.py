"""Records a ResNet-50 224x224 training step, every sample of the batch saved, and maps it on each design; prints wall
time, CPU time and peak memory of the recording and of each design's mapping, and their sum against the issue's targets.

    .venv/bin/python bench/map_resnet50.py [--batch 32] [--image-size 224] [--designs baseline,tensordash,fpraker]
        [--jobs N] [--device cpu|cuda] [--record-device cpu|cuda] [--autocast bf16] [--trace DIR] [--threads N]

The step is optimizer step 1 of ResNet-50 on the digits scaled up to ``--image-size`` (the only
image data bundled: its sparsity is the digits', not ImageNet's), batch ``--batch``, all of its
samples saved, into ``--trace`` (default ``build/bench/resnet50-<batch>-<size>``, recorded afresh
each run). The recording and each design's mapping run in fresh processes, so their wall time, CPU
time (of all their processes) and peak memory (largest resident set of the main process and of one
worker) are their own; the mapping figures are ``map_resnet18.py --one``'s (the packaged
configuration). Targets (issue 53): recording and all three designs in 5 minutes on 2 CPU cores at
batch 32 (FPRaker with ``--device cuda`` in 1 minute), peak memory 8 GiB.
"""

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

TARGET_TOTAL_S = 300  # recording and the three designs, batch 32 at 224x224, 2 CPU cores
TARGET_CUDA_S = {"fpraker": 60}
TARGET_GIB = 8
MAP_ONE = Path(__file__).with_name("map_resnet18.py")


def _peak_gib():
    return max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 2**20


def _record_one(args):
    """Record the step in this process; print wall, CPU, peak memory and the trace's size as one JSON line."""
    from dashraker.trace import record

    start, cpu_start = time.perf_counter(), time.process_time()
    path = record("resnet50", "digits", [1], args.batch, args.trace, batch_size=args.batch, image_size=args.image_size,
                  device=args.record_device, autocast=args.autocast, threads=args.threads, progress=False,
                  overwrite=True)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    size = sum(file.stat().st_size for file in Path(path).rglob("*") if file.is_file())
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_gib": _peak_gib(), "trace_gib": size / 2**30}))


def _child(command):
    done = subprocess.run([sys.executable, *command], check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32, help="batch size, every sample saved (default 32)")
    parser.add_argument("--image-size", type=int, default=224, help="image side (default 224)")
    parser.add_argument("--designs", default="baseline,tensordash,fpraker")
    parser.add_argument("--jobs", type=int, help="mapping processes (default: 2 on the CPU, 1 with a GPU)")
    parser.add_argument("--device", default="cpu", help="where the designs' cost models run: cpu or cuda")
    parser.add_argument("--record-device", default="cpu", help="where the step is recorded: cpu or cuda")
    parser.add_argument("--autocast", help="record under torch.autocast in this dtype (bf16)")
    parser.add_argument("--threads", type=int, help="PyTorch threads of the recording (default: PyTorch's)")
    parser.add_argument("--trace", type=Path, help="trace folder (default build/bench/resnet50-<batch>-<size>)")
    parser.add_argument("--keep", action="store_true", help="keep the trace (default: removed at the end)")
    parser.add_argument("--record-one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.trace = args.trace or Path(f"build/bench/resnet50-{args.batch}-{args.image_size}")
    if args.record_one:
        return _record_one(args)
    jobs = args.jobs or (2 if args.device == "cpu" else 1)
    own = [a for a in sys.argv[1:] if a not in ("--keep",)]
    results = {"record": _child([__file__, *own, "--trace", str(args.trace), "--record-one"])}
    print(f"recorded ResNet-50 step 1, {args.image_size}x{args.image_size}, batch {args.batch}, all samples saved: "
          f"{results['record']['trace_gib']:.2f} GiB trace in {args.trace}", flush=True)
    print(f"{'stage':<11} {'wall s':>8} {'CPU s':>8} {'peak GiB':>8} {'values/CPU s':>12} {'target s':>8}  "
          "speedup fwd/bwd_in/bwd_w/all")
    r = results["record"]
    print(f"{'record':<11} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} {r['peak_gib']:>8.2f} {'-':>12} {'-':>8}",
          flush=True)
    try:
        for design in args.designs.split(","):
            r = results[design] = _child([str(MAP_ONE), "--trace", str(args.trace), "--one", design, "--jobs",
                                          str(jobs), "--device", args.device])
            speedups = "/".join(f"{r['ops'][op]['speedup']:.2f}" for op in ("fwd", "bwd_input", "bwd_weight", "all"))
            target = TARGET_CUDA_S.get(design, "-") if args.device != "cpu" else "-"
            print(f"{design:<11} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} {r['peak_gib']:>8.2f} "
                  f"{r['values'] / r['cpu_s']:>12.3e} {target:>8}  {speedups}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(args.trace, ignore_errors=True)
    wall = sum(r["wall_s"] for r in results.values())
    cpu = sum(r["cpu_s"] for r in results.values())
    peak = max(r["peak_gib"] for r in results.values())
    print(f"{'total':<11} {wall:>8.1f} {cpu:>8.1f} {peak:>8.2f} {'-':>12} {TARGET_TOTAL_S:>8}  "
          f"(targets at batch 32, 224x224, 2 CPU cores: {TARGET_TOTAL_S} s, peak {TARGET_GIB} GiB)")


if __name__ == "__main__":
    main()
