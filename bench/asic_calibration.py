"""How far an energy table reproduces the gate-level energy it was fitted to: per design, the table's core energy of
the passes ``dashraker asic`` simulated (the mapper's action counts of each pass times the table's entries) beside
the gate-level energy of the same passes (leakage left out, as ``--calibrate`` fits), and each design's energy
efficiency over the reference under both.

    .venv/bin/python bench/asic_calibration.py build/cal/baseline build/cal/tensordash build/cal/fpraker \\
        --table build/cal/nangate45-gate.yaml
"""

import argparse
import dataclasses
import json
from pathlib import Path


def _energies(folder, table):
    """(design, gate-level pJ without leakage, the table's core pJ, MAC slots) of an ``asic.json`` record."""
    from dashraker.mapping.components import MEMORY
    from dashraker.mapping.config import load_config
    from dashraker.mapping.engine import energy_pj

    record = json.loads((Path(folder) / "asic.json").read_text())
    config = dataclasses.replace(load_config(None, record["design"]), params=record["params"], energy=table)
    gate = table_pj = slots = 0.0
    for run in record["energy"]["runs"]:
        gate += (run["fj"] - run["total"]["leakage"]) / 1e3
        table_pj += sum(pj for name, pj in energy_pj(run["counts"], config).items() if name not in MEMORY)
        slots += run["macs"]
    return record["design"], gate, table_pj, slots


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="dashraker asic --out folders of the same passes, reference first")
    parser.add_argument("--table", default="horowitz45", help="energy table: packaged name or YAML path")
    args = parser.parse_args()
    from dashraker.mapping.config import load_energy_table

    table = load_energy_table(args.table)
    rows = [_energies(folder, table) for folder in args.reports]
    _, ref_gate, ref_table, _ = rows[0]
    print(f"table {table.name} ({table.path})")
    print("| design | gate-level pJ per MAC slot | table pJ per MAC slot | table / gate level "
          "| efficiency over the reference: gate level | table |")
    print("|---|---|---|---|---|---|")
    for design, gate, table_pj, slots in rows:
        print(f"| {design} | {gate / slots:.2f} | {table_pj / slots:.2f} | {table_pj / gate:.2f} "
              f"| {ref_gate / gate:.2f}x | {ref_table / table_pj:.2f}x |")


if __name__ == "__main__":
    main()
