"""Mapper reports: the terminal summary table, CSV and JSON files and PNG plots, all written atomically."""

import csv
import io

from dashraker.mapping.config import CLOCK_SOURCES
from dashraker.mapping.dataflow import OPS
from dashraker.mapping.silicon import UNITS
from dashraker.outputs import atomic_write
from dashraker.trace.store import save_json

__all__ = ["REPORTS", "summary_table", "write_csv", "write_json", "plot_speedup", "plot_energy", "write_reports"]

REPORTS = ("map.csv", "map.json", "speedup.png", "energy.png")  # what ``write_reports`` writes

_SCALAR_FIELDS = (
    "design", "step", "layer", "op", "scheduled", "partner", "zero_fraction_scheduled", "zero_fraction_partner",
    "problems", "passes", "values_scheduled", "dense_cycles", "cycles", "speedup", "clock_mhz", "clock_source",
    "compute_s", "dram_s", "time_s", "memory_bound", "time_speedup", "dram_bytes", "energy_pj", "baseline_energy_pj", "energy_efficiency",
    "core_energy_pj", "baseline_core_energy_pj", "core_energy_efficiency", "compression", "area_scope",
    "area_estimate", "silicon", "library", "silicon_area", "leakage_pj",
)  # fmt: skip


def summary_table(rows, sums):
    """A fixed-width table per design: per layer and operation, then the totals per operation."""
    lines = []
    header = f"{'layer':<28} {'op':<10} {'sched':>5} {'dense cyc':>12} {'cycles':>12} {'speedup':>8} " \
             f"{'energy uJ':>10} {'leak uJ':>8} {'eff':>6} {'core eff':>8} {'bound':>6}"  # fmt: skip
    for design in dict.fromkeys(row["design"] for row in rows):
        first = next(r for r in rows if r["design"] == design)
        lines += ["", f"== {design} == memory {first['compression']}, {first['area_scope']} scope, {_silicon(first)}; "
                  f"{_clock(first)}", header, "-" * len(header)]
        for r in (r for r in rows if r["design"] == design):
            name = r["layer"] if len({x["step"] for x in rows}) == 1 else f"{r['layer']}@{r['step']}"
            lines.append(
                f"{name[:28]:<28} {r['op']:<10} {r['scheduled']:>5} {r['dense_cycles']:>12,} {r['cycles']:>12,} "
                f"{r['speedup']:>7.2f}x {r['energy_pj'] / 1e6:>10.2f} {(r.get('leakage_pj') or 0) / 1e6:>8.2f} "
                f"{r['energy_efficiency']:>5.2f}x "
                f"{r['core_energy_efficiency']:>7.2f}x {'DRAM' if r['memory_bound'] else 'comp':>6}"
            )
        lines.append("-" * len(header))
        for op in (*OPS, "all"):
            if (design, op) in sums:
                t = sums[design, op]
                lines.append(
                    f"{'total':<28} {op:<10} {'':>5} {t['dense_cycles']:>12,} {t['cycles']:>12,} "
                    f"{t['speedup']:>7.2f}x {t['energy_pj'] / 1e6:>10.2f} "
                    f"{t['energy_breakdown_pj'].get('leakage', 0) / 1e6:>8.2f} {t['energy_efficiency']:>5.2f}x "
                    f"{t['core_energy_efficiency']:>7.2f}x"
                )
        lines += _breakdown_lines([r for r in rows if r["design"] == design])
    return "\n".join(lines)


def _silicon(row):
    """What a design's leakage is charged on, as its rows say."""
    if row["silicon_area"] is None:
        return "leakage not modelled (tile area unknown)"
    cells = f" of {row['library']} cells" if row["silicon"] == "liberty" else ""
    return f"leakage of {row['silicon_area']:,.0f} {UNITS[row['silicon']]}{cells} ({row['area_estimate']} area estimate)"


def _clock(row):
    """The clock a design ran at and where it came from, as its rows say."""
    library = f" on {row['library']}" if row["clock_source"] != "configured" else ""
    return f"clock {row['clock_mhz']:,.5g} MHz ({CLOCK_SOURCES[row['clock_source']]}{library})"


def _breakdown_lines(rows):
    """A design's cycle breakdown per layer and operation (term-serial designs), if it has one."""
    rows = [r for r in rows if r.get("cycle_breakdown")]
    if not rows:
        return []
    header = (f"{'layer':<28} {'op':<10} {'cycles':>12} {'mean terms':>12} {'lane max':>12} {'lockstep':>12} "
              f"{'tile imbal':>10} {'fill':>5} {'skipped terms':>14}")
    lines = ["", "cycle breakdown (per tile: cycles at the mean in-bound terms of a lane, + each PE's max over its "
             "lanes, + the tile's lockstep; + the busiest tile's excess, + fill = cycles)", header, "-" * len(header)]
    steps = len({r["step"] for r in rows})
    for r in rows:
        b, name = r["cycle_breakdown"], r["layer"] if steps == 1 else f"{r['layer']}@{r['step']}"
        lines.append(f"{name[:28]:<28} {r['op']:<10} {r['cycles']:>12,} {b['mean_terms']:>12,.1f} {b['lane_max']:>12,.1f} "
                     f"{b['lockstep']:>12,.1f} {b['tile_imbalance']:>10,.1f} {b['fill']:>5} {b['skipped_terms']:>14,}")
    return lines


