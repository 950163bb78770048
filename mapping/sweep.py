"""``dashraker sweep TRACE --axis KEY=V1,V2,...``: the mapper's verdicts over values of any configuration field.

A point is the configuration with some fields overridden (``config.apply_overrides``, the file's checks); each
point's tiles' silicon is measured as ``dashraker map`` measures it, then every point is mapped in one run
(``runner.map_each``, where points share the evaluation their designs do not change), so a point's rows are a
single map's. ``--grid`` maps every combination of the axes' values; ``--one-at-a-time`` (the default) each value
of each axis with the other fields as configured. Every point is built and checked, and its work estimated, before
any is mapped (SPEC section 9).
"""

import csv
import dataclasses
import io
import itertools
import math
from pathlib import Path

from dashraker.errors import CliError
from dashraker.outputs import path_argument

__all__ = ["Axis", "Point", "SweepError", "MAX_POINTS", "parse_axis", "points", "plan", "sweep", "table",
           "write_table", "write_parquet", "plot_axes", "register", "run"]

MAX_POINTS = 64  # points a sweep maps unless --max-points says more
DESIGN = "design"  # the axis of the designs compared: each point maps one (or several, "a+b") of them
TABLE = "sweep.csv"
PARQUET = "sweep.parquet"  # the same table for dataframe tools (pandas, Polars, DuckDB, Arrow)
METRICS = {"speedup": "speedup (cycles)", "time_speedup": "speedup (time)", "energy_efficiency": "energy efficiency"}


class SweepError(ValueError):
    """A sweep that cannot be mapped: a bad axis, a value a field's check refuses, too many points."""


@dataclasses.dataclass(frozen=True)
class Axis:
    """A configuration field (``memory.dram_gbps``, ``tensordash.lookahead``, ``design``) and its values."""

    key: str
    values: tuple


@dataclasses.dataclass
class Point:
    """One point: its ``overrides`` (field -> value), its configurations (one per design, silicon resolved once
    mapped), and once mapped its ``rows`` (as ``map_trace`` returns them) and ``totals`` (``runner.totals``)."""

    overrides: dict
    configs: list
    rows: list = None
    totals: dict = None


def _split(text):
    """``text`` split at the commas outside brackets (a pattern ``T<2,5>`` or a list ``[1,2]`` is one value)."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += (char in "<[({") - (char in ">])}")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def _value(text):
    """A value as a configuration file would read it: YAML's scalar (``400`` a number, ``sta`` a string)."""
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return text if value is None or isinstance(value, dict) else value


def parse_axis(text):
    """``KEY=V1,V2,...`` as an ``Axis``; ``SweepError`` for a missing ``=``, key or value."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SweepError(f"--axis {text!r}: give KEY=V1,V2,... (e.g. memory.dram_gbps=25.6,400)")
    items = [item.strip() for item in _split(values)]
    if not values.strip() or not all(items):
        raise SweepError(f"--axis {key}: an empty value in {values!r}; give one or more values, comma-separated")
    return Axis(key, tuple(_value(item) for item in items))


def points(axes, grid=False):
    """The overrides of every point: each combination of the axes' values (``grid``), or each value of each axis
    alone; a point given twice is mapped once."""
    if grid:
        combos = [dict(zip((a.key for a in axes), values)) for values in itertools.product(*(a.values for a in axes))]
    else:
        combos = [{axis.key: value} for axis in axes for value in axis.values]
    unique = {}
    for combo in combos:
        unique.setdefault(repr(sorted(combo.items())), combo)
    return list(unique.values())


def _designs(value, default):
    """The designs a point maps: the ``design`` axis's value (a name, or names joined by "+"), else ``default``."""
    from dashraker.designs import DESIGNS

    if value is None:
        return default
    names = [name.strip() for name in str(value).split("+")]
    unknown = [name for name in names if name not in DESIGNS]
    if unknown:
        raise SweepError(f"--axis {DESIGN}: unknown design {unknown[0]!r}; choose from {', '.join(DESIGNS)}")
    return names


