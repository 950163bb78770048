"""Iso-area comparison (SPEC section 7b): each design gets as many tiles as fit in the reference design's area.

The area budget is the reference design's configuration: its tiles times its tile area
under the chosen measure (``asic``: the tile's area under the configurations' silicon model,
``mapping.silicon``: CMOS transistors from ``dashraker area`` under ``silicon: transistors``, um2 of
library cells under ``silicon: liberty``, either under the ``area_estimate``: queues as register
files, or as generated; ``fpga``: LUTs from the FPGA flow's reports). Every other design keeps its
configured tile (rows x cols PEs of its lanes) and gets ``floor(budget / its tile area)`` whole
tiles; a design whose one tile exceeds the budget is refused. Speedup (cycles), energy efficiency
and throughput per area (compute time: the cycles at each design's clock) are then against the
reference as mapped in its own configuration. Energy counts every action of every tile (the extra
tiles' too), every tile's clocking and the leakage of all the configured silicon over the run time.

Area scope (``area_scope``, SPEC section 7b): ``compute`` counts the tiles' logic;
``chip`` also the SRAM the mapper configures, in the asic measure's unit (``mapping.silicon``):
each tile's two buffers go with the tile, and the global buffer is a fixed area that every design
has (so it changes the areas and throughput per area reported, not the tile counts).
"""

import dataclasses
import io
import json
import math
from pathlib import Path

__all__ = ["MEASURES", "PLOT", "AreaMeasureError", "Budget", "unit", "tile_area", "budget", "tile_counts", "compare",
           "iso_table", "plot"]

MEASURES = {"asic": "the silicon model's area", "fpga": "ECP5 LUT4s"}
PLOT = "iso_area.png"  # the comparison's plot, beside the mapper's reports


class AreaMeasureError(ValueError):
    """A tile's area cannot be had under the chosen measure; the message says how to get it."""


def _fpga_luts(config, reports):
    """LUTs of the tile from a finished FPGA flow report of the same design and parameters under ``reports``."""
    from dashraker.fpga.compare import breakdown

    if reports is None:
        raise AreaMeasureError("--area fpga needs --fpga-reports DIR (folders of 'dashraker fpga' runs)")
    params = config.params
    for path in sorted(Path(reports).rglob("report.json")):
        try:
            report = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if report.get("design") == config.design.name and report.get("params") == params:
            return breakdown(report)["tile_lut"]
    options = " ".join(f"{p.option} {params[p.name]}" for p in config.design.parameters)
    raise AreaMeasureError(f"no FPGA report of {config.design.name} with {params} under {reports}: run "
                           f"'dashraker fpga {config.design.name} {options} --out {reports}/{config.design.name}'")


def unit(measure, config):
    """The unit of ``measure``'s areas for ``config``: its silicon model's under ``asic``."""
    from dashraker.mapping import silicon

    if measure != "asic":
        return MEASURES[measure]
    cells = f" of {config.library} cells" if config.silicon == "liberty" else ""
    return silicon.UNITS[config.silicon] + cells


def tile_area(config, measure, area_root="build/area", fpga_reports=None, progress=True):
    """The area of one tile of ``config`` under ``measure`` (``MEASURES``): under ``asic`` its resolved ``tile``'s, or
    measured (``silicon.measure``) for a configuration not resolved."""
    if measure == "asic":
        from dashraker.mapping import silicon

        if config.tile is not None:
            return config.tile.area
        try:
            return silicon.measure(config, config.design, config.params, area_root, progress=progress).area
        except silicon.SiliconError as error:
            raise AreaMeasureError(str(error)) from None
    if measure == "fpga":
        return _fpga_luts(config, fpga_reports)
    raise AreaMeasureError(f"area measure must be one of {', '.join(MEASURES)}, not {measure!r}")


@dataclasses.dataclass
class Budget:
    """An iso-area comparison's areas (under ``measure``, in ``unit``): per design one tile with what goes with it
    (``areas``), the ``fixed`` area every design has, and the tiles each gets (``tiles_iso``)."""

    measure: str
    unit: str
    scope: str
    estimate: str
    areas: dict
    fixed: float
    tiles_iso: dict

    def resized(self, configs):
        """The ``configs`` whose iso-area tile count differs from their configured one, with that count (the others'
        configured figures are their iso-area figures)."""
        return [dataclasses.replace(c, tiles=self.tiles_iso[c.design.name]) for c in configs
                if c.tiles != self.tiles_iso[c.design.name]]