BREAKDOWN = ("mean_terms", "lane_max", "lockstep", "tile_imbalance", "fill", "skipped_terms")  # engine.cycle_breakdown


def _flat(row):
    flat = {field: row[field] for field in _SCALAR_FIELDS}
    flat.update({f"cycles_{k}": (row.get("cycle_breakdown") or {}).get(k, "") for k in BREAKDOWN})
    flat.update({f"energy_{k}_pj": v for k, v in row["energy_breakdown_pj"].items()})
    flat.update({f"count_{k}": v for k, v in row["counts"].items()})
    return flat


def write_csv(path, rows):
    """One line per (design, step, layer, operation), energy per component and action counts as columns."""
    flat = [_flat(row) for row in rows]
    text = io.StringIO()
    fields = list(dict.fromkeys(key for row in flat for key in row)) or list(_SCALAR_FIELDS)  # designs count apart
    writer = csv.DictWriter(text, fieldnames=fields, restval="")
    writer.writeheader()
    writer.writerows(flat)
    atomic_write(path, lambda file: file.write(text.getvalue().encode()))


def write_json(path, rows, sums, meta):
    """Everything: the run's metadata, every row, and the totals per design and operation."""
    save_json(path, {**meta, "rows": rows, "totals": [{"design": d, "op": op, **t} for (d, op), t in sums.items()]})


def save_figure(figure, path):
    """``figure`` as a PNG at ``path``, written atomically."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    atomic_write(path, lambda file: file.write(buffer.getvalue()))


def _figure(designs, layers):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(len(designs), 1, figsize=(max(8, 0.45 * len(layers) + 3), 3.6 * len(designs)), squeeze=False,
                        layout="constrained")


def _labels(rows):
    return list(dict.fromkeys(r["layer"] for r in rows))


def plot_speedup(path, rows):
    """Speedup over the dense baseline per layer (x) and operation (bars), one panel per design."""
    designs, layers = list(dict.fromkeys(r["design"] for r in rows)), _labels(rows)
    figure, axes = _figure(designs, layers)
    width = 0.8 / len(OPS)
    for ax, design in zip(axes[:, 0], designs):
        for k, op in enumerate(OPS):
            points = {r["layer"]: r["dense_cycles"] / max(r["cycles"], 1) for r in rows
                      if r["design"] == design and r["op"] == op}  # fmt: skip
            xs = [i + (k - 1) * width for i, layer in enumerate(layers) if layer in points]
            ax.bar(xs, [points[layer] for layer in layers if layer in points], width, label=op)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_title(f"{design}: speedup over the dense baseline")
        ax.set_ylabel("speedup")
        ax.set_xticks(range(len(layers)), layers, rotation=60, ha="right", fontsize=7)
        ax.legend(fontsize=7)
    save_figure(figure, path)


def plot_energy(path, rows):
    """Energy per layer (all operations) stacked by component, one panel per design."""
    designs, layers = list(dict.fromkeys(r["design"] for r in rows)), _labels(rows)
    figure, axes = _figure(designs, layers)
    for ax, design in zip(axes[:, 0], designs):
        per_layer = {layer: {} for layer in layers}
        for r in (r for r in rows if r["design"] == design):
            for component, value in r["energy_breakdown_pj"].items():
                per_layer[r["layer"]][component] = per_layer[r["layer"]].get(component, 0.0) + value / 1e6
        components = [c for c in next(iter(per_layer.values()), {}) if any(per_layer[l].get(c) for l in layers)]
        bottom = [0.0] * len(layers)
        for component in components:
            heights = [per_layer[layer].get(component, 0.0) for layer in layers]
            ax.bar(range(len(layers)), heights, 0.7, bottom=bottom, label=component)
            bottom = [b + h for b, h in zip(bottom, heights)]
        ax.set_title(f"{design}: energy per layer by component")
        ax.set_ylabel("energy (uJ)")
        ax.set_xticks(range(len(layers)), layers, rotation=60, ha="right", fontsize=7)
        ax.legend(fontsize=7, ncol=2)
    save_figure(figure, path)


def write_reports(out, rows, sums, meta):
    """``REPORTS`` in the folder ``out``; returns their paths by name."""
    paths = {name: out / name for name in REPORTS}
    write_csv(paths["map.csv"], rows)
    write_json(paths["map.json"], rows, sums, meta)
    plot_speedup(paths["speedup.png"], rows)
    plot_energy(paths["energy.png"], rows)
    return paths
