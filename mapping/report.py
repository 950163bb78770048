"""Mapper reports: the terminal summary table, CSV and JSON files and plots (PNG and SVG), all written atomically."""

import csv
import io

from dashraker.mapping.config import CLOCK_SOURCES
from dashraker.mapping.dataflow import OPS
from dashraker.mapping.silicon import UNITS
from dashraker.outputs import atomic_write
from dashraker.trace.store import save_json

__all__ = ["REPORTS", "summary_table", "write_csv", "write_json", "save_figure", "save_figures", "plot_speedup",
           "plot_energy", "write_reports"]

REPORTS = ("map.csv", "map.json", "speedup.png", "energy.png", "speedup.svg", "energy.svg")  # ``write_reports``'

_SCALAR_FIELDS = (
    "design", "step", "layer", "op", "scheduled", "partner", "zero_fraction_scheduled", "zero_fraction_partner",
    "problems", "passes", "values_scheduled", "dense_cycles", "cycles", "speedup", "clock_mhz", "clock_source",
    "compute_s", "dram_s", "time_s", "dense_time_s", "memory_bound", "time_speedup", "dram_bytes", "energy_pj", "baseline_energy_pj", "energy_efficiency",
    "core_energy_pj", "baseline_core_energy_pj", "core_energy_efficiency", "compression", "area_scope",
    "area_estimate", "silicon", "library", "silicon_area", "clock_pj", "leakage_pj",
)  # fmt: skip


def summary_table(rows, sums):
    """A fixed-width table per design: per layer and operation, then the totals per operation."""
    lines = []
    header = f"{'layer':<28} {'op':<10} {'sched':>5} {'dense cyc':>12} {'cycles':>12} {'speedup':>8} " \
             f"{'time spd':>8} {'energy uJ':>10} {'clock uJ':>8} {'leak uJ':>8} {'eff':>6} {'core eff':>8} {'bound':>7}"  # fmt: skip
    for design in dict.fromkeys(row["design"] for row in rows):
        first = next(r for r in rows if r["design"] == design)
        lines += ["", f"== {design} == memory {first['compression']}, {first['area_scope']} scope, {_silicon(first)}; "
                  f"{_clock(first)}", header, "-" * len(header)]
        for r in (r for r in rows if r["design"] == design):
            name = r["layer"] if len({x["step"] for x in rows}) == 1 else f"{r['layer']}@{r['step']}"
            lines.append(
                f"{name[:28]:<28} {r['op']:<10} {r['scheduled']:>5} {r['dense_cycles']:>12,} {r['cycles']:>12,} "
                f"{r['speedup']:>7.2f}x {r['time_speedup']:>7.2f}x {r['energy_pj'] / 1e6:>10.2f} "
                f"{(r.get('clock_pj') or 0) / 1e6:>8.2f} {(r.get('leakage_pj') or 0) / 1e6:>8.2f} {r['energy_efficiency']:>5.2f}x "
                f"{r['core_energy_efficiency']:>7.2f}x {'DRAM' if r['memory_bound'] else 'comp':>7}"
            )
        lines.append("-" * len(header))
        for op in (*OPS, "all"):
            if (design, op) in sums:
                t = sums[design, op]
                lines.append(
                    f"{'total':<28} {op:<10} {'':>5} {t['dense_cycles']:>12,} {t['cycles']:>12,} "
                    f"{t['speedup']:>7.2f}x {t['time_speedup']:>7.2f}x {t['energy_pj'] / 1e6:>10.2f} "
                    f"{t['energy_breakdown_pj'].get('clock', 0) / 1e6:>8.2f} "
                    f"{t['energy_breakdown_pj'].get('leakage', 0) / 1e6:>8.2f} {t['energy_efficiency']:>5.2f}x "
                    f"{t['core_energy_efficiency']:>7.2f}x {t['memory_bound_ops']:>3}/{t['ops']:<3}"
                )
        lines += _breakdown_lines([r for r in rows if r["design"] == design])
    return "\n".join(lines)