def _point(config_path, designs, overrides, device, base=None):
    """The point of ``overrides``: each design's configuration loaded and overridden (after ``base``, the overrides
    every point shares); ``SweepError`` naming the axis value a field's check refuses."""
    from dashraker.mapping.config import ConfigError, apply_overrides, load_config

    fields = {key: value for key, value in {**(base or {}), **overrides}.items() if key != DESIGN}
    try:
        configs = [load_config(config_path, name, device) for name in _designs(overrides.get(DESIGN), designs)]
    except ConfigError as error:
        raise SweepError(str(error)) from None
    try:
        return Point(overrides, [apply_overrides(config, fields) for config in configs])
    except ConfigError as error:
        raise SweepError(f"--axis {_shown(overrides)}: {error}") from None


def plan(trace, axes, grid=False, designs=None, config=None, steps=None, device="cpu", max_points=MAX_POINTS,
         base=None):
    """Every point of the sweep, built and checked, before any mapping: ``SweepError`` for no axis, an axis given
    twice, a value a field refuses, or more points than ``max_points`` (its estimated mapping time said)."""
    from dashraker.mapping.runner import configs_work, estimate_seconds, trace_work
    from dashraker.progress import duration
    from dashraker.trace import TraceError, open_trace

    if not axes:
        raise SweepError("give at least one --axis KEY=V1,V2,...")
    keys = [axis.key for axis in axes]
    if len(set(keys)) < len(keys):
        raise SweepError(f"--axis {next(k for k in keys if keys.count(k) > 1)} is given twice; list its values once")
    designs = list(designs or [None])
    overrides = points(axes, grid)
    built = [_point(config, designs, point, device, base) for point in overrides]
    try:
        work = trace_work(open_trace(trace), steps)
    except (TraceError, ValueError) as error:
        raise SweepError(str(error)) from None
    total = configs_work(work, [c for point in built for c in point.configs])
    if len(built) > max_points:
        shape = " x ".join(str(len(a.values)) for a in axes) if grid else " + ".join(str(len(a.values)) for a in axes)
        raise SweepError(f"{'--grid' if grid else '--one-at-a-time'}: {shape} = {len(built)} points (about "
                         f"{duration(estimate_seconds(total))} of CPU) is over --max-points {max_points}; sweep fewer "
                         "values or raise --max-points")
    return built, estimate_seconds(total)


def sweep(trace, axes=None, *, grid=False, designs=None, config=None, steps=None, jobs=None, dask=None,
          progress=True, device="cpu", area_cache="build/area", asic_cache="build/asic", max_points=MAX_POINTS,
          base=None, groups=1, **overrides):
    """Map ``trace`` at every point of the sweep; returns the mapped ``Point`` s.

    ``axes``: ``Axis`` es, or a dict field -> values; keyword ``overrides`` add axes, ``__`` for the dots
    (``memory__dram_gbps=[25.6, 400]``). The other arguments are ``map``'s: ``designs`` (names; default the
    configuration's), the configuration file ``config``, ``steps``, ``jobs`` or the Dask scheduler at ``dask``, the
    silicon caches, ``groups`` (each step's samples mapped as that many batches: ``runner.map_trace``); ``base``:
    overrides every point shares (field -> value). Raises ``SweepError`` before any mapping for bad input."""
    from dashraker.mapping import silicon
    from dashraker.mapping.runner import map_each, totals
    from dashraker.progress import stage

    axes = [*(axes.items() if isinstance(axes, dict) else axes or ()),
            *((key.replace("__", "."), values) for key, values in overrides.items())]
    axes = [axis if isinstance(axis, Axis) else Axis(axis[0], tuple(axis[1])) for axis in axes]
    for axis in axes:
        if not axis.values:
            raise SweepError(f"--axis {axis.key}: no values; give one or more")
    built, seconds = plan(trace, axes, grid, designs, config, steps, device, max_points, base)
    silicon.check_tools([c for point in built for c in point.configs])
    stage(f"sweep {Path(trace).name}: {len(built)} points", seconds / (jobs or 1))
    for point in built:
        point.configs = silicon.resolve_all(point.configs, area_cache, progress, jobs, asic_cache)
    each = iter(map_each(trace, [c for point in built for c in point.configs], steps, jobs, progress, dask,
                         groups=groups))
    for point in built:
        point.rows = [row for _ in point.configs for row in next(each)]
        point.totals = totals(point.rows)
    return built


