"""``dashraker study TRACE...``: the papers' comparison points on recorded traces, in one Markdown report.

Each trace is mapped on every design under the accountings the seed papers and this project
differ on, each against the reference (dense) design in the same accounting:

* tiles: the configured ones (equal lanes) or as many as fit the reference's area (iso-area);
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
"""

import dataclasses
import math
import platform
import subprocess
import time
from pathlib import Path

from dashraker.designs import DESIGNS
from dashraker.errors import CliError

__all__ = ["SCENARIOS", "register", "run", "study", "scenario_figures", "report"]

REPORTS = ("report.md", "study.json", "study.png")
BOTH = "both"  # --silicon: every silicon model, side by side


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One accounting: the tiles each design gets, the area scope and the memory compression."""

    key: str
    label: str
    tiles: str  # "equal" (configured) or "iso" (iso-area under this scope)
    scope: str  # "compute" or "chip"
    compression: str  # "none" or "zvc"


SCENARIOS = (
    Scenario("equal", "equal lanes, compute scope, dense memory", "equal", "compute", "none"),
    Scenario("equal_chip", "equal lanes, chip scope, dense memory", "equal", "chip", "none"),
    Scenario("equal_chip_zvc", "equal lanes, chip scope, ZVC memory", "equal", "chip", "zvc"),
    Scenario("iso", "iso-area, compute scope, dense memory", "iso", "compute", "none"),
    Scenario("iso_chip", "iso-area, chip scope, dense memory", "iso", "chip", "none"),
    Scenario("iso_chip_zvc", "iso-area, chip scope, ZVC memory", "iso", "chip", "zvc"),
)

# TensorDash's paper compresses on its own design: the designs with ZVC against the reference dense (from the same
# runs as the equal-lanes accountings at chip scope).
CREDITED = Scenario("equal_chip_zvc_designs", "equal lanes, chip scope, ZVC for the designs, dense reference", "equal",
                    "chip", "zvc")

# The axes a verdict moves along: (axis, from scenario, to scenario); "leakage" compares with and without it.
AXES = (
    ("leakage (of the tiles' logic)", "equal", "equal"),
    ("on-chip SRAM in the silicon (chip scope)", "equal", "equal_chip"),
    ("zero-value compressed memory", "equal_chip", "equal_chip_zvc"),
    ("ZVC for the designs only, the reference dense", "equal_chip", "equal_chip_zvc_designs"),
    ("area budget: iso-area tiles (compute scope)", "equal", "iso"),
    ("SRAM in the iso-area budget (chip scope)", "iso", "iso_chip"),
    ("zero-value compressed memory at iso-area", "iso_chip", "iso_chip_zvc"),
)

def register(subparsers):
    from dashraker.mapping.cli import add_dask_option, add_silicon_options
    from dashraker.mapping.config import AREA_ESTIMATES, SILICON_MODELS

    parser = subparsers.add_parser(
        "study", help="the seed papers' comparison points on recorded traces, in one Markdown report",
        description="Map the traces on every design at equal lanes and at iso-area, at compute and chip area "
        "scope, with dense and zero-value compressed memory, under one silicon model or both; write report.md (the "
        "papers' headline figures beside ours, the gap attributed axis by axis), study.json and study.png.")
    parser.add_argument("traces", type=Path, nargs="+", metavar="TRACE", help="trace folders (dashraker trace record)")
    parser.add_argument("--config", type=Path, help="accelerator configuration YAML (default: the packaged one)")
    parser.add_argument("--out", type=Path, default=Path("build/study"), help="report folder (replaced whole at the "
                        "end; a folder holding anything else is refused; default build/study)")
    parser.add_argument("--step", action="append", help="recorded step(s) to map, repeatable or comma-separated "
                        "(default: all)")
    parser.add_argument("--jobs", type=int, default=None, help="local worker processes, as 'map' (default: by the "
                        "work)")
    add_dask_option(parser, ", as 'map'")
    add_silicon_options(parser, (*SILICON_MODELS, BOTH))
    parser.add_argument("--area-estimate", choices=AREA_ESTIMATES, help="tiles' area: asic (queues "
                        "as register files) or generated (the RTL as it is), as 'map' (default: the configuration's)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def _is_study_output(path):
    return {entry.name for entry in Path(path).iterdir()} <= set(REPORTS)


def run(args):
    from dashraker.outputs import OutputFolder
    from dashraker.trace.cli import step_list

    if args.jobs is not None and args.jobs < 1:
        raise CliError(f"--jobs must be at least 1, not {args.jobs}")
    if args.jobs is not None and args.dask:
        raise CliError("--jobs and --dask exclude each other: the cluster's workers are the jobs")
    for trace in args.traces:
        if not (trace / "manifest.json").is_file():
            raise CliError(f"{trace}: not a trace folder (no manifest.json)")
    steps = step_list("--step", args.step)
    configs = _configs(args.config, args.area_estimate, args.silicon, args.asic_cache)  # bad input before the work
    out = OutputFolder(args.out, "--out", _is_study_output, "give a new folder or one of an earlier study")
    start = time.perf_counter()
    with out:
        result = study(args.traces, configs, steps, args.jobs, args.dask, args.area_cache, not args.no_progress,
                       args.asic_cache)
        result["wall_s"] = round(time.perf_counter() - start, 1)
        text = report(result)
        with out.staging() as staging:
            from dashraker.outputs import atomic_write
            from dashraker.trace.store import save_json

            atomic_write(staging / "report.md", lambda file: file.write(text.encode()))
            save_json(staging / "study.json", result)
            plot(staging / "study.png", result)
    print(f"\nwrote {out.path / 'report.md'} (with study.json, study.png) in {result['wall_s']:.0f} s")


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


def _mapper(trace, configs, steps, jobs, dask, progress):
    """``sums(tiles, compression, label)``: the mapper's totals of ``trace`` for every one of ``configs``' designs at
    ``tiles[design]`` tiles, each (design, tiles, compression) mapped once, whichever accounting or silicon model asks
    (leakage is charged again by ``scenario_figures``)."""
    from dashraker.mapping.executors import ClusterError
    from dashraker.mapping.runner import map_trace, totals
    from dashraker.trace import TraceError

    done = {}  # (design, tiles, compression) -> {op: totals}

    def sums(tiles, compression, label):
        todo = [dataclasses.replace(c, tiles=tiles[c.design.name],
                                    memory=dataclasses.replace(c.memory, compression=compression))
                for c in configs if (c.design.name, tiles[c.design.name], compression) not in done]
        if todo:
            if progress:
                print(f"study {trace}: {label}: mapping {', '.join(c.design.name for c in todo)}", flush=True)
            try:
                mapped = totals(map_trace(trace, todo, steps, jobs, progress, dask))
            except (TraceError, ValueError, ClusterError) as error:
                raise CliError(str(error)) from None
            for (name, op), total in mapped.items():
                done.setdefault((name, tiles[name], compression), {})[op] = total
        return {(name, op): total for name in tiles for op, total in done[name, tiles[name], compression].items()}

    return sums


def _silicon(configs, tiles):
    """One silicon model's figures of ``configs``: each tile, its areas at both scopes and its iso-area tiles."""
    from dashraker.mapping import isoarea

    return {"unit": isoarea.unit("asic", configs[0]), "library": configs[0].library,
            "designs": {c.design.name: {"tile_area": c.tile.area, "tile_leakage_nw": c.tile.leakage_nw,
                                        "reference_tile_area": c.reference_tile.area,
                                        "area": {scope: _area(c, scope, c.tiles) for scope in ("compute", "chip")}}
                        for c in configs},
            "tiles_iso": {scope: tiles[scope] for scope in ("compute", "chip")}}


