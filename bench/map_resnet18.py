"""Maps a real ResNet-18 training step (batch 16) on each design; prints values scheduled per second, wall time and peak memory.

    .venv/bin/python bench/map_resnet18.py [--trace DIR] [--designs baseline,tensordash,fpraker] [--jobs 2] [--out DIR]

Without ``--trace`` it records one (``build/bench/resnet18``, reused when present): ResNet-18
on the digits data (32x32, CIFAR-shaped) at batch 16, optimizer step 1, all 16 samples. Each
design runs in a fresh process so that its wall time, CPU time and peak memory are its own; both
times cover the mapping call alone (interpreter start and imports excluded), the CPU time of all
its processes (on a shared machine wall time also counts other users' load). Peak
memory is the largest resident set of the main process and of one worker process (the
workers run side by side: at most ``jobs`` of them).
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = {"baseline": 60, "tensordash": 60, "fpraker": 60}
TARGET_GIB = 4


def _cpu_s():
    """CPU seconds of this process and its finished children (the workers are joined when a run ends)."""
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def _one(trace, design, jobs, out):
    """Map the trace on one design in this process; print the figures as one JSON line."""
    from dashraker.mapping.config import load_config
    from dashraker.mapping.report import summary_table, write_reports
    from dashraker.mapping.runner import map_trace, totals

    configs = [load_config(None, design)]
    start, cpu_start = time.perf_counter(), _cpu_s()
    rows = map_trace(trace, configs, jobs=jobs, progress=False)
    wall, cpu = time.perf_counter() - start, _cpu_s() - cpu_start
    sums = totals(rows)
    if out:
        print(summary_table(rows, sums), file=sys.stderr)
        write_reports(Path(out) / design, rows, sums, {"trace": str(trace), "design": design})
    rss = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    ops = {op: {k: sums[design, op][k] for k in ("speedup", "energy_efficiency", "core_energy_efficiency")}
           for op in ("fwd", "bwd_input", "bwd_weight", "all")}  # fmt: skip
    print(json.dumps({"design": design, "wall_s": wall, "values": sums[design, "all"]["values_scheduled"],
                      "cpu_s": cpu, "peak_gib": rss / 2**20, "ops": ops}))  # fmt: skip


def _trace(path):
    from dashraker.trace import record

    if path is None:
        path = Path("build/bench/resnet18")
        if not (path / "manifest.json").is_file():
            print(f"recording a ResNet-18 step (batch 16) into {path} ...", flush=True)
            record("resnet18", "digits", steps=[1], samples=16, out=path, batch_size=16, progress=False)
    return Path(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", help="ResNet-18 trace folder (default: record one into build/bench/resnet18)")
    parser.add_argument("--designs", default="baseline,tensordash,fpraker")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", help="also write each design's reports into OUT/<design>/")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return _one(args.trace, args.one, args.jobs, args.out)
    trace = _trace(args.trace)
    print(f"{'design':<11} {'values/s':>10} {'values/CPU s':>12} {'wall s':>8} {'target s':>8} {'CPU s':>8} "
          f"{'peak GiB':>8}  speedup fwd/bwd_in/bwd_w/all")
    for design in args.designs.split(","):
        command = [sys.executable, __file__, "--trace", str(trace), "--one", design, "--jobs", str(args.jobs)]
        command += ["--out", args.out] if args.out else []
        done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        speedups = "/".join(f"{r['ops'][op]['speedup']:.2f}" for op in ("fwd", "bwd_input", "bwd_weight", "all"))
        print(f"{design:<11} {r['values'] / r['wall_s']:>10.3e} {r['values'] / r['cpu_s']:>12.3e} "
              f"{r['wall_s']:>8.1f} {TARGET_S[design]:>8} "
              f"{r['cpu_s']:>8.1f} "
              f"{r['peak_gib']:>8.2f}  {speedups}   (target peak {TARGET_GIB} GiB)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