def _silicon(row):
    """What a design's clocking and leakage are charged on, as its rows say."""
    if row["silicon_area"] is None:
        return "clocking and leakage not modelled (tile area unknown)"
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
    """``figure`` at ``path`` in the format its suffix names (PNG, SVG), written atomically."""
    from pathlib import Path

    buffer = io.BytesIO()
    figure.savefig(buffer, format=Path(path).suffix[1:], dpi=120, bbox_inches="tight",
                   metadata={"Date": None} if str(path).endswith(".svg") else None)
    atomic_write(path, lambda file: file.write(buffer.getvalue()))


def save_figures(figure, path):
    """``figure`` as a PNG at ``path`` and as an SVG beside it (same name, ``.svg``); closes it."""
    import matplotlib.pyplot as plt

    for target in (path, path.with_suffix(".svg")):
        save_figure(figure, target)
    plt.close(figure)


def _figure(designs, labels):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(len(designs), 1, figsize=(max(8, 0.45 * len(labels) + 3), 3.6 * len(designs)), squeeze=False,
                        layout="constrained")


def _places(rows):
    """Each (step, layer) of ``rows`` in trace order, and its tick label: the layer, with its step where the rows
    hold several steps, so that a later step never hides an earlier one."""
    places = list(dict.fromkeys((r["step"], r["layer"]) for r in rows))
    steps = len({step for step, _ in places})
    return places, [layer if steps == 1 else f"{layer}@{step}" for step, layer in places]


def plot_speedup(path, rows):
    """Speedup over the dense baseline per layer and recorded step (x) and operation (bars), one panel per design."""
    from dashraker.mapping.palette import operation_colour

    designs, (places, labels) = list(dict.fromkeys(r["design"] for r in rows)), _places(rows)
    figure, axes = _figure(designs, labels)
    width = 0.8 / len(OPS)
    for ax, design in zip(axes[:, 0], designs):
        for k, op in enumerate(OPS):
            points = {(r["step"], r["layer"]): r["dense_cycles"] / max(r["cycles"], 1) for r in rows
                      if r["design"] == design and r["op"] == op}  # fmt: skip
            xs = [i + (k - 1) * width for i, place in enumerate(places) if place in points]
            ax.bar(xs, [points[place] for place in places if place in points], width, label=op,
                   color=operation_colour(op))
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_title(f"{design}: speedup (cycles) over the dense baseline")
        ax.set_ylabel("speedup")
        ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
        ax.legend(fontsize=7)
    save_figures(figure, path)


def plot_energy(path, rows):
    """Energy per layer and recorded step (all operations) stacked by component, one panel per design; a component
    has one colour in every panel (``palette.component_colour``)."""
    from dashraker.mapping.palette import component_colour

    designs, (places, labels) = list(dict.fromkeys(r["design"] for r in rows)), _places(rows)
    figure, axes = _figure(designs, labels)
    for ax, design in zip(axes[:, 0], designs):
        per_place = {place: {} for place in places}
        for r in (r for r in rows if r["design"] == design):
            for component, value in r["energy_breakdown_pj"].items():
                parts = per_place[r["step"], r["layer"]]
                parts[component] = parts.get(component, 0.0) + value / 1e6
        components = [c for c in next(iter(per_place.values()), {}) if any(per_place[p].get(c) for p in places)]
        bottom = [0.0] * len(places)
        for component in components:
            heights = [per_place[place].get(component, 0.0) for place in places]
            ax.bar(range(len(places)), heights, 0.7, bottom=bottom, label=component, color=component_colour(component))
            bottom = [b + h for b, h in zip(bottom, heights)]
        ax.set_title(f"{design}: energy per layer by component")
        ax.set_ylabel("energy (uJ)")
        ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
        ax.legend(fontsize=7, ncol=2)
    save_figures(figure, path)


def write_reports(out, rows, sums, meta, plots=True):
    """``REPORTS`` in the folder ``out`` (without ``plots``, the CSV and JSON files only); returns their paths by
    name."""
    paths = {name: out / name for name in (REPORTS if plots else REPORTS[:2])}
    write_csv(paths["map.csv"], rows)
    write_json(paths["map.json"], rows, sums, meta)
    if plots:
        plot_speedup(paths["speedup.png"], rows)
        plot_energy(paths["energy.png"], rows)
    return paths