def study(traces, configs, steps=None, jobs=None, dask=None, area_cache="build/area", progress=True,
          asic_cache="build/asic"):
    """Map ``traces`` under every accounting of ``SCENARIOS`` for each silicon model of ``configs`` (``_configs``'
    dict: model -> every design's configuration); returns the figures ``report`` writes. The runs are the first
    model's configurations': the models differ in the tiles' areas and leakage alone, so the accountings of equal
    tiles share their runs."""
    from dashraker.designs import reference
    from dashraker.mapping import isoarea
    from dashraker.mapping.cli import with_silicon

    ref = reference().name
    models = {model: with_silicon(scoped, area_cache, progress, jobs, asic_cache) for model, scoped in configs.items()}
    tiles = {}
    for model, resolved in models.items():
        tiles[model] = {"equal": {c.design.name: c.tiles for c in resolved}}
        for scope in ("compute", "chip"):
            scoped = [dataclasses.replace(c, area_scope=scope) for c in resolved]
            try:
                tiles[model][scope] = isoarea.budget(scoped, "asic", area_cache, None, progress).tiles_iso
            except isoarea.AreaMeasureError as error:
                raise CliError(str(error)) from None
    mapped = next(iter(models.values()))
    timed = {c.design.name: c.tile for resolved in models.values() for c in resolved if c.tile.fmax_mhz is not None}
    result = {"config": mapped[0].path, "reference": ref, "energy_table": mapped[0].energy.path,
              "area_estimate": mapped[0].area_estimate, "silicon_models": list(models),
              "designs": {c.design.name: {"params": c.params, "tiles": c.tiles} for c in mapped},
              "clocks": {c.design.name: {"mhz": c.clock_mhz, "source": c.clock_source,
                                         "reference_mhz": c.reference_clock_mhz, "library": c.library,
                                         "fmax_mhz": getattr(timed.get(c.design.name), "fmax_mhz", None),
                                         "path": getattr(timed.get(c.design.name), "path", None)} for c in mapped},
              "silicon": {model: _silicon(resolved, tiles[model]) for model, resolved in models.items()},
              "traces": []}
    for trace in traces:
        sums = _mapper(trace, mapped, steps, jobs, dask, progress)
        scenarios = {}
        for model, resolved in models.items():
            by_name, counts = {c.design.name: c for c in resolved}, tiles[model]
            figures = {}
            for s in SCENARIOS:
                chosen = counts["equal" if s.tiles == "equal" else s.scope]
                figures[s.key] = scenario_figures(s, sums(chosen, s.compression, f"{s.label}, {model}"), by_name,
                                                  chosen, ref)
            credited = {k: v for k, v in sums(counts["equal"], "zvc", CREDITED.label).items() if k[0] != ref}
            credited.update({k: v for k, v in sums(counts["equal"], "none", CREDITED.label).items() if k[0] == ref})
            figures[CREDITED.key] = scenario_figures(CREDITED, credited, by_name, counts["equal"], ref)
            scenarios[model] = figures
        equal = sums(tiles[next(iter(models))]["equal"], "none", "cycle breakdown")
        breakdown = {name: {op: t["cycle_breakdown"] for (d, op), t in equal.items()
                            if d == name and "cycle_breakdown" in t} for name in result["designs"]}
        result["traces"].append({"trace": str(trace), "steps": steps, "scenarios": scenarios,
                                 "cycle_breakdown": {k: v for k, v in breakdown.items() if v}})
    return result


