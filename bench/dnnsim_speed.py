"""TensorDash values scheduled per CPU second, this mapper against DNNsim on one simulation, start-up counted.

    .venv/bin/python bench/dnnsim_speed.py --dnnsim PATH [--trace DIR] [--runs 3] [--work DIR]

DNNsim (github.com/isakedo/DNNsim, the TensorDash authors' simulator, training version, e.g. commit
3b0ecaf; ``PATH`` its built ``DNNsim`` program, docs/guides/dnnsim-preset.md) runs the trace's
export (``dashraker trace export --format dnnsim``) with the export's batch file: TensorDash, 16
lanes, one tile of 4 x 16 PEs, H = 2, T<2,5>, one thread. The mapper runs ``dashraker map --jobs 1``
on the same trace with the ``tensordash-paper`` preset at one tile, the same simulation: the bench
checks that both count the same cycles for every operation. Each program is a fresh process, timed
whole (interpreter start, imports, reading the trace, writing its outputs): its CPU seconds. The
unit on both sides is values scheduled (the scheduled operand's values over every pass, the
mapper's ``values_scheduled``, which DNNsim schedules too) per CPU second. The mapper runs as
DNNsim does, writing tables only (``--no-plots``), and with its plots. Medians of ``--runs``.

Without ``--trace`` it uses (or records) ``map_resnet18.py``'s trace: ResNet-18 on the digits
data, batch 16, all 16 samples.
"""

import argparse
import csv
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from map_resnet18 import _trace

from dashraker.trace.export import export_dnnsim

TARGET = 10  # the mapper's values per CPU second over DNNsim's, start-up counted (issue 53)
OPS = {"fwd": "Forward cycles", "bwd_input": "Backward Input cycles", "bwd_weight": "Backward Weights cycles"}


def _child_cpu_s(command, cwd=None):
    """CPU seconds of ``command`` run to its end as a child process (its output discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _dnnsim_setup(trace, work):
    """The folder DNNsim runs in (it reads ``models/NET`` and ``net_traces/NET`` below it) and the batch file."""
    export = work / "export"
    if not export.is_dir():
        export_dnnsim(trace, export)  # reused: a scratch folder per trace (--work)
    net = next(path.name for path in export.iterdir() if path.is_dir())
    run = work / "dnnsim-run"
    (run / "models" / net).mkdir(parents=True, exist_ok=True)
    (run / "models" / net / "trace_params.csv").write_bytes((export / net / "trace_params.csv").read_bytes())
    (run / "net_traces").mkdir(exist_ok=True)
    link = run / "net_traces" / net
    if not link.exists():
        link.symlink_to((export / net).resolve())
    return run, (export / net / "tensordash.prototxt").resolve()


def _dnnsim_cycles(run):
    """Cycles per operation of DNNsim's one results table (its epoch totals)."""
    (table,) = (run / "results").rglob("*_cycles.csv")
    lines = table.read_text().splitlines()
    start = lines.index("Epoch scalar results:")
    header, totals = lines[start + 1].split(","), lines[start + 2].split(",")
    return {op: int(totals[header.index(column)]) for op, column in OPS.items()}


def _mapper_figures(out):
    """Cycles per operation and values scheduled of a ``map.csv``."""
    rows = list(csv.DictReader(open(out / "map.csv")))
    cycles = {op: sum(int(r["cycles"]) for r in rows if r["op"] == op) for op in OPS}
    return cycles, sum(int(r["values_scheduled"]) for r in rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dnnsim", type=Path, required=True, help="DNNsim's built program")
    parser.add_argument("--trace", help="trace folder (default: map_resnet18.py's ResNet-18 trace)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each program (the median is reported)")
    parser.add_argument("--work", type=Path, default=Path("build/bench/dnnsim"), help="scratch folder")
    args = parser.parse_args()
    if not os.access(args.dnnsim, os.X_OK) or not args.dnnsim.is_file():
        parser.error(f"--dnnsim {args.dnnsim}: not a program (build DNNsim as docs/guides/dnnsim-preset.md says)")
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, not {args.runs}")
    trace = _trace(args.trace)
    args.work.mkdir(parents=True, exist_ok=True)
    run, batch = _dnnsim_setup(trace, args.work)
    config = args.work / "tensordash-paper-1tile.yaml"
    config.write_text("preset: tensordash-paper\ntiles: 1  # the export's batch file: n_tiles 1\n")
    mapper = [sys.executable, "-m", "dashraker", "map", str(trace), "--config", str(config), "--jobs", "1",
              "--force-size", "--no-progress", "--out"]
    programs = {"DNNsim": lambda: _child_cpu_s([str(args.dnnsim.resolve()), str(batch)], cwd=run),
                "mapper --no-plots": lambda: _child_cpu_s([*mapper, str(args.work / "map-tables"), "--no-plots"]),
                "mapper with plots": lambda: _child_cpu_s([*mapper, str(args.work / "map-plots")])}
    programs["mapper --no-plots"]()  # the tiles' silicon synthesised and cached once, outside the timing
    times = {name: [program() for _ in range(args.runs)] for name, program in programs.items()}
    cycles, values = _mapper_figures(args.work / "map-tables")
    theirs = _dnnsim_cycles(run)
    same = cycles == theirs and cycles == _mapper_figures(args.work / "map-plots")[0]
    print(f"trace {trace}: {values:.3e} values scheduled; cycles per operation: mapper {cycles}, DNNsim {theirs}: "
          f"{'the same simulation' if same else 'DIFFERENT'}")
    reference = statistics.median(times["DNNsim"])
    print(f"{'program':<18} {'CPU s (runs)':<24} {'median':>8} {'values/CPU s':>13} {'vs DNNsim':>9}")
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"{name:<18} {', '.join(f'{t:.2f}' for t in runs):<24} {median:>8.2f} {values / median:>13.3e} "
              f"{reference / median:>8.2f}x" + (f"  (target {TARGET}x)" if name != "DNNsim" else ""))
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