def _shown(overrides):
    return ", ".join(f"{key}={value}" for key, value in overrides.items())


def _field(config, key):
    """The value ``config`` has for the field ``key`` (as its file spells it), or None where it has none."""
    from dashraker.mapping.config import field_value

    return config.design.name if key == DESIGN else field_value(config, key)


def bound(total):
    """What bounds a point's run: "compute" (no operation waits on DRAM), "DRAM" (all do) or "mixed"."""
    return "compute" if not total["memory_bound_ops"] else "DRAM" if total["memory_bound_ops"] == total["ops"] \
        else "mixed"


def table(built, axes):
    """The tidy table: a row per (point, design), the axes' values as that design's configuration has them, then
    its whole-trace figures (``runner.totals``) and what bounds it."""
    rows = []
    for index, point in enumerate(built):
        for config in point.configs:
            t = point.totals[config.design.name, "all"]
            rows.append({
                "point": index, **{axis.key: _field(config, axis.key) for axis in axes}, "design": config.design.name,
                "dense_cycles": t["dense_cycles"], "cycles": t["cycles"], "speedup": t["speedup"],
                "dense_time_s": t["dense_time_s"], "time_s": t["time_s"], "time_speedup": t["time_speedup"],
                "baseline_energy_pj": t["baseline_energy_pj"], "energy_pj": t["energy_pj"],
                "energy_efficiency": t["energy_efficiency"], "core_energy_efficiency": t["core_energy_efficiency"],
                "dram_bytes": t["dram_bytes"], "memory_bound_ops": t["memory_bound_ops"], "ops": t["ops"],
                "memory_bound_time_share": t["memory_bound_time_s"] / t["time_s"] if t["time_s"] else 0.0,
                "bound": bound(t),
            })
    return rows


def write_table(path, rows):
    """The tidy table as CSV (atomically)."""
    from dashraker.outputs import atomic_write

    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(path, lambda file: file.write(text.getvalue().encode()))


def write_parquet(path, rows):
    """The tidy table as Parquet (atomically); a column whose values differ in type (an axis of numbers and names,
    or of a design's field that another design lacks) holds them as text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dashraker.outputs import atomic_write

    columns = {}
    for key in rows[0]:
        values = [row[key] for row in rows]
        kinds = {type(value) for value in values if value is not None}
        if kinds == {int, float}:
            values = [None if value is None else float(value) for value in values]
        elif len(kinds) > 1:
            values = [None if value is None else str(value) for value in values]
        columns[key] = values
    buffer = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), buffer)
    atomic_write(path, lambda file: file.write(buffer.getvalue().to_pybytes()))


def _slug(key):
    return "".join(char if char.isalnum() else "_" for char in key)


def plot_name(axis):
    """The plot of an axis: ``sweep_<key>.png`` (and ``.svg``)."""
    return f"sweep_{_slug(axis.key)}.png"


def _numeric(values):
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def plot_axes(out, rows, axes, grid):
    """One figure per axis (``plot_name``): each metric of ``METRICS`` against the axis's values, a line per design
    (``palette.design_colour``), at the other axes' first values (``grid``) or as configured; the points a DRAM
    bounds wholly marked hollow. Returns the files' names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dashraker.mapping.palette import design_colour
    from dashraker.mapping.report import save_figures

    names = []
    for axis in axes:
        others = {a.key: a.values[0] for a in axes if a.key != axis.key}
        mine = [r for r in rows if all(_same(r, k, v) for k, v in others.items())] if grid else \
            [r for r in rows if r["_axis"] == axis.key]
        figure, panels = plt.subplots(1, len(METRICS), figsize=(4.6 * len(METRICS), 3.8), layout="constrained")
        numeric = _numeric(axis.values)
        for design in dict.fromkeys(r["design"] for r in mine):
            line = [r for r in mine if r["design"] == design]
            xs = [r[axis.key] if numeric else axis.values.index(_axis_value(r, axis)) for r in line]
            for ax, metric in zip(panels, METRICS):
                ax.plot(xs, [r[metric] for r in line], "-", color=design_colour(design), label=design)
                for x, r in zip(xs, line):
                    ax.plot([x], [r[metric]], "o", color=design_colour(design),
                            markerfacecolor="none" if r["bound"] == "DRAM" else design_colour(design))
        for ax, (metric, label) in zip(panels, METRICS.items()):
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_xlabel(axis.key)
            ax.set_ylabel(f"{label} over the dense baseline")
            if numeric and min(axis.values) > 0 and max(axis.values) / min(axis.values) >= 10:
                ax.set_xscale("log")
                ax.set_xticks(axis.values, [_text(v) for v in axis.values])
                ax.minorticks_off()
            if not numeric:
                ax.set_xticks(range(len(axis.values)), [str(v) for v in axis.values], rotation=30, ha="right")
            ax.legend(fontsize=7)
        where = ", ".join(f"{k}={v}" for k, v in others.items()) if grid and others else "the rest as configured"
        figure.suptitle(f"{axis.key} ({where}); hollow: every operation DRAM-bound", fontsize=9)
        save_figures(figure, out / plot_name(axis))
        names += [plot_name(axis), Path(plot_name(axis)).with_suffix(".svg").name]
    return names