def _area(config, scope, tiles):
    """A design's area in its silicon model's unit under ``scope`` with ``tiles`` tiles."""
    from dashraker.mapping import silicon

    return silicon.silicon_area(dataclasses.replace(config, area_scope=scope), config.tile, tiles)


def scenario_figures(scenario, sums, configs, tiles, reference):
    """Per design, its figures in ``scenario`` against the reference's in the same accounting: speedup (cycles and
    time), energy efficiency with and without leakage, core (compute) energy efficiency, areas, throughput (compute
    time: the cycles at each design's clock) per area. The leakage ``sums`` were mapped with is charged again, of
    ``configs``' tiles (their silicon model) in the scenario's scope."""
    from dashraker.mapping import silicon

    def energy(name):
        config = dataclasses.replace(configs[name], area_scope=scenario.scope, tiles=tiles[name])
        total = sums[name, "all"]
        mapped_leak = total["energy_breakdown_pj"].get("leakage", 0.0)
        leak = silicon.leakage_pj(config, config.tile, total["time_s"])
        return total["energy_pj"] - mapped_leak + leak, total["energy_pj"] - mapped_leak, total["core_energy_pj"], leak

    ref = sums[reference, "all"]
    ref_energy, ref_dynamic, ref_core, _ = energy(reference)
    ref_area = _area(configs[reference], scenario.scope, tiles[reference])
    out = {}
    for name in configs:
        total = sums[name, "all"]
        joules, dynamic, core, leak = energy(name)
        area = _area(configs[name], scenario.scope, tiles[name])
        speedup = ref["cycles"] / total["cycles"] if total["cycles"] else math.inf
        throughput = ref["compute_s"] / total["compute_s"] if total["compute_s"] else math.inf
        out[name] = {
            "tiles": tiles[name], "clock_mhz": configs[name].clock_mhz, "cycles": total["cycles"],
            "time_s": total["time_s"], "energy_pj": joules, "leakage_pj": leak, "speedup": speedup,
            "time_speedup": ref["time_s"] / total["time_s"], "energy_efficiency": ref_energy / joules,
            "energy_efficiency_no_leakage": ref_dynamic / dynamic, "core_energy_efficiency": ref_core / core,
            "area": area, "area_overhead": area / ref_area - 1 if tiles[name] == tiles[reference] else None,
            "throughput_per_area": throughput * ref_area / area, "dram_bytes": total["dram_bytes"],
        }
    return out


