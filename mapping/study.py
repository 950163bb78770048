"""``dashraker study TRACE...``: the papers' comparison points on recorded traces, in one Markdown report.

Each trace is mapped on every design under the accountings the seed papers and this project
differ on, each against the reference (dense) design in the same accounting:

* tiles: the configured ones (each design its configuration's tiles, of its own lanes) or as many as fit the
  reference's area (iso-area);
* area scope: the tiles' logic (``compute``) or also their SRAM buffers and the global buffer (``chip``),
  which sets the iso-area budget and the silicon that leaks;
* memory: values dense or zero-value compressed (``zvc``).

Leakage is always charged (of the scope's silicon, over each operation's run time); the
report also shows the verdicts without it. A design's verdicts move from one accounting to
the next one axis at a time, so the report attributes the gap to the papers axis by axis.

Each accounting is judged under the configuration's silicon model (``mapping.silicon``: the
tiles' CMOS transistors, or their cells on a standard-cell library), or under both side by side
(``--silicon both``; mapping the packaged tiles onto the library takes minutes each, so only when
asked). Each design runs at the configuration's clock: a number, or its tile's static timing
(``clock_mhz: sta``, ``common``), which the report shows with its source.

Each published claim at iso-area (FPRaker's) is also judged against each dense baseline in turn, the tree, the fused
dot product and the fused multiply-add lanes (``mapping.baselines``), whichever the configuration's reference is.

Each step's recorded samples are mapped in groups of ``--group-size`` samples (``runner.group_samples``), and every
figure, whole, per operation, per layer and per step, comes with its confidence interval from a bootstrap over
those groups (``mapping.intervals``); each paper's claim is judged against the interval.
"""

import dataclasses
import math
import time
from pathlib import Path

from dashraker.designs import DESIGNS
from dashraker.errors import CliError
from dashraker.mapping import baselines
from dashraker.mapping.accountings import AXES, CREDITED, SCENARIOS
from dashraker.mapping.ops import OPS
from dashraker.outputs import path_argument

__all__ = ["SCENARIOS", "CREDITED", "AXES", "RATIOS", "register", "run", "study", "accounting", "whole",
           "scenario_figures"]

REPORTS = ("report.md", "study.json", "study.png", "study.svg")
BOTH = "both"  # --silicon: every silicon model, side by side


def register(subparsers):
    from dashraker.mapping.cli import add_config_option, add_dask_option, add_silicon_options
    from dashraker.mapping.config import AREA_ESTIMATES, SILICON_MODELS
    from dashraker.mapping.intervals import LEVEL

    parser = subparsers.add_parser(
        "study", help="the seed papers' comparison points on recorded traces, in one Markdown report",
        description="Map the traces on every design at the configured tiles and at iso-area, at compute and chip area "
        "scope, with dense and zero-value compressed memory, under one silicon model or both; write report.md (the "
        "papers' headline figures beside ours with confidence intervals, the gap attributed axis by axis, per "
        "operation, layer and step), study.json and study.png (and .svg).")
    parser.add_argument("traces", type=path_argument, nargs="+", metavar="TRACE", help="trace folders (dashraker trace record)")
    add_config_option(parser)
    parser.add_argument("--out", type=path_argument, default=Path("build/study"), help="report folder (replaced whole at the "
                        "end; a folder holding anything else is refused; default build/study)")
    parser.add_argument("--step", action="append", help="recorded step(s) to map, repeatable or comma-separated "
                        "(default: all)")
    parser.add_argument("--group-size", type=int, help="map each step's samples in batches of this many, which the "
                        "intervals also resample within each step (default: each step's recorded samples as one batch, "
                        "as 'map' does; the intervals then resample the steps alone)")
    parser.add_argument("--confidence", type=float, default=LEVEL, help=f"the intervals' confidence level "
                        f"(default {LEVEL})")
    parser.add_argument("--jobs", type=int, default=None, help="local worker processes, as 'map' (default: by the "
                        "work)")
    add_dask_option(parser, ", as 'map'")
    add_silicon_options(parser, (*SILICON_MODELS, BOTH))
    parser.add_argument("--area-estimate", choices=AREA_ESTIMATES, help="tiles' area: asic (queues "
                        "as register files) or generated (the RTL as it is), as 'map' (default: the configuration's)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--sensitivity", action="store_true", help="also how far each deciding assumption moves each "
                        "verdict over a documented range (mapping.sensitivity: the first trace mapped again at each end "
                        "of each range, about 10 maps)")
    parser.set_defaults(func=run)