def _same(row, key, value):
    return row.get(key) == value or (key == DESIGN and row["design"] in str(value).split("+"))


def _axis_value(row, axis):
    """The axis value a row was mapped at (a ``design`` axis's row: the value naming its design)."""
    if axis.key == DESIGN:
        return next(v for v in axis.values if row["design"] in str(v).split("+"))
    return row[axis.key]


def register(subparsers):
    from dashraker.designs import DESIGNS
    from dashraker.mapping.cli import add_config_option, add_dask_option

    parser = subparsers.add_parser(
        "sweep", help="map a trace over values of configuration fields: speedups and efficiency per point",
        description="Map a recorded trace at every point of a sweep over configuration fields (any field of the "
        "configuration file, dotted: memory.dram_gbps, tiles, tensordash.lookahead, clock_mhz, energy_table, ...; "
        "or 'design'); write sweep.csv and sweep.parquet (a row per point and design), sweep.json and a plot per "
        "axis.")
    parser.add_argument("trace", type=path_argument, help="trace folder (dashraker trace record)")
    parser.add_argument("--axis", action="append", required=True, metavar="KEY=V1,V2,...",
                        help="a field and its values, repeatable (e.g. memory.dram_gbps=25.6,400,1600; "
                        "design=tensordash,fpraker; a value with commas in brackets stays whole: T<2,5>)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--grid", action="store_true", help="every combination of the axes' values")
    mode.add_argument("--one-at-a-time", action="store_true", help="each value of each axis, the other fields as "
                      "configured (default)")
    add_config_option(parser)
    parser.add_argument("--design", action="append", help="design(s) mapped at each point, as 'map' "
                        f"({', '.join(DESIGNS)}, all); default: the configuration's")
    parser.add_argument("--out", required=True, help="folder for sweep.csv, sweep.parquet, sweep.json and the plots "
                        "(replaced whole at the end; a folder holding anything else is refused)")
    parser.add_argument("--step", action="append", help="recorded step(s) to map (default: all)")
    parser.add_argument("--max-points", type=int, default=MAX_POINTS, help="refuse a sweep of more points "
                        f"(default {MAX_POINTS}; the refusal says the estimated mapping time)")
    parser.add_argument("--jobs", type=int, default=None, help="local worker processes per point, as 'map'")
    add_dask_option(parser, ", as 'map'")
    parser.add_argument("--device", default="cpu", help="where the cost models run, as 'map' (default cpu)")
    parser.add_argument("--area-cache", type=path_argument, default=Path("build/area"), help="as 'map' (default build/area)")
    parser.add_argument("--asic-cache", type=path_argument, default=Path("build/asic"), help="as 'map' (default build/asic)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (stage lines stay)")
    parser.set_defaults(func=run)


