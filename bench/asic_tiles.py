"""The designs on the Nangate45 standard-cell library: area, clock and energy per MAC slot, from ``dashraker asic``.

Each configuration is one ``dashraker asic`` run (``--jobs`` at a time), its record read back and tabulated:
the 1x1 tiles at ``--lanes`` with the energy of a recorded trace's passes (every operation of each of
``--layers``, ``--passes`` each, checked against the RTL), and, with ``--packaged``, the mapper's packaged 4x4
tiles for area and clock alone (their flat netlists are too large to simulate on a small machine). Records
and logs stay under ``--out``; a configuration whose record exists is not run again.

    .venv/bin/python bench/asic_tiles.py --trace traces/resnet18 --layers layer1.0.conv1,layer2.0.conv1,fc \\
        --packaged --out build/bench-asic
"""

import argparse
import concurrent.futures
import json
import subprocess
import sys
import time
from pathlib import Path

# (label, design, flags): the seeds' tiles and the baselines they are compared with
SMALL = (("baseline tree", "baseline", []), ("baseline fused", "baseline", ["--dot", "fused"]),
         ("TensorDash greedy", "tensordash", []), ("TensorDash fused", "tensordash", ["--dot", "fused"]),
         ("FPRaker", "fpraker", []))
PACKAGED = {"baseline": ["--lanes", "16"], "tensordash": ["--lanes", "16"], "fpraker": ["--lanes", "8"]}


def _configurations(args):
    runs = []
    for label, design, flags in SMALL:
        trace = ["--trace", str(args.trace), "--passes", str(args.passes)] if args.trace else []
        layers = [flag for layer in args.layers.split(",") for flag in ("--layer", layer)] if args.layers else []
        runs.append((f"{label} 1x1x{args.lanes}", design, [*flags, "--lanes", str(args.lanes), *trace, *layers]))
    if args.packaged:
        for label, design, flags in SMALL:
            lanes = PACKAGED[design]
            runs.append((f"{label} 4x4x{lanes[1]}", design, [*flags, "--rows", "4", "--cols", "4", *lanes]))
    return runs


def _run(label, design, flags, out, clock_ns):
    folder = out / label.replace(" ", "_")
    record = folder / "asic.json"
    if record.exists():
        return label, json.loads(record.read_text()), 0.0
    began = time.perf_counter()
    command = [sys.executable, "-m", "dashraker", "asic", design, *flags, "--build", str(out / "build"),
               "--out", str(folder), "--no-progress", "--max-minutes", "240",
               *(["--clock-ns", str(clock_ns)] if clock_ns else [])]
    with open(out / f"{folder.name}.log", "w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise SystemExit(f"{label}: dashraker asic failed ({out / f'{folder.name}.log'})")
    return label, json.loads(record.read_text()), time.perf_counter() - began


def _rows(results):
    print("| tile | um2 | flip-flop area | cells | clock MHz | bound: from -> to | passes | RTL mismatches | "
          "pJ per MAC slot | pJ per useful MAC | clock share | run s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, record, seconds in results:
        area, worst = record["area"], record["timing"]["worst"]
        energy = record.get("energy", {}).get("runs", [])
        passes = sum(run["passes"] for run in energy)
        fj = sum(run["fj"] for run in energy)
        slots = sum(run["macs"] for run in energy)
        useful = sum(run["useful_macs"] for run in energy)
        clock = sum(run["total"]["clock"] for run in energy)
        mismatches = sum(run["output_mismatches"] + run["cycle_mismatches"] for run in energy)
        path = f"{worst['start_register']} -> {worst['end_register']}" if worst else "-"
        print(f"| {label} | {area['um2']:,.0f} | {area['flip_flop_um2'] / area['um2']:.0%} | {area['cells']:,} "
              f"| {worst['fmax_mhz']:.0f} | {path} | {passes or '-'} | {mismatches if energy else '-'} "
              f"| {fj / 1e3 / slots if slots else float('nan'):.2f} | {fj / 1e3 / useful if useful else float('nan'):.2f} "
              f"| {clock / fj if fj else float('nan'):.0%} | {seconds:.0f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, help="trace folder whose passes the 1x1 tiles are charged on")
    parser.add_argument("--layers", default=None, help="comma-separated layers of --trace (default: every layer)")
    parser.add_argument("--passes", type=int, default=8, help="passes per layer operation (default 8)")
    parser.add_argument("--lanes", type=int, default=8, help="lanes of the 1x1 tiles (default 8)")
    parser.add_argument("--packaged", action="store_true", help="also the packaged 4x4 tiles (area and clock)")
    parser.add_argument("--clock-ns", type=float, default=None, help="dashraker asic's --clock-ns (default its own)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    parser.add_argument("--out", type=Path, default=Path("build/bench-asic"), help="records and logs")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    runs = _configurations(args)
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(_run, *zip(*runs), [args.out] * len(runs), [args.clock_ns] * len(runs)))
    _rows(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