def _commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _x(value):
    return "-" if value is None else f"{value:.2f}x"


def _model(result, model):
    """A silicon model as the report names it."""
    return f"{result['silicon'][model]['library']} library" if model == "liberty" else "transistor estimate"


def _seconds(value):
    """A run time with its unit."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale:
            return f"{value / scale:,.3g} {unit}"
    return f"{value / 1e-9:,.3g} ns"


def report(result):
    """The study as Markdown: the clocks, the silicon, the papers beside ours under each silicon model, every
    accounting, the gap axis by axis."""
    from dashraker.fpga.area import ESTIMATES
    from dashraker.mapping.config import CLOCK_SOURCES

    ref, models = result["reference"], result["silicon_models"]
    designs = [name for name in result["designs"] if name != ref]
    named = {model: _model(result, model) for model in models}
    lines = ["# Study: the seed papers' comparison points on recorded traces", "",
             f"Made by `dashraker study` at commit {_commit()} on {platform.node()} ({platform.machine()}, "
             f"Python {platform.python_version()}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"{result.get('wall_s', 0):.0f} s wall. Configuration `{result['config']}`, energy table "
             f"`{result['energy_table']}`; reference design: {ref}; silicon: {' and '.join(named.values())}.", "",
             "## Clocks", "",
             "| design | clock | from | its tile's timing | worst register path | reference tile's clock |",
             "|---|---|---|---|---|---|"]
    for name, clock in result["clocks"].items():
        timing = "-" if clock["fmax_mhz"] is None else f"{clock['fmax_mhz']:,.0f} MHz on {clock['library']}"
        lines.append(f"| {name} | {clock['mhz']:,.0f} MHz | {CLOCK_SOURCES[clock['source']]} | {timing} | "
                     f"{clock['path'] or '-'} | {clock['reference_mhz']:,.0f} MHz |")
    estimate = result["area_estimate"]
    lines += ["", "Each design's run time is its cycles at its clock, or its DRAM time where that is longer; leakage "
              "is charged over that time.", "", "## Silicon", ""]
    for model in models:
        silicon = result["silicon"][model]
        lines += [f"### {named[model]}", "",
                  f"| design | tile area | tile leakage | tiles | compute-scope area | chip-scope area | iso-area tiles "
                  "(compute / chip) |", "|---|---|---|---|---|---|---|"]
        for name, d in silicon["designs"].items():
            lines.append(f"| {name} | {d['tile_area']:,.0f} | {d['tile_leakage_nw'] / 1e3:,.1f} uW | "
                         f"{result['designs'][name]['tiles']} | {d['area']['compute']:,.0f} | {d['area']['chip']:,.0f} "
                         f"| {silicon['tiles_iso']['compute'][name]} / {silicon['tiles_iso']['chip'][name]} |")
        lines += ["", f"Areas in {silicon['unit']} (SRAM of equal area: the energy table's `silicon` figures); tiles: "
                  f"the {estimate} area estimate ({ESTIMATES[estimate]}).", ""]
    lines += ["Leakage is charged in every accounting on the scope's silicon."
              + (" The library has no register files: they and the SRAM leak per area at the table's figure for "
                 "logic." if "liberty" in models else ""), ""]
    for entry in result["traces"]:
        lines += _trace_lines(entry, result, named, designs)
    lines += ["", "## Plots", "", "![speedup and energy efficiency in every accounting](study.png)", "",
              "## What is not modelled", "",
              "- Results (the PEs' sums and the result tensors, which the trace does not hold) move dense under ZVC.",
              "- The SRAM's periphery is an assumed array efficiency of 0.5 (energy table rule `sram_periphery`), "
              "and SRAM leaks per area as logic does.",
              "- The transistor estimate is Yosys's generic synthesis, not mapped onto cells; the library's tiles and "
              "their timing have no wires and an ideal clock.", ""]
    return "\n".join(lines)


def _trace_lines(entry, result, named, designs):
    """One trace's sections of the report."""
    ref, models = result["reference"], result["silicon_models"]
    scenarios = entry["scenarios"]
    steps = "all recorded steps" if not entry["steps"] else f"steps {', '.join(map(str, entry['steps']))}"
    lines = [f"## Trace `{entry['trace']}` ({steps})", "", "### The papers beside ours", "",
             "| design | claim | paper | " + " | ".join(f"ours ({named[m]}) | holds" for m in models)
             + " | accounting |", "|---|---|---|" + "---|---|" * len(models) + "---|"]
    for name, claim in ((design.name, claim) for design in DESIGNS.values() for claim in design.published):
        if name not in scenarios[models[0]][claim.scenario]:
            continue
        cells = []
        for model in models:
            value = scenarios[model][claim.scenario][name][claim.metric]
            shown = f"{value:+.1%}" if claim.metric == "area_overhead" else _x(value)
            cells.append(f"{shown} | {'yes' if claim.holds(value) else 'no'}")
        lines.append(f"| {name} | {claim.claim} | {claim.figure} | {' | '.join(cells)} | {_label(claim.scenario)} |")
    lines += ["", "### Every accounting", "",
              "| accounting | silicon | design | tiles | time | speedup (cycles) | speedup (time) | energy eff. | "
              "without leakage | compute energy eff. | perf/area | leakage share |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for scenario in (*SCENARIOS, CREDITED):
        for name in designs:
            for model in models:
                f = scenarios[model][scenario.key][name]
                lines.append(f"| {scenario.label} | {named[model]} | {name} | {f['tiles']} | {_seconds(f['time_s'])} | "
                             f"{_x(f['speedup'])} | {_x(f['time_speedup'])} | {_x(f['energy_efficiency'])} | "
                             f"{_x(f['energy_efficiency_no_leakage'])} | {_x(f['core_energy_efficiency'])} | "
                             f"{_x(f['throughput_per_area'])} | {f['leakage_pj'] / f['energy_pj']:.1%} |")
    lines += ["", "### The gap, axis by axis", "",
              "How each accounting choice moves each design's verdict (speedup and energy efficiency over the "
              "reference in the same accounting):", "",
              "| design | silicon | axis | speedup | energy efficiency |", "|---|---|---|---|---|"]
    for name in designs:
        for model in models:
            figures = scenarios[model]
            for axis, before, after in AXES:
                a, b = figures[before][name], figures[after][name]
                if axis.startswith("leakage"):
                    moved = f"{_x(a['energy_efficiency_no_leakage'])} -> {_x(b['energy_efficiency'])}"
                    lines.append(f"| {name} | {named[model]} | {axis} | {_x(a['speedup'])} (unchanged) | {moved} |")
                else:
                    lines.append(f"| {name} | {named[model]} | {axis} | {_x(a['speedup'])} -> {_x(b['speedup'])} | "
                                 f"{_x(a['energy_efficiency'])} -> {_x(b['energy_efficiency'])} |")
        if len(models) == 2:
            for key in ("equal", "iso", "iso_chip"):
                a, b = (scenarios[model][key][name] for model in models)
                lines.append(f"| {name} | {named[models[0]]} -> {named[models[1]]} | silicon model ({_label(key)}) | "
                             f"{_x(a['speedup'])} -> {_x(b['speedup'])} | "
                             f"{_x(a['energy_efficiency'])} -> {_x(b['energy_efficiency'])} |")
    for name, ops in entry["cycle_breakdown"].items():
        lines += ["", f"### Where {name}'s cycles go (equal lanes)", "",
                  "Per operation, cycles per tile at the mean in-bound term count of a lane, the extra of each "
                  "PE's maximum over its lanes and of the tile's lockstep, the busiest tile's excess and the fill "
                  "(adding up to the cycles), and the terms skipped out of bounds:", "",
                  "| operation | mean terms | lane maximum | lockstep | tile imbalance | fill | cycles | skipped terms |",
                  "|---|---|---|---|---|---|---|---|"]
        for op, b in ops.items():
            total = b["mean_terms"] + b["lane_max"] + b["lockstep"] + b["tile_imbalance"] + b["fill"]
            lines.append(f"| {op} | {b['mean_terms']:,.0f} | {b['lane_max']:,.0f} | {b['lockstep']:,.0f} | "
                         f"{b['tile_imbalance']:,.0f} | {b['fill']:,} | {total:,.0f} | {b['skipped_terms']:,} |")
    return lines


def _label(key):
    return next(s.label for s in (*SCENARIOS, CREDITED) if s.key == key)


def plot(path, result):
    """Speedup and energy efficiency of each design in each accounting under each silicon model (one row of panels
    per trace)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dashraker.mapping.report import save_figure

    ref, models = result["reference"], result["silicon_models"]
    bars = [(name, model) for name in result["designs"] if name != ref for model in models]
    traces = result["traces"]
    figure, axes = plt.subplots(len(traces), 2, figsize=(13, 4.2 * len(traces)), squeeze=False, layout="constrained")
    width = 0.8 / max(len(bars), 1)
    for row, entry in zip(axes, traces):
        for ax, metric, title in zip(row, ("speedup", "energy_efficiency"), ("speedup", "energy efficiency")):
            for k, (name, model) in enumerate(bars):
                values = [entry["scenarios"][model][s.key][name][metric] for s in SCENARIOS]
                ax.bar([i + (k - (len(bars) - 1) / 2) * width for i in range(len(SCENARIOS))], values, width,
                       label=f"{name} ({_model(result, model)})" if len(models) > 1 else name,
                       color=f"C{k // len(models)}", hatch="//" if models.index(model) else None)
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_xticks(range(len(SCENARIOS)), [s.label.replace(", ", "\n") for s in SCENARIOS], fontsize=7)
            ax.set_ylabel(f"{title} over {ref}")
            ax.set_title(f"{Path(entry['trace']).name}: {title}")
            ax.legend(fontsize=8)
    save_figure(figure, path)
    plt.close(figure)