def budget(configs, measure, area_root="build/area", fpga_reports=None, progress=True):
    """The areas and iso-area tile counts of ``configs`` (one per design, the reference among them) under
    ``measure`` and the configurations' area scope."""
    from dashraker.designs import reference
    from dashraker.mapping import silicon

    scope = configs[0].area_scope
    if scope == "chip" and measure != "asic":
        raise AreaMeasureError("area scope chip counts SRAM in the silicon model's area: use the asic area measure")
    areas, fixed = {}, 0.0
    for config in configs:
        area = tile_area(config, measure, area_root, fpga_reports, progress)
        if scope == "chip":
            tile_buffers, fixed = silicon.sram_area(config, 1)
            area += tile_buffers
        areas[config.design.name] = area
    ref = reference().name
    tiles = tile_counts(areas, ref, next(c.tiles for c in configs if c.design.name == ref))
    return Budget(measure, unit(measure, configs[0]), scope, configs[0].area_estimate, areas, fixed, tiles)


def tile_counts(areas, reference, reference_tiles):
    """Design name -> whole tiles that fit in ``reference_tiles`` tiles of ``reference``'s area (``areas``:
    design name -> area of one tile)."""
    budget = reference_tiles * areas[reference]
    counts = {}
    for name, area in areas.items():
        if not area > 0:
            raise AreaMeasureError(f"{name}: tile area must be positive, not {area!r}")
        counts[name] = reference_tiles if name == reference else math.floor(budget / area)
        if counts[name] < 1:
            raise AreaMeasureError(f"{name}: one tile ({area:,}) exceeds the area budget of {reference_tiles} "
                                   f"{reference} tiles ({budget:,})")
    return counts


def compare(equal, iso, areas, tiles_equal, tiles_iso, reference, fixed=0.0):
    """One entry per design: its areas and, at equal lanes and at iso-area, speedup, energy efficiency and
    throughput per area over the reference (all operations). ``equal``/``iso``: the mapper's ``totals`` of the
    configured tiles and of the iso-area tile counts; ``fixed``: the area every design has besides its tiles.
    Throughput is compute time's (the cycles at each design's clock), speedup the cycles'."""
    ref = equal[reference, "all"]
    ref_area = tiles_equal[reference] * areas[reference] + fixed
    entries = []
    for name in areas:
        entry = {"design": name, "tile_area": areas[name]}
        for label, sums, tiles in (("equal", equal, tiles_equal), ("iso", iso, tiles_iso)):
            total = sums[name, "all"]
            area = tiles[name] * areas[name] + fixed
            speedup = ref["cycles"] / total["cycles"] if total["cycles"] else math.inf
            throughput = ref["compute_s"] / total["compute_s"] if total["compute_s"] else math.inf
            entry.update({f"tiles_{label}": tiles[name], f"area_{label}": area, f"speedup_{label}": speedup,
                          f"energy_efficiency_{label}": ref["energy_pj"] / total["energy_pj"],
                          f"throughput_per_area_{label}": throughput * ref_area / area})
        entries.append(entry)
    return entries


def iso_table(entries, budget):
    """The comparison of ``budget``'s areas as a fixed-width table."""
    header = (f"{'design':<12} {'tile area':>14} {'tiles':>5} {'speedup':>8} {'energy eff':>10} {'perf/area':>9}"
              f" | {'tiles':>5} {'speedup':>8} {'energy eff':>10} {'perf/area':>9}")
    named = f" ({budget.estimate} estimate)" if budget.measure == "asic" else ""
    lines = [f"area measure: {budget.unit}{named} per tile, {budget.scope} scope"
             f"{' (tile with its buffers; the global buffer beside)' if budget.scope == 'chip' else ''}; "
             "left: configured tiles (equal lanes), right: iso-area",
             header, "-" * len(header)]
    for e in entries:
        lines.append(f"{e['design']:<12} {e['tile_area']:>14,.0f} " + " | ".join(
            f"{e[f'tiles_{k}']:>5} {e[f'speedup_{k}']:>7.2f}x {e[f'energy_efficiency_{k}']:>9.2f}x "
            f"{e[f'throughput_per_area_{k}']:>8.2f}x" for k in ("equal", "iso")))
    return "\n".join(lines)


def plot(path, entries, unit):
    """Speedup and energy efficiency over the reference against total area, per design, at equal lanes (hollow)
    and iso-area (filled)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dashraker.outputs import atomic_write

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    for ax, metric, title in zip(axes, ("speedup", "energy_efficiency"), ("speedup", "energy efficiency")):
        for k, e in enumerate(entries):
            color = f"C{k}"
            ax.scatter(e["area_equal"], e[f"{metric}_equal"], facecolors="none", edgecolors=color, s=60)
            ax.scatter(e["area_iso"], e[f"{metric}_iso"], color=color, s=60, label=e["design"])
            ax.annotate("", (e["area_iso"], e[f"{metric}_iso"]), (e["area_equal"], e[f"{metric}_equal"]),
                        arrowprops={"arrowstyle": "->", "color": color, "alpha": 0.6})
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel(f"total area ({unit})")
        ax.set_ylabel(f"{title} over the reference")
        ax.set_title(f"{title}: equal lanes (hollow) -> iso-area (filled)")
        ax.legend(fontsize=8)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    plt.close(figure)
    atomic_write(path, lambda file: file.write(buffer.getvalue()))
