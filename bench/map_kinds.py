"""Speedups per kind of layer (attention products next to projections) and each kind's share of the MACs.

    .venv/bin/python bench/map_kinds.py TRACE MAP_OUT      # MAP_OUT: the folder of `dashraker map TRACE --out`

A layer's kind is its name's last component without the ``#k`` of a repeated call (a transformer's
``blocks.1.attention.scores`` is ``scores``, ``blocks.0.ffn1`` is ``ffn1``), so every block's
layer of one role adds up. Speedups are total dense cycles over total design cycles of the
kind's layers, per training operation and over all three; a MAC share is the kind's
multiply-accumulates over the whole step's (the three operations of a layer have the same MACs;
the first layer has no input gradient).
"""

import argparse
import json
import math
from pathlib import Path

from dashraker.mapping.dataflow import OPS, conv_geometry
from dashraker.trace import open_trace


def kind(name):
    return name.partition("#")[0].rsplit(".", 1)[-1]


def layer_macs(layer):
    """Multiply-accumulates of one training operation of ``layer`` (its convolution's)."""
    geo = conv_geometry(layer, layer.input_shape, layer.weight_shape)
    (n, c), (m, kh, kw) = geo.input[:2], geo.kernel
    return n * m * (c // geo.groups) * kh * kw * math.prod(geo.output())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("map_out")
    args = parser.parse_args()
    trace = open_trace(args.trace)
    layers = {layer.name: layer for layer in trace.layers}
    rows = json.loads((Path(args.map_out) / "map.json").read_text())["rows"]
    designs = list(dict.fromkeys(row["design"] for row in rows))
    kinds = list(dict.fromkeys(kind(row["layer"]) for row in rows))
    macs = {}
    for row in rows:
        if row["design"] == designs[0]:
            macs[kind(row["layer"])] = macs.get(kind(row["layer"]), 0) + layer_macs(layers[row["layer"]])
    total = sum(macs.values())
    print(f"{args.trace}: {total:,} MACs in the mapped operations; speedup over the dense baseline per operation")
    columns = [(design, op) for design in designs if design != "baseline" for op in (*OPS, "all")]
    print("| kind | type | MACs | " + " | ".join(f"{design} {op}" for design, op in columns) + " |")
    print("|---" * (3 + len(columns)) + "|")
    for name in kinds:
        group = [row for row in rows if kind(row["layer"]) == name]
        cells = []
        for design, op in columns:
            chosen = [r for r in group if r["design"] == design and op in (r["op"], "all")]
            dense, cycles = (sum(r[key] for r in chosen) for key in ("dense_cycles", "cycles"))
            cells.append(f"{dense / cycles:.3f}" if cycles else "-")
        kind_type = layers[group[0]["layer"]].type
        print(f"| {name} | {kind_type} | {macs[name] / total:.1%} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