def _is_sweep_output(path):
    return all(entry.name in (TABLE, PARQUET, "sweep.json") or entry.name.startswith("sweep_")
               for entry in Path(path).iterdir())


def run(args):
    from dashraker.mapping.cli import design_list
    from dashraker.mapping.config import ConfigError, check_device
    from dashraker.mapping.executors import ClusterError
    from dashraker.mapping.silicon import SiliconError
    from dashraker.outputs import OutputFolder
    from dashraker.trace import TraceError
    from dashraker.trace.cli import step_list
    from dashraker.trace.store import save_json

    if args.jobs is not None and args.jobs < 1:
        raise CliError(f"--jobs must be at least 1, not {args.jobs}")
    if args.jobs is not None and args.dask:
        raise CliError("--jobs and --dask exclude each other: the cluster's workers are the jobs")
    if not (args.trace / "manifest.json").is_file():
        raise CliError(f"{args.trace}: not a trace folder (no manifest.json)")
    try:
        check_device(args.device)
        axes = [parse_axis(text) for text in args.axis]
        steps, designs = step_list("--step", args.step), design_list(args.design)
        plan(args.trace, axes, args.grid, designs, args.config, steps, args.device, args.max_points)
    except (SweepError, ConfigError) as error:
        raise CliError(str(error)) from None
    out = OutputFolder(args.out, "--out", _is_sweep_output, "give a new folder or one of an earlier sweep")
    with out:
        try:
            built = sweep(args.trace, axes, grid=args.grid, designs=designs, config=args.config, steps=steps,
                          jobs=args.jobs, dask=args.dask, progress=not args.no_progress,
                          device=args.device, area_cache=args.area_cache, asic_cache=args.asic_cache,
                          max_points=args.max_points)
        except (SweepError, SiliconError, TraceError, ClusterError, ValueError) as error:
            raise CliError(str(error)) from None
        rows = table(built, axes)
        print(summary(rows, axes))
        with out.staging() as staging:
            write_table(staging / TABLE, rows)
            write_parquet(staging / PARQUET, rows)
            save_json(staging / "sweep.json", {"trace": str(args.trace), "mode": "grid" if args.grid else
                                               "one-at-a-time", "axes": {a.key: list(a.values) for a in axes},
                                               "points": [{"overrides": p.overrides,
                                                           "configs": [c.as_dict() for c in p.configs]}
                                                          for p in built], "table": rows})
            names = [TABLE, PARQUET, "sweep.json",
                     *plot_axes(staging, _tagged(rows, built, axes, args.grid), axes, args.grid)]
    print("\nwrote " + ", ".join(str(out.path / name) for name in names))


def _tagged(rows, built, axes, grid):
    """One-at-a-time: each row with the axis its point overrides (``_axis``), for the plots."""
    if grid:
        return rows
    return [{**row, "_axis": next(k for k in built[row["point"]].overrides)} for row in rows]


def summary(rows, axes):
    """The tidy table as fixed-width text."""
    keys = [axis.key for axis in axes if axis.key != DESIGN]
    width = max([len(k) for k in keys] + [8])
    header = " ".join(f"{k:>{width}}" for k in keys) + f" {'design':<11} {'speedup':>8} {'time spd':>8} " \
        f"{'energy eff':>10} {'DRAM-bound':>10} {'bound':>7}"
    lines = [header, "-" * len(header)]
    for r in rows:
        values = " ".join(f"{_text(r[k]):>{width}}" for k in keys)
        lines.append(f"{values} {r['design']:<11} {r['speedup']:>7.2f}x {r['time_speedup']:>7.2f}x "
                     f"{r['energy_efficiency']:>9.2f}x {r['memory_bound_ops']:>5}/{r['ops']:<4} {r['bound']:>7}")
    return "\n".join(lines)


def _text(value):
    return f"{value:g}" if isinstance(value, float) and math.isfinite(value) else str(value)