def _is_study_output(path):
    from dashraker.mapping.sensitivity import PLOTS

    return {entry.name for entry in Path(path).iterdir()} <= {*REPORTS, *PLOTS}


def _groups(traces, group_size):
    """Per trace, the groups of ``group_size`` samples (None: all of them) each recorded step is mapped in; a
    ``CliError`` where a trace records fewer samples than a group holds, before any work."""
    from dashraker.trace import TraceError, open_trace

    if group_size is None:
        return [1] * len(traces)
    if group_size < 1:
        raise CliError(f"--group-size must be at least 1, not {group_size}")
    groups = []
    for trace in traces:
        try:
            samples = min(layer.input_shape[0] for layer in open_trace(trace).layers)
        except (TraceError, ValueError) as error:
            raise CliError(str(error)) from None
        if samples < group_size:
            raise CliError(f"{trace}: {samples} sample(s) recorded per step, fewer than --group-size {group_size}")
        groups.append(samples // group_size)
    return groups


def run(args):
    from dashraker.mapping.cli import check_sizes, check_trace
    from dashraker.mapping.study_report import plot, report
    from dashraker.outputs import OutputFolder
    from dashraker.trace.cli import step_list

    if args.jobs is not None and args.jobs < 1:
        raise CliError(f"--jobs must be at least 1, not {args.jobs}")
    if args.jobs is not None and args.dask:
        raise CliError("--jobs and --dask exclude each other: the cluster's workers are the jobs")
    if not 0 < args.confidence < 1:
        raise CliError(f"--confidence must be between 0 and 1, not {args.confidence}")
    for trace in args.traces:
        if not (trace / "manifest.json").is_file():
            raise CliError(f"{trace}: not a trace folder (no manifest.json)")
    _groups(args.traces, args.group_size)
    steps = step_list("--step", args.step)
    configs = _configs(args.config, args.area_estimate, args.silicon, args.asic_cache)  # bad input before the work
    every = [c for scoped in configs.values() for c in scoped]
    every += [c for by_model in baselines.configure(configs).values() if not isinstance(by_model, str)
              for scoped in by_model.values() for c in scoped]
    check_sizes(every, args.area_cache, args.asic_cache, args.force_size)
    given = {}
    for trace in args.traces:  # every trace checked before the first one's study
        if trace.resolve() in given:
            raise CliError(f"{trace}: given twice (first as {given[trace.resolve()]}); each trace is studied once")
        given[trace.resolve()] = trace
        check_trace(trace, every, steps)
    out = OutputFolder(args.out, "--out", _is_study_output, "give a new folder or one of an earlier study")
    start = time.perf_counter()
    with out:
        result = study(args.traces, configs, steps, args.jobs, args.dask, args.area_cache, not args.no_progress,
                       args.asic_cache, args.group_size, args.confidence)
        result["wall_s"] = round(time.perf_counter() - start, 1)
        text = report(result)
        if args.sensitivity:
            from dashraker.mapping import sensitivity

            result["sensitivity"] = sensitivity.for_study(args, steps, _groups(args.traces[:1], args.group_size)[0])
            text += "\n" + "\n".join(sensitivity.report_lines(result["sensitivity"]))
        with out.staging() as staging:
            from dashraker.outputs import atomic_write
            from dashraker.trace.store import save_json

            atomic_write(staging / "report.md", lambda file: file.write(text.encode()))
            save_json(staging / "study.json", result)
            plot(staging / "study.png", result)
            if args.sensitivity:
                sensitivity.plot(staging / sensitivity.PLOTS[0], result["sensitivity"])
    print(f"\nwrote {out.path / 'report.md'} (with study.json, study.png, study.svg) in {result['wall_s']:.0f} s")


def _configs(config_path, area_estimate=None, silicon=None, asic_cache="build/asic"):
    """Per silicon model of ``silicon`` (one of ``SILICON_MODELS``, ``BOTH``, or None: the configuration's), every
    design's configuration at compute scope (under ``area_estimate``, default the configuration's), the reference
    first; a ``CliError`` for a bad configuration or a library's missing tools, before any synthesis."""
    from dashraker.designs import reference
    from dashraker.mapping.cli import check_tools
    from dashraker.mapping.config import SILICON_MODELS, ConfigError, load_config

    names = [reference().name, *(name for name in DESIGNS if name != reference().name)]
    try:
        configs = [dataclasses.replace(load_config(config_path, name), area_scope="compute") for name in names]
    except ConfigError as error:
        raise CliError(str(error)) from None
    if area_estimate:
        configs = [dataclasses.replace(c, area_estimate=area_estimate) for c in configs]
    models = SILICON_MODELS if silicon == BOTH else [silicon or configs[0].silicon]
    by_model = {model: [dataclasses.replace(c, silicon=model) for c in configs] for model in models}
    check_tools([c for configs in by_model.values() for c in configs], asic_cache)
    return by_model


def _mapper(trace, configs, steps, jobs, dask, progress, groups):
    """``rows(tiles, compression, label, designs=configs)``: the mapper's rows of ``trace`` (each step's samples in
    ``groups`` groups) for every one of the ``designs``' configurations at ``tiles[design]`` tiles, each (design, its
    parameters, tiles, compression) mapped once, whichever accounting, silicon model or reference asks (leakage is
    charged again by ``scenario_figures``; the study reads a design's own figures alone, which do not depend on the
    reference). ``rows.fetch(requests, label)`` maps every ``(tiles, compression, designs)`` of ``requests`` in one
    run, where they share their evaluation (``runner.map_each``)."""
    from dashraker.mapping.executors import ClusterError
    from dashraker.mapping.runner import map_each
    from dashraker.trace import TraceError

    done = {}  # (design, parameters, tiles, compression) -> rows

    def key(config):
        return config.design.name, repr(sorted(config.params.items())), config.tiles, config.memory.compression

    def at(tiles, compression, designs):
        return [dataclasses.replace(c, tiles=tiles[c.design.name],
                                    memory=dataclasses.replace(c.memory, compression=compression)) for c in designs]

    def fetch(requests, label):
        todo = {}
        for tiles, compression, designs in requests:
            todo.update((key(c), c) for c in at(tiles, compression, designs) if key(c) not in done)
        if todo:
            if progress:
                print(f"study {trace}: {label}: mapping {len(todo)} configurations of "
                      f"{', '.join(dict.fromkeys(c.design.name for c in todo.values()))}", flush=True)
            try:
                mapped = map_each(trace, list(todo.values()), steps, jobs, progress, dask, groups=groups)
            except (TraceError, ValueError, ClusterError) as error:
                raise CliError(str(error)) from None
            done.update(zip(todo, mapped))

    def rows(tiles, compression, label, designs=configs):
        fetch([(tiles, compression, designs)], label)
        return [row for c in at(tiles, compression, designs) for row in done[key(c)]]

    rows.fetch = fetch
    return rows


def _silicon(configs, tiles):
    """One silicon model's figures of ``configs``: each tile, its areas at both scopes and its iso-area tiles."""
    from dashraker.mapping import isoarea

    return {"unit": isoarea.unit("asic", configs[0]), "library": configs[0].library,
            "designs": {c.design.name: {"tile_area": c.tile.area, "tile_leakage_nw": c.tile.leakage_nw,
                                        "reference_tile_area": c.reference_tile.area,
                                        "area": {scope: _area(c, scope, c.tiles) for scope in ("compute", "chip")}}
                        for c in configs},
            "tiles_iso": {scope: tiles[scope] for scope in ("compute", "chip")}}


def _tile_counts(models, area_cache, progress):
    """Per silicon model, the tiles of each design: configured ("equal") and iso-area under each scope."""
    from dashraker.mapping import isoarea

    tiles = {}
    for model, resolved in models.items():
        tiles[model] = {"equal": {c.design.name: c.tiles for c in resolved}}
        for scope in ("compute", "chip"):
            scoped = [dataclasses.replace(c, area_scope=scope) for c in resolved]
            try:
                tiles[model][scope] = isoarea.budget(scoped, "asic", area_cache, None, progress).tiles_iso
            except isoarea.AreaMeasureError as error:
                raise CliError(str(error)) from None
    return tiles


def _setup(models, ref):
    """What the study ran under, for the report: the configuration, its energy model, area estimate and memory, the
    designs' parameters and clocks, and what the report's assumptions are read from."""
    mapped = next(iter(models.values()))
    first = mapped[0]
    timed = {c.design.name: c.tile for resolved in models.values() for c in resolved if c.tile.fmax_mhz is not None}
    return {"config": first.path, "preset": first.preset, "reference": ref,
            "reference_params": first.reference, "energy_table": first.energy.path,
            "energy_models": [f"the energy table ({first.energy.name})"], "area_estimate": first.area_estimate,
            "silicon_models": list(models), "memory": dataclasses.asdict(first.memory),
            "table_silicon": dict(first.energy.silicon),
            "designs": {c.design.name: {"params": c.params, "tiles": c.tiles} for c in mapped},
            "clocks": {c.design.name: {"mhz": c.clock_mhz, "source": c.clock_source,
                                       "reference_mhz": c.reference_clock_mhz, "library": c.library,
                                       "fmax_mhz": getattr(timed.get(c.design.name), "fmax_mhz", None),
                                       "path": getattr(timed.get(c.design.name), "path", None)} for c in mapped}}


def study(traces, configs, steps=None, jobs=None, dask=None, area_cache="build/area", progress=True,
          asic_cache="build/asic", group_size=None, level=None):
    """Map ``traces`` under every accounting of ``SCENARIOS`` for each silicon model of ``configs`` (``_configs``'
    dict: model -> every design's configuration); returns the figures ``report`` writes. The runs are the first
    model's configurations': the models differ in the tiles' areas and leakage alone, so the accountings of equal
    tiles share their runs. Each step's samples are mapped in groups of ``group_size`` (``_groups``; default: one
    batch); the intervals are at ``level`` (default ``intervals.LEVEL``)."""
    from dashraker.designs import reference
    from dashraker.mapping.cli import with_silicon
    from dashraker.mapping.intervals import LEVEL

    ref = reference().name
    models = {model: with_silicon(scoped, area_cache, progress, jobs, asic_cache) for model, scoped in configs.items()}
    tiles = _tile_counts(models, area_cache, progress)
    against = baselines.resolve(baselines.configure(configs), area_cache, progress, jobs, asic_cache)
    groups = _groups(traces, group_size)
    result = {**_setup(models, ref), "confidence": level or LEVEL, "group_size": group_size,
              "silicon": {model: _silicon(resolved, tiles[model]) for model, resolved in models.items()},
              "baselines": baselines.summary(against), "traces": []}
    for trace, count in zip(traces, groups):
        result["traces"].append(_trace_figures(trace, (models, against), tiles, ref, steps, jobs, dask, progress,
                                               count, result["confidence"]))
    return result


def _trace_figures(trace, configured, tiles, ref, steps, jobs, dask, progress, groups, level):
    """One trace's figures in every accounting under every silicon model, with their intervals, and its iso-area
    claims' against each baseline; ``configured``: the resolved configurations, per silicon model, and per baseline
    (``baselines.resolve``)."""
    from dashraker.mapping.intervals import Intervals
    from dashraker.trace import open_trace

    models, against = configured
    mapped = next(iter(models.values()))
    opened = open_trace(trace)
    manifest = opened.manifest
    rows = _mapper(trace, mapped, steps, jobs, dask, progress, groups)
    rows.fetch([(tiles[model][_tiles_of(s)], s.compression, mapped) for model in models for s in (*SCENARIOS, CREDITED)]
               + baselines.requests(against), "every accounting")
    equal = rows(tiles[next(iter(models))]["equal"], "none", "configured tiles")
    bootstrap = Intervals(sorted({(row["step"], row["group"]) for row in equal}), level=level)
    scenarios = {}
    for model, resolved in models.items():
        by_name, counts = {c.design.name: c for c in resolved}, tiles[model]
        figures = {}
        for s in SCENARIOS:
            chosen = counts[_tiles_of(s)]
            figures[s.key] = accounting(s, rows(chosen, s.compression, f"{s.label}, {model}"), by_name, chosen, ref,
                                        bootstrap)
        credited = [r for r in rows(counts["equal"], "zvc", CREDITED.label) if r["design"] != ref]
        credited += [r for r in rows(counts["equal"], "none", CREDITED.label) if r["design"] == ref]
        figures[CREDITED.key] = accounting(CREDITED, credited, by_name, counts["equal"], ref, bootstrap)
        scenarios[model] = figures
    equal_sums = _parts(equal)
    breakdown = {c.design.name: {op: t["cycle_breakdown"] for (d, op), t in equal_sums.items()
                                 if d == c.design.name and op in (*OPS, "all") and "cycle_breakdown" in t}
                 for c in mapped}
    samples = {}
    for row in equal:
        samples.setdefault(row["step"], {})[row["group"]] = row["samples"]
    return {"trace": str(trace), "model": manifest["model"], "data": manifest.get("data"), "steps": steps,
            "groups": dict(bootstrap.groups),
            "samples": {step: sum(by_group.values()) for step, by_group in samples.items()},
            "scenarios": scenarios, "baselines": baselines.figures(against, rows, whole, bootstrap),
            "cycle_breakdown": {k: v for k, v in breakdown.items() if v},
            "unrecorded_layers": [{"name": name, "type": kind} for name, kind in opened.unrecorded]}


def _tiles_of(scenario):
    """The key of a silicon model's tile counts (``_tile_counts``) that ``scenario`` maps at."""
    return "equal" if scenario.tiles == "equal" else scenario.scope


def _area(config, scope, tiles):
    """A design's area in its silicon model's unit under ``scope`` with ``tiles`` tiles."""
    from dashraker.mapping import silicon

    return silicon.silicon_area(dataclasses.replace(config, area_scope=scope), config.tile, tiles)


def _parts(rows):
    """The mapper's totals of ``rows`` per design and part: ``(design, op)`` for each operation and "all" (as
    ``runner.totals``), ``(design, (layer, op))`` for each layer's operations and all of them."""
    from dashraker.mapping.runner import totals

    out = dict(totals(rows))
    by_layer = {}
    for row in rows:
        by_layer.setdefault(row["layer"], []).append(row)
    for layer, group in by_layer.items():
        out.update({(design, (layer, op)): total for (design, op), total in totals(group).items()})
    return out


# Each ratio the study reports: the reference's figure over a design's, of the ``scenario_figures`` field named.
RATIOS = {"speedup": "cycles", "time_speedup": "time_s", "energy_efficiency": "energy_pj",
          "energy_efficiency_no_leakage": "dynamic_energy_pj", "core_energy_efficiency": "core_energy_pj",
          "throughput_per_area": "compute_s"}


def _intervals(point, pieces, bootstrap, reference):
    """``point`` (``scenario_figures``' of a part) with each design's ``intervals``: per ratio of ``RATIOS``, its
    bootstrap interval from the per-group ``pieces`` (``scenario_figures`` of each of ``bootstrap.units``)."""
    for name, figures in point.items():
        if name == reference:
            continue
        area = point[reference]["area"] / figures["area"]
        figures["intervals"] = {
            metric: bootstrap.ratio([p[reference][field] for p in pieces], [p[name][field] for p in pieces],
                                    area if metric == "throughput_per_area" else 1.0)
            for metric, field in RATIOS.items()}
    return point


def _units(rows, bootstrap):
    """The rows of each of ``bootstrap``'s units (step, group), and each unit's totals (``_parts``) in its order."""
    units = {}
    for row in rows:
        units.setdefault((row["step"], row["group"]), []).append(row)
    return units, [_parts(units[unit]) for unit in bootstrap.units]


def _figures(scenario, sums, pieces, compared, part, resampled):
    """``scenario_figures`` of ``part`` of ``sums`` with their intervals from the per-unit ``pieces``; ``compared``:
    (configs, tiles, reference)."""
    point = scenario_figures(scenario, sums, *compared, part)
    return _intervals(point, [scenario_figures(scenario, p, *compared, part) for p in pieces], resampled, compared[2])


def whole(scenario, rows, configs, tiles, reference, bootstrap):
    """Per design, its figures in ``scenario`` over all of ``rows`` (``scenario_figures``) with their intervals."""
    return _figures(scenario, _parts(rows), _units(rows, bootstrap)[1], (configs, tiles, reference), "all", bootstrap)


def accounting(scenario, rows, configs, tiles, reference, bootstrap):
    """Per design, its figures in ``scenario`` (``scenario_figures``) from the mapper's ``rows``, with their
    intervals, and the same per operation (``ops``), per layer and operation (``layers``) and per step (``steps``,
    each step's groups resampled alone)."""
    sums = _parts(rows)
    units, by_unit = _units(rows, bootstrap)
    names = list(configs)

    def figures(sums, pieces, part, resampled):
        return _figures(scenario, sums, pieces, (configs, tiles, reference), part, resampled)

    out = figures(sums, by_unit, "all", bootstrap)
    parts = [part for (name, part) in sums if name == reference and part != "all"]
    for name in names:
        out[name].update(ops={}, layers={}, steps={})
    for part in parts:
        point = figures(sums, by_unit, part, bootstrap)
        for name in names:
            if isinstance(part, tuple):
                out[name]["layers"].setdefault(part[0], {})[part[1]] = _ratios(point[name])
            else:
                out[name]["ops"][part] = _ratios(point[name])
    for step in dict.fromkeys(unit[0] for unit in bootstrap.units):
        within = bootstrap.within(step)
        step_rows = [row for unit in within.units for row in units[unit]]
        point = figures(_parts(step_rows), [by_unit[bootstrap.units.index(u)] for u in within.units], "all", within)
        for name in names:
            out[name]["steps"][step] = _ratios(point[name])
    return out


def _ratios(figures):
    """A part's ratios and their intervals (the reference's have none)."""
    return {**{metric: figures[metric] for metric in RATIOS}, "intervals": figures.get("intervals", {})}


def scenario_figures(scenario, sums, configs, tiles, reference, part="all"):
    """Per design, its figures in ``scenario`` against the reference's in the same accounting: speedup (cycles and
    time), energy efficiency with and without leakage, core (compute) energy efficiency (clocking included), the
    clocking and leakage, areas, throughput (compute time: the cycles at each design's clock) per area, of ``part``
    of the totals ``sums`` (keys ``(design,
    part)``: "all", an operation, or a (layer, operation)). The leakage and the clocking ``sums`` were mapped with are
    charged again, of ``configs``' tiles (their silicon model) in the scenario's scope."""
    from dashraker.mapping import silicon

    def energy(name):
        config = dataclasses.replace(configs[name], area_scope=scenario.scope, tiles=tiles[name])
        total = sums[name, part]
        mapped_leak, mapped_clock = (total["energy_breakdown_pj"].get(key, 0.0) for key in ("leakage", "clock"))
        leak = silicon.leakage_pj(config, config.tile, total["time_s"])
        clock = silicon.clock_pj(config, config.tile, total["time_s"], config.clock_mhz)
        dynamic = total["energy_pj"] - mapped_leak - mapped_clock + clock
        return dynamic + leak, dynamic, total["core_energy_pj"] - mapped_clock + clock, leak, clock

    ref = sums[reference, part]
    ref_energy, ref_dynamic, ref_core, *_ = energy(reference)
    ref_area = _area(configs[reference], scenario.scope, tiles[reference])
    out = {}
    for name in configs:
        total = sums[name, part]
        joules, dynamic, core, leak, clock = energy(name)
        area = _area(configs[name], scenario.scope, tiles[name])
        speedup = ref["cycles"] / total["cycles"] if total["cycles"] else math.inf
        throughput = ref["compute_s"] / total["compute_s"] if total["compute_s"] else math.inf
        out[name] = {
            "tiles": tiles[name], "clock_mhz": configs[name].clock_mhz, "cycles": total["cycles"],
            "time_s": total["time_s"], "compute_s": total["compute_s"], "energy_pj": joules, "leakage_pj": leak,
            "clock_pj": clock,            "dynamic_energy_pj": dynamic, "core_energy_pj": core, "speedup": speedup,
            "time_speedup": ref["time_s"] / total["time_s"], "energy_efficiency": ref_energy / joules,
            "energy_efficiency_no_leakage": ref_dynamic / dynamic, "core_energy_efficiency": ref_core / core,
            "area": area, "area_overhead": area / ref_area - 1 if tiles[name] == tiles[reference] else None,
            "throughput_per_area": throughput * ref_area / area, "dram_bytes": total["dram_bytes"],
        }
    return out
