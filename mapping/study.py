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
    from dashraker.mapping.config import AREA_ESTIMATES

    parser = subparsers.add_parser(
        "study", help="the seed papers' comparison points on recorded traces, in one Markdown report",
        description="Map the traces on every design at equal lanes and at iso-area, at compute and chip area "
        "scope, with dense and zero-value compressed memory; write report.md (the papers' headline figures beside "
        "ours, the gap attributed axis by axis), study.json and study.png.")
    parser.add_argument("traces", type=Path, nargs="+", metavar="TRACE", help="trace folders (dashraker trace record)")
    parser.add_argument("--config", type=Path, help="accelerator configuration YAML (default: the packaged one)")
    parser.add_argument("--out", type=Path, default=Path("build/study"), help="report folder (replaced whole at the "
                        "end; a folder holding anything else is refused; default build/study)")
    parser.add_argument("--step", action="append", help="recorded step(s) to map, repeatable or comma-separated "
                        "(default: all)")
    parser.add_argument("--jobs", type=int, default=None, help="local worker processes, as 'map' (default: by the "
                        "work)")
    parser.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="map on this Dask scheduler's workers, as 'map'")
    parser.add_argument("--area-cache", type=Path, default=Path("build/area"),
                        help="folder of cached 'dashraker area' figures (default build/area)")
    parser.add_argument("--area-estimate", choices=AREA_ESTIMATES, help="tiles' transistors: asic (queues "
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
    if args.jobs is not None and args.scheduler:
        raise CliError("--jobs and --scheduler exclude each other: the cluster's workers are the jobs")
    for trace in args.traces:
        if not (trace / "manifest.json").is_file():
            raise CliError(f"{trace}: not a trace folder (no manifest.json)")
    steps = step_list("--step", args.step)
    out = OutputFolder(args.out, "--out", _is_study_output, "give a new folder or one of an earlier study")
    start = time.perf_counter()
    with out:
        result = study(args.traces, args.config, steps, args.jobs, args.scheduler, args.area_cache,
                       not args.no_progress, args.area_estimate)
        result["wall_s"] = round(time.perf_counter() - start, 1)
        text = report(result)
        with out.staging() as staging:
            from dashraker.outputs import atomic_write
            from dashraker.trace.store import save_json

            atomic_write(staging / "report.md", lambda file: file.write(text.encode()))
            save_json(staging / "study.json", result)
            plot(staging / "study.png", result)
    print(f"\nwrote {out.path / 'report.md'} (with study.json, study.png) in {result['wall_s']:.0f} s")


def _configs(config_path, area_cache, progress, jobs, area_estimate=None):
    """Every design's configuration with its silicon resolved (under ``area_estimate``, default the
    configuration's), the reference first."""
    from dashraker.designs import reference
    from dashraker.mapping.cli import with_silicon
    from dashraker.mapping.config import ConfigError, load_config

    names = [reference().name, *(name for name in DESIGNS if name != reference().name)]
    try:
        configs = [dataclasses.replace(load_config(config_path, name), area_scope="compute") for name in names]
        if area_estimate:
            configs = [dataclasses.replace(c, area_estimate=area_estimate) for c in configs]
    except ConfigError as error:
        raise CliError(str(error)) from None
    return with_silicon(configs, area_cache, progress, jobs)


def _map(trace, configs, steps, jobs, scheduler, progress):
    from dashraker.mapping.executors import ClusterError
    from dashraker.mapping.runner import map_trace, totals
    from dashraker.trace import TraceError

    try:
        return totals(map_trace(trace, configs, steps, jobs, progress, scheduler))
    except (TraceError, ValueError, ClusterError) as error:
        raise CliError(str(error)) from None


def study(traces, config_path=None, steps=None, jobs=None, scheduler=None, area_cache="build/area", progress=True,
          area_estimate=None):
    """Map ``traces`` under every accounting of ``SCENARIOS`` (tiles' transistors under ``area_estimate``, default
    the configuration's); returns the figures ``report`` writes."""
    from dashraker.designs import reference
    from dashraker.mapping import isoarea

    configs = _configs(config_path, area_cache, progress, jobs, area_estimate)
    ref = reference().name
    by_name = {c.design.name: c for c in configs}
    chip = [dataclasses.replace(c, area_scope="chip") for c in configs]
    tiles = {"equal": {c.design.name: c.tiles for c in configs}}
    for scope, scoped in (("compute", configs), ("chip", chip)):
        try:
            tiles[scope] = isoarea.budget(scoped, "asic", area_cache, None, progress).tiles_iso
        except isoarea.AreaMeasureError as error:
            raise CliError(str(error)) from None
    result = {"config": configs[0].path, "reference": ref, "energy_table": configs[0].energy.path,
              "area_estimate": configs[0].area_estimate,
              "designs": {c.design.name: {"tile_transistors": c.tile_transistors,
                                          "reference_tile_transistors": c.reference_tile_transistors,
                                          "params": c.params, "tiles": c.tiles} for c in configs},
              "tiles_iso": {"compute": tiles["compute"], "chip": tiles["chip"]}, "traces": []}
    result["area"] = {name: {scope: _area(by_name[name], scope, tiles[key][name])
                             for scope, key in (("compute", "equal"), ("chip", "equal"))} for name in by_name}
    for trace in traces:
        runs = {}  # (tiles: "equal", "compute" or "chip"; compression) -> the mapper's totals
        for key, compression in dict.fromkeys((("equal", s.compression) for s in SCENARIOS if s.tiles == "equal")):
            runs[key, compression] = None
        for scenario in SCENARIOS:
            if scenario.tiles == "iso":
                runs[scenario.scope, scenario.compression] = None
        for key, compression in runs:  # equal tiles first: the iso-area runs reuse its designs of unchanged tiles
            base = runs.get(("equal", compression)) or {}
            wanted = [dataclasses.replace(c, tiles=tiles[key][c.design.name],
                                          memory=dataclasses.replace(c.memory, compression=compression))
                      for c in configs]
            todo = [c for c in wanted if not base or c.tiles != tiles["equal"][c.design.name]]
            names = {c.design.name for c in todo}
            if progress:
                print(f"study {trace}: {'equal lanes' if key == 'equal' else f'iso-area ({key} scope)'}, memory "
                      f"{compression}: mapping {', '.join(sorted(names)) or 'nothing new'}", flush=True)
            sums = {k: v for k, v in base.items() if k[0] not in names}
            sums.update(_map(trace, todo, steps, jobs, scheduler, progress) if todo else {})
            runs[key, compression] = sums
        figures = {s.key: scenario_figures(s, runs["equal" if s.tiles == "equal" else s.scope, s.compression],
                                           by_name, tiles["equal" if s.tiles == "equal" else s.scope], ref)
                   for s in SCENARIOS}
        credited = {k: v for k, v in runs["equal", "zvc"].items() if k[0] != ref}
        credited.update({k: v for k, v in runs["equal", "none"].items() if k[0] == ref})
        figures[CREDITED.key] = scenario_figures(CREDITED, credited, by_name, tiles["equal"], ref)
        breakdown = {name: {op: t["cycle_breakdown"] for (d, op), t in runs["equal", "none"].items()
                            if d == name and "cycle_breakdown" in t} for name in by_name}
        result["traces"].append({"trace": str(trace), "steps": steps, "scenarios": figures,
                                 "cycle_breakdown": {k: v for k, v in breakdown.items() if v}})
    return result


def _area(config, scope, tiles):
    """A design's area in transistors (SRAM: of equal area) under ``scope`` with ``tiles`` tiles."""
    from dashraker.mapping import silicon

    return silicon.silicon_transistors(dataclasses.replace(config, area_scope=scope), config.tile_transistors, tiles)


def scenario_figures(scenario, sums, configs, tiles, reference):
    """Per design, its figures in ``scenario`` against the reference's in the same accounting: speedup (cycles and
    time), energy efficiency with and without leakage, core (compute) energy efficiency, areas, throughput per area."""
    def energy(name):
        config = dataclasses.replace(configs[name], area_scope=scenario.scope, tiles=tiles[name])
        total = sums[name, "all"]
        logic_leak = total["energy_breakdown_pj"].get("leakage", 0.0)  # mapped at compute scope
        leak = config.energy.leakage_pj(_area(config, scenario.scope, tiles[name]), total["time_s"])
        return total["energy_pj"] - logic_leak + leak, total["energy_pj"] - logic_leak, total["core_energy_pj"], leak

    ref = sums[reference, "all"]
    ref_energy, ref_dynamic, ref_core, _ = energy(reference)
    ref_area = _area(configs[reference], scenario.scope, tiles[reference])
    out = {}
    for name in configs:
        total = sums[name, "all"]
        joules, dynamic, core, leak = energy(name)
        area = _area(configs[name], scenario.scope, tiles[name])
        speedup = ref["cycles"] / total["cycles"] if total["cycles"] else math.inf
        out[name] = {
            "tiles": tiles[name], "cycles": total["cycles"], "time_s": total["time_s"], "energy_pj": joules,
            "leakage_pj": leak, "speedup": speedup, "time_speedup": ref["time_s"] / total["time_s"],
            "energy_efficiency": ref_energy / joules, "energy_efficiency_no_leakage": ref_dynamic / dynamic,
            "core_energy_efficiency": ref_core / core, "area": area, "area_overhead": area / ref_area - 1
            if tiles[name] == tiles[reference] else None,
            "throughput_per_area": speedup * ref_area / area, "dram_bytes": total["dram_bytes"],
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


def report(result):
    """The study as Markdown: the papers beside ours, every accounting, the gap axis by axis."""
    from dashraker.fpga.area import ESTIMATES

    ref = result["reference"]
    designs = [name for name in result["designs"] if name != ref]
    lines = ["# Study: the seed papers' comparison points on recorded traces", "",
             f"Made by `dashraker study` at commit {_commit()} on {platform.node()} ({platform.machine()}, "
             f"Python {platform.python_version()}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"{result.get('wall_s', 0):.0f} s wall. Configuration `{result['config']}`, energy table "
             f"`{result['energy_table']}`; reference design: {ref}.", "",
             "## Silicon", "",
             "| design | tile transistors | tiles | compute-scope area | chip-scope area | iso-area tiles (compute / chip) |",
             "|---|---|---|---|---|---|"]
    for name, d in result["designs"].items():
        area = result["area"][name]
        lines.append(f"| {name} | {d['tile_transistors']:,} | {d['tiles']} | {area['compute']:,.0f} | "
                     f"{area['chip']:,.0f} | {result['tiles_iso']['compute'][name]} / {result['tiles_iso']['chip'][name]} |")
    estimate = result.get("area_estimate", "asic")
    lines += ["", "Areas in transistors (SRAM as transistors of equal area: the energy table's `silicon` figures); "
              f"tiles: the {estimate} area estimate ({ESTIMATES[estimate]}). "
              "Leakage is charged in every accounting on the scope's silicon.", ""]
    for entry in result["traces"]:
        figures = entry["scenarios"]
        steps = "all recorded steps" if not entry["steps"] else f"steps {', '.join(map(str, entry['steps']))}"
        lines += [f"## Trace `{entry['trace']}` ({steps})", "", "### The papers beside ours", "",
                  "| design | claim | paper | ours | accounting | holds |", "|---|---|---|---|---|---|"]
        for name, claim in ((design.name, claim) for design in DESIGNS.values() for claim in design.published):
            if name not in figures[claim.scenario]:
                continue
            value = figures[claim.scenario][name][claim.metric]
            shown = f"{value:+.1%}" if claim.metric == "area_overhead" else _x(value)
            lines.append(f"| {name} | {claim.claim} | {claim.figure} | {shown} | {_label(claim.scenario)} "
                         f"| {'yes' if claim.holds(value) else 'no'} |")
        lines += ["", "### Every accounting", "",
                  "| accounting | design | tiles | speedup (cycles) | speedup (time) | energy eff. | without leakage "
                  "| compute energy eff. | perf/area | leakage share |", "|---|---|---|---|---|---|---|---|---|---|"]
        for scenario in (*SCENARIOS, CREDITED):
            for name in designs:
                f = figures[scenario.key][name]
                lines.append(f"| {scenario.label} | {name} | {f['tiles']} | {_x(f['speedup'])} | "
                             f"{_x(f['time_speedup'])} | {_x(f['energy_efficiency'])} | "
                             f"{_x(f['energy_efficiency_no_leakage'])} | {_x(f['core_energy_efficiency'])} | "
                             f"{_x(f['throughput_per_area'])} | {f['leakage_pj'] / f['energy_pj']:.1%} |")
        lines += ["", "### The gap, axis by axis", "",
                  "How each accounting choice moves each design's verdict (speedup and energy efficiency over the "
                  "reference in the same accounting):", "",
                  "| design | axis | speedup | energy efficiency |", "|---|---|---|---|"]
        for name in designs:
            for axis, before, after in AXES:
                a, b = figures[before][name], figures[after][name]
                if axis.startswith("leakage"):
                    moved = f"{_x(a['energy_efficiency_no_leakage'])} -> {_x(b['energy_efficiency'])}"
                    lines.append(f"| {name} | {axis} | {_x(a['speedup'])} (unchanged) | {moved} |")
                else:
                    lines.append(f"| {name} | {axis} | {_x(a['speedup'])} -> {_x(b['speedup'])} | "
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
    lines += ["", "## Plots", "", "![speedup and energy efficiency in every accounting](study.png)", "",
              "## What is not modelled", "",
              "- Queues and FIFOs are costed as the flip-flops the RTL has; an ASIC would hold the larger ones in "
              "register files or SRAM (not done here), so the area of designs with deep queues is overstated.",
              "- Results (the PEs' sums and the result tensors, which the trace does not hold) move dense under ZVC.",
              "- The SRAM's periphery is an assumed array efficiency of 0.5 (energy table rule `sram_periphery`), "
              "and SRAM leaks per area as logic does.", ""]
    return "\n".join(lines)


def _label(key):
    return next(s.label for s in (*SCENARIOS, CREDITED) if s.key == key)


def plot(path, result):
    """Speedup and energy efficiency of each design in each accounting (one row of panels per trace)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dashraker.mapping.report import save_figure

    from dashraker.fpga.area import ESTIMATES

    ref = result["reference"]
    designs = [name for name in result["designs"] if name != ref]
    traces = result["traces"]
    figure, axes = plt.subplots(len(traces), 2, figsize=(13, 4.2 * len(traces)), squeeze=False, layout="constrained")
    width = 0.8 / max(len(designs), 1)
    for row, entry in zip(axes, traces):
        for ax, metric, title in zip(row, ("speedup", "energy_efficiency"), ("speedup", "energy efficiency")):
            for k, name in enumerate(designs):
                values = [entry["scenarios"][s.key][name][metric] for s in SCENARIOS]
                ax.bar([i + (k - (len(designs) - 1) / 2) * width for i in range(len(SCENARIOS))], values, width,
                       label=name)
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_xticks(range(len(SCENARIOS)), [s.label.replace(", ", "\n") for s in SCENARIOS], fontsize=7)
            ax.set_ylabel(f"{title} over {ref}")
            ax.set_title(f"{Path(entry['trace']).name}: {title}")
            ax.legend(fontsize=8)
    save_figure(figure, path)
    plt.close(figure)
