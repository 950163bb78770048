"""Maps a real ResNet-18 training step (batch 16) on each design; prints values scheduled and MACs per CPU second, wall time and peak memory.

    .venv/bin/python bench/map_resnet18.py [--trace DIR] [--designs baseline,tensordash,fpraker] [--jobs N]
        [--device cpu|cuda] [--out DIR] [--same-as DIR]

Without ``--trace`` it records one (``build/bench/resnet18``, reused when present): ResNet-18
on the digits data (32x32, CIFAR-shaped) at batch 16, optimizer step 1, all 16 samples. Each
design runs in a fresh process so that its wall time, CPU time and peak memory are its own; both
times cover the mapping call alone (interpreter start and imports excluded), the CPU time of all
its processes (on a shared machine wall time also counts other users' load). Peak
memory is the largest resident set of the main process and of one worker process (the
workers run side by side: at most ``jobs`` of them). ``--same-as`` checks that each design's
``map.csv`` equals the one an earlier run wrote with ``--out`` (the GPU path against the CPU
path, one commit against another). ``--jobs`` defaults to 2 on the CPU and to 1 (the mapper's
default there) with ``--device cuda``. The speed against DNNsim, the TensorDash authors' simulator, is
``dnnsim_speed.py``'s: one simulation, one unit, each program's start-up counted.
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = {"baseline": 60, "tensordash": 60, "fpraker": 60}  # wall, on 2 cores (issue 16)
TARGET_CUDA_S = {"fpraker": 5}  # wall, on one H100/H200 with --device cuda (issue 16)
TARGET_GIB = 4


def _cpu_s():
    """CPU seconds of this process and its finished children (the workers are joined when a run ends)."""
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def _one(trace, design, jobs, device, out):
    """Map the trace on one design in this process; print the figures as one JSON line."""
    from dashraker.mapping.config import load_config
    from dashraker.mapping.report import summary_table, write_reports
    from dashraker.mapping.runner import layer_macs, layer_ops, map_trace, totals
    from dashraker.trace import open_trace

    configs = [load_config(None, design, device)]
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
    layers = open_trace(trace).layers
    macs = sum(layer_macs(layer) * len(layer_ops(index, layer)) for index, layer in enumerate(layers))
    print(json.dumps({"design": design, "wall_s": wall, "values": sums[design, "all"]["values_scheduled"],
                      "macs": macs, "cpu_s": cpu, "peak_gib": rss / 2**20, "ops": ops}))  # fmt: skip


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
    parser.add_argument("--jobs", type=int, help="mapping processes (default: 2 on the CPU, 1 with a GPU)")
    parser.add_argument("--device", default="cpu", help="where the cost models run: cpu or cuda")
    parser.add_argument("--out", help="also write each design's reports into OUT/<design>/")
    parser.add_argument("--same-as", type=Path, help="check each design's map.csv equals DIR/<design>/map.csv")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.same_as and not args.out:
        parser.error("--same-as needs --out (the reports to compare)")
    if args.one:
        return _one(args.trace, args.one, args.jobs, args.device, args.out)
    trace = _trace(args.trace)
    jobs = args.jobs or (2 if args.device == "cpu" else 1)
    targets = TARGET_S if args.device == "cpu" else TARGET_CUDA_S
    print(f"{'design':<11} {'values/CPU s':>12} {'MACs/CPU s':>10} {'wall s':>8} {'target s':>8} "
          f"{'CPU s':>8} {'peak GiB':>8}  speedup fwd/bwd_in/bwd_w/all")
    for design in args.designs.split(","):
        command = [sys.executable, __file__, "--trace", str(trace), "--one", design, "--jobs", str(jobs),
                   "--device", args.device]
        command += ["--out", args.out] if args.out else []
        done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        speedups = "/".join(f"{r['ops'][op]['speedup']:.2f}" for op in ("fwd", "bwd_input", "bwd_weight", "all"))
        print(f"{design:<11} {r['values'] / r['cpu_s']:>12.3e} {r['macs'] / r['cpu_s']:>10.3e} {r['wall_s']:>8.1f} "
              f"{targets.get(design, '-'):>8} {r['cpu_s']:>8.1f} {r['peak_gib']:>8.2f}  {speedups}   "
              f"(target peak {TARGET_GIB} GiB)", flush=True)
        if args.same_as:
            same = (Path(args.out) / design / "map.csv").read_bytes() == (args.same_as / design / "map.csv").read_bytes()
            print(f"{'':<11} map.csv {'identical to' if same else 'DIFFERS from'} {args.same_as / design / 'map.csv'}")
            if not same:
                sys.exit(1)


if __name__ == "__main__":
    main()
