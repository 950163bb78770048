"""How far energy tables reproduce the gate-level energy of the passes ``dashraker asic`` simulated: per design, the
gate-level energy (leakage left out, as ``--calibrate`` fits) beside what each table charges the same passes, as the
mapper charges them (the mapper's action counts of each pass times the table's entries, plus the tile's flip-flops
times the passes' cycles times its ``flip_flop_clock``), and each design's energy efficiency over the reference under
each. Then the same with the table refitted with each layer left out in turn and charged on that layer's passes
alone (``mapping.calibration.fit_table``): how the fit does on passes it was not fitted to.

    .venv/bin/python bench/asic_calibration.py build/cal/baseline build/cal/tensordash build/cal/fpraker \\
        --table build/cal/nangate45-gate.yaml [--table horowitz45]
"""

import argparse
import dataclasses
import json
from pathlib import Path


def _per_design(runs, charge):
    """{design: (gate-level pJ, charged pJ, MAC slots)} of ``runs``, each run charged ``charge(run)`` pJ."""
    sums = {}
    for run in runs:
        gate, charged, slots = sums.get(run.design, (0.0, 0.0, 0))
        sums[run.design] = (gate + run.energy_pj, charged + charge(run), slots + run.macs)
    return sums


def _print(title, sums):
    """A Markdown table of ``sums`` (``_per_design``'s; the reference first)."""
    ref_gate, ref_charged, _ = next(iter(sums.values()))
    print(f"\n{title}\n")
    print("| design | gate-level pJ per MAC slot | charged pJ per MAC slot | charged / gate level "
          "| efficiency over the reference: gate level | charged |")
    print("|---|---|---|---|---|---|")
    for design, (gate, charged, slots) in sums.items():
        print(f"| {design} | {gate / slots:.2f} | {charged / slots:.2f} | {charged / gate:.2f} "
              f"| {ref_gate / gate:.3f}x | {ref_charged / charged:.3f}x |")


def _held_out(runs, fmt):
    """Each layer's runs charged by the table fitted to the other layers' runs (an entry those never use: 0)."""
    from dashraker.mapping.calibration import fit_table, table_energy_pj

    every = fit_table(runs, fmt).entries
    charged = {}
    for layer in dict.fromkeys(run.layer for run in runs):
        entries = {**dict.fromkeys(every, 0.0), **fit_table([run for run in runs if run.layer != layer], fmt).entries}
        for run in runs:
            if run.layer == layer:
                charged[id(run)] = table_energy_pj(run, entries, fmt)
    return _per_design(runs, lambda run: charged[id(run)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="dashraker asic --out folders of the same passes, reference first")
    parser.add_argument("--table", action="append", default=None,
                        help="energy table: packaged name or YAML path (repeatable; default horowitz45)")
    parser.add_argument("--register-files", action="store_true",
                        help="charge the clocking of each tile's flip-flops less those of its memories the mapper's "
                             "asic area estimate holds in register files (of at least the table's "
                             "register_file_min_bits), as the mapper's default configuration does")
    args = parser.parse_args()
    from dashraker.mapping.calibration import table_energy_pj
    from dashraker.mapping.config import load_energy_table
    from dashraker.sim.asic_cli import gate_runs

    records = [json.loads((Path(folder) / "asic.json").read_text()) for folder in args.reports]
    runs, fmt = gate_runs(records), records[0]["params"]["fmt"]
    flip_flops = {r["design"]: r["area"]["flip_flops"] for r in records}
    if args.register_files:
        bits = load_energy_table("horowitz45").silicon["register_file_min_bits"]
        flip_flops = {r["design"]: flip_flops[r["design"]]
                      - sum(m["flip_flops"] * m["count"] for m in r["area"]["memories"] if m["bits"] >= bits)
                      for r in records}
    print("tiles' flip-flops charged: " + ", ".join(f"{name} {count:,}" for name, count in flip_flops.items()))
    charged = [dataclasses.replace(run, flip_flops=flip_flops[run.design]) for run in runs]
    for name in args.table or ["horowitz45"]:
        table = load_energy_table(name)
        print(f"\ntable {table.name} ({table.path}): flip_flop_clock {table.entries['flip_flop_clock'] * 1e3:.3g} fJ")
        _print("Charged with the table",
               _per_design(charged, lambda run: table_energy_pj(run, table.entries, fmt)))
    if len({run.layer for run in runs}) < 2:
        print("\nOne layer: no table fitted to the other layers to charge it")
        return
    _print("Each layer charged by the table fitted to the other layers (non-negative least squares)",
           _held_out(runs, fmt))


if __name__ == "__main__":
    main()
