"""``dashraker energy TRACE --design D``: energy per MAC from the RTL's own switching beside the mapper's table.

For sampled passes of every layer operation (or one layer's), each design's tile is
co-simulated with toggle counting (``Cosim(toggles=True)``); ``mapping.activity`` turns the
toggles and ``dashraker area``'s per-instance transistors and flip-flops into energy per
part, and the mapper's cost model and energy table give the table-based energy of the same
passes. ``--calibrate FILE`` writes an energy table whose per-action entries are fitted to
this activity, which ``map`` takes as ``energy_table``. ``--iso-area`` maps the trace's step at the
configured tiles and at iso-area (as ``map --compare iso-area``) and gives each design's energy
efficiency over the reference under both energy models.
"""

import contextlib
from pathlib import Path

from dashraker.errors import CliError
from dashraker.outputs import path_argument

__all__ = ["register", "REPORTS", "RTL_ACTIVITY", "write_calibrated", "write_table", "project_commit"]

REPORTS = ("energy.json", "energy.md")
SYNTHETIC_STEPS = 16  # steps of each synthetic pass (--synthetic)


def register(subparsers):
    from dashraker.designs import DESIGNS
    from dashraker.sim.cosim_cli import add_design_flags

    parser = subparsers.add_parser(
        "energy", help="energy per MAC from the RTL's switching activity beside the mapper's energy table",
        description="Co-simulate sampled passes of a trace's layer operations on each design's tile with toggle "
                    "counting and report activity-based energy per MAC by part (toggles x switched capacitance "
                    "from the instance's transistors, plus clocked flip-flops) beside the mapper's table-based "
                    "energy of the same passes. --calibrate writes an energy table fitted to this activity.")
    parser.add_argument("trace", type=path_argument, help="trace folder (dashraker trace record)")
    parser.add_argument("--design", choices=[*DESIGNS, "all"],
                        help="design(s) to co-simulate; without it, only the reports of --add-report are used")
    parser.add_argument("--passes", type=int, default=8,
                        help="passes K per layer operation, spread evenly over its passes (default 8)")
    parser.add_argument("--layer", default=None, help="only this layer (default: every layer)")
    parser.add_argument("--step", type=int, default=None, help="recorded step (default: the last)")
    parser.add_argument("--rounding", choices=["nearest", "truncate"], default="nearest",
                        help="fp32 -> bf16 conversion of the trace (default nearest)")
    parser.add_argument("--synthetic", action="store_true",
                        help=f"also K dense random passes and K all-zero passes ({SYNTHETIC_STEPS} steps) per design, "
                             "each measured after one uncounted run of the same passes")
    parser.add_argument("--energy-table", default="horowitz45",
                        help="energy table: a packaged name or a YAML path (default horowitz45)")
    parser.add_argument("--calibrate", type=path_argument, default=None,
                        help="write an energy table (YAML) whose per-action entries are fitted to this activity")
    parser.add_argument("--add-report", type=path_argument, action="append", default=[], metavar="DIR",
                        help="an earlier report (--out folder) of other designs on the same trace and step, whose "
                             "samples join --calibrate's fit and --iso-area's verdicts (repeatable)")
    parser.add_argument("--iso-area", action="store_true",
                        help="also map the step at the configured tiles and at iso-area (asic measure) and give each "
                             "design's energy efficiency over the reference by the table and by the activity (each "
                             "operation's core energy scaled by its activity/table ratio; memory and leakage alike)")
    parser.add_argument("--config", type=path_argument, default=None,
                        help="--iso-area: the mapper's accelerator configuration (default: the packaged one)")
    parser.add_argument("--jobs", type=int, default=None, help="--iso-area: mapping worker processes")
    parser.add_argument("--out", type=path_argument, default=None, help=f"folder for {' and '.join(REPORTS)}")
    add_design_flags(parser)
    parser.add_argument("--force-size", action="store_true",
                        help="go ahead with a tile past the size guard of `dashraker verilog` (512 lanes)")
    parser.add_argument("--build", type=path_argument, default=Path("build/cosim"),
                        help="folder of cached RTL builds (default build/cosim)")
    parser.add_argument("--area-cache", type=path_argument, default=Path("build/area"),
                        help="folder of cached area figures (default build/area)")
    parser.add_argument("--opt-level", type=int, choices=range(4), default=0,
                        help="C++ optimisation level of the models (default 0: short runs, fastest build)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=_run)


def is_energy_output(path):
    """Whether the folder holds only this command's reports (what a new run may replace)."""
    return {entry.name for entry in Path(path).iterdir()} <= set(REPORTS)


def _designs(args):
    """Each chosen design with its checked parameters, refused past the size guard of ``verilog`` (``check_size``)
    before minutes of synthesis and building."""
    from dashraker.designs import DESIGNS
    from dashraker.designs.cli import check_size
    from dashraker.sim.cosim_cli import given_params

    if args.design is None:
        return []
    names = list(DESIGNS) if args.design == "all" else [args.design]
    chosen = []
    for name in names:
        design = DESIGNS[name]
        given = given_params(args, design, strict=args.design != "all")
        try:
            params = design.params(**given)
        except ValueError as error:
            raise CliError(f"{name}: {error}") from None
        check_size(design, params, args.force_size)
        chosen.append((design, params))
    return chosen


def _work(args, trace):
    """(layer, op, tensors) of the layers asked for, tensors read and checked before any build."""
    from dashraker.mapping.runner import layer_ops
    from dashraker.trace import TraceError

    step = trace.steps[-1] if args.step is None else args.step
    if step not in trace.steps:
        raise CliError(f"{trace.path}: step {step} is not recorded; recorded steps are {trace.steps}")
    names = [layer.name for layer in trace.layers]
    if args.layer is not None and args.layer not in names:
        raise CliError(f"{trace.path}: no layer {args.layer!r}; layers are {', '.join(names)}")
    work = []
    for index, layer in enumerate(trace.layers):
        if args.layer is not None and layer.name != args.layer:
            continue
        try:
            tensors = trace.load(layer.name, step)
        except TraceError as error:
            raise CliError(str(error)) from None
        work += [(layer, op, tensors) for op in layer_ops(index, layer)]
    return step, work


def project_commit():
    """The project's commit, with ``+changes`` where its work tree differs from it; "unknown" outside git."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown commit"
    return head + ("+changes" if dirty else "")


def _run(args):
    from dashraker.mapping import activity
    from dashraker.mapping.config import ConfigError, load_energy_table
    from dashraker.outputs import OutputFolder, check_output_file, check_output_folder
    from dashraker.trace import TraceError, open_trace

    if args.passes < 1:
        raise CliError(f"--passes must be positive, not {args.passes}")
    try:
        trace = open_trace(args.trace)
    except TraceError as error:
        raise CliError(str(error)) from None
    try:
        table = load_energy_table(args.energy_table)
    except ConfigError as error:
        raise CliError(str(error)) from None
    missing = [name for name in activity.ACTIVITY_ENTRIES if name not in table.entries]
    if missing:
        raise CliError(f"{table.path}: entries.{missing[0]}: missing (the activity model needs "
                       f"{' and '.join(activity.ACTIVITY_ENTRIES)})")
    designs = _designs(args)
    if designs:  # the caches the work fills, before it
        check_output_folder(args.area_cache, "--area-cache")
        check_output_folder(args.build, "--build")
    step, work = _work(args, trace) if designs else (trace.steps[-1] if args.step is None else args.step, [])
    if args.add_report and args.calibrate is None and not args.iso_area:
        raise CliError("--add-report joins samples to --calibrate's fit or --iso-area's verdicts: give one of them")
    if not designs and not args.add_report:
        raise CliError("give --design, or the reports to use (--add-report) with --calibrate or --iso-area")
    earlier = [sample for folder in args.add_report for sample in read_report(folder, args.trace, step, designs)]
    if args.iso_area:
        from dashraker.designs import reference

        if reference().name not in {d.name for d, _ in designs} | {s.design for s in earlier}:
            raise CliError(f"--iso-area: no sample of the reference design {reference().name} (co-simulate it or "
                           "--add-report its report)")
        iso_configs(args, [design.name for design, _ in designs] + [s.design for s in earlier])  # before the work
    if args.calibrate is not None:
        check_output_file(args.calibrate, "--calibrate")
    out = OutputFolder(args.out, "--out", is_energy_output, "give a new folder or an earlier energy report") \
        if args.out is not None else None
    with out if out is not None else contextlib.nullcontext():  # one run at a time on --out, from the start
        _measure(args, table, designs, work, step, earlier, out)


def _measure(args, table, designs, work, step, earlier, out):
    """Co-simulate the sampled passes of ``work`` on each of ``designs``, print the report and write the outputs."""
    import dataclasses

    from dashraker.fpga.area import AreaError, design_area
    from dashraker.mapping import activity
    from dashraker.mapping.config import load_config
    from dashraker.progress import bar as progress_bar
    from dashraker.sim.cosim import Cosim, CosimBuildError

    plans = []  # per design: its params, config and the sampled pass groups of each layer operation
    for design, params in designs:
        config = dataclasses.replace(load_config(None, design.name), params=params, energy=table)
        jobs = [(layer.name, op, list(activity.sample_passes(layer, tensors, op, params["rows"], params["cols"],
                                                             params["lanes"], args.passes, params["fmt"],
                                                             args.rounding)))
                for layer, op, tensors in work]
        if args.synthetic:
            jobs += [(kind, "synthetic", list(activity.synthetic_passes(kind, params["rows"], params["cols"],
                                                                      params["lanes"], args.passes, SYNTHETIC_STEPS,
                                                                      params["fmt"])))
                     for kind in ("random", "zeros")]
        plans.append((design, params, config, jobs))
    total = sum(len(group[0]) for *_, jobs in plans for _, _, groups in jobs for group in groups)

    samples, areas = [], {}
    with progress_bar(total=total, desc="energy", unit="pass", disable=args.no_progress) as bar:
        for design, params, config, jobs in plans:
            try:
                area = areas[design.name] = design_area(design, params, args.area_cache, not args.no_progress)
                bar.set_postfix_str(f"{design.name}: building the RTL model" , refresh=True)
                cosim = Cosim(design, params, build_root=args.build, optimize=f"-O{args.opt_level}", toggles=True)
            except (AreaError, CosimBuildError, ValueError) as error:
                raise CliError(str(error)) from None
            bar.set_postfix_str(design.name, refresh=True)
            for layer, op, groups in jobs:
                if groups:
                    samples.append(activity.run_passes(cosim, area, config, groups, layer, op, progress=bar,
                                                       prime=op == "synthetic"))
    from dashraker.designs import design as find_design

    if not designs:  # the reports' designs alone, with the parameters their reports name
        samples, earlier = earlier, []
        given = {name: params for folder in args.add_report for name, params in _report_params(folder).items()}
        designs = [(find_design(name), given.get(name)) for name in dict.fromkeys(s.design for s in samples)]
    text = report(samples, args.trace, step, designs)
    meta = {"trace": str(args.trace), "step": step, "commit": project_commit(), "energy_table": table.path,
            "designs": {design.name: params for design, params in designs},
            "area_transistors": {name: area["transistors"] for name, area in areas.items()}}
    if args.iso_area:
        meta["iso_area"] = iso_area_verdicts(args, step, samples + earlier, not args.no_progress)
        text += "\n\n" + verdict_table(meta["iso_area"])
    print(text)
    if out is not None:
        from dashraker.trace.store import save_json

        with out.staging() as staging:
            save_json(staging / "energy.json", {**meta, "samples": [sample.as_dict() for sample in samples]})
            (staging / "energy.md").write_text(text + "\n")
        print(f"\nwrote {out.path / REPORTS[0]}, {out.path / REPORTS[1]}")
    if args.calibrate is not None:
        others = [(find_design(name), None) for name in dict.fromkeys(s.design for s in earlier)]
        fitted = write_calibrated(args.calibrate, table, samples + earlier, designs + others, args.trace,
                                  meta["commit"])
        print(f"wrote {args.calibrate}: " + ", ".join(f"{name} {pj:.4g} pJ" for name, (pj, *_) in fitted.items()))


def iso_area_verdicts(args, step, samples, progress):
    """Map the trace's ``step`` for the designs of ``samples`` (the reference among them) at the configured tiles
    and at iso-area (``mapping.isoarea``, asic measure, the configuration's area scope) and give each design's
    energy efficiency over the reference under the table and the activity (``activity.energy_verdicts``)."""
    from dashraker.designs import reference
    from dashraker.mapping import activity, isoarea
    from dashraker.mapping.cli import with_silicon
    from dashraker.mapping.runner import map_trace, totals

    ref = reference().name
    configs = with_silicon(iso_configs(args, [s.design for s in samples if s.op != "synthetic"]), args.area_cache,
                           progress, args.jobs)
    try:
        equal = totals(map_trace(args.trace, configs, [step], args.jobs, progress))
        areas = isoarea.budget(configs, "asic", args.area_cache, None, progress)
        iso = {**equal, **totals(map_trace(args.trace, areas.resized(configs), [step], args.jobs, progress))}
        ratios = activity.activity_ratios(samples)
        verdicts = activity.energy_verdicts(equal, iso, ratios, ref)
    except (isoarea.AreaMeasureError, KeyError, ValueError) as error:
        raise CliError(f"--iso-area: {error}") from None
    return {"config": str(args.config or "packaged default"), "reference": ref, "scope": areas.scope,
            "unit": areas.unit,
            "estimate": areas.estimate, "tiles_equal": {c.design.name: c.tiles for c in configs},
            "tiles_iso": areas.tiles_iso, "params": {c.design.name: c.params for c in configs},
            "ratios": {f"{design} {op}": ratio for (design, op), ratio in ratios.items()},
            "designs": verdicts}


def iso_configs(args, names):
    """The mapper's configurations (``--config``) of the designs ``names`` for ``--iso-area``; a ``CliError`` for a bad
    configuration or a tile past the size guard (``map``'s ``check_sizes``)."""
    from dashraker.mapping.cli import check_sizes
    from dashraker.mapping.config import ConfigError, load_config

    try:
        configs = [load_config(args.config, name) for name in dict.fromkeys(names)]
    except ConfigError as error:
        raise CliError(str(error)) from None
    check_sizes(configs, args.area_cache, "build/asic", args.force_size)
    return configs


def verdict_table(verdicts):
    """``iso_area_verdicts``' figures as Markdown."""
    ref = verdicts["reference"]
    lines = [f"Energy efficiency over {ref} by the table and by the activity (mapper configuration "
             f"{verdicts['config']}; iso-area by {verdicts['unit']}, {verdicts['estimate']} area estimate, "
             f"{verdicts['scope']} scope; activity: each operation's core energy x its activity/table ratio, memory "
             "and leakage as the table's)", "",
             "| design | tiles (configured / iso-area) | configured: table | configured: activity | iso-area: table | "
             "iso-area: activity | iso-area core only: table | iso-area core only: activity |",
             "|---|---|---|---|---|---|---|---|"]
    for design, v in verdicts["designs"].items():
        lines.append(f"| {design} | {verdicts['tiles_equal'][design]} / {verdicts['tiles_iso'][design]} "
                     f"| {v['table_equal']:.2f}x | {v['activity_equal']:.2f}x | {v['table_iso']:.2f}x "
                     f"| {v['activity_iso']:.2f}x | {v['table_core_iso']:.2f}x | {v['activity_core_iso']:.2f}x |")
    ratios = ", ".join(f"{key} {ratio:.2f}" for key, ratio in verdicts["ratios"].items())
    return "\n".join(lines + ["", f"activity / table core energy of the sampled passes: {ratios}"])


def _report_params(folder):
    """{design: params} of an ``energy.json`` that ``read_report`` has read."""
    import json

    return json.loads((Path(folder) / REPORTS[0]).read_text()).get("designs") or {}


def read_report(folder, trace, step, designs):
    """The samples of an earlier ``energy.json`` in ``folder``: of the same trace and step, of other designs."""
    import json

    from dashraker.mapping.activity import Sample

    path = Path(folder) / REPORTS[0]
    try:
        report = json.loads(path.read_text())
        samples = [Sample(**{key: value for key, value in raw.items() if key in Sample.__dataclass_fields__})
                   for raw in report["samples"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CliError(f"{path}: not a readable energy report ({error})") from None
    if Path(report.get("trace", "")).resolve() != Path(trace).resolve() or report.get("step") != step:
        raise CliError(f"{path}: a report of {report.get('trace')} step {report.get('step')}, not of {trace} "
                       f"step {step}")
    mine = {design.name for design, _ in designs}
    if any(sample.design in mine for sample in samples):
        raise CliError(f"{path}: holds designs this run measures too ({', '.join(sorted(mine))})")
    return samples


def _per_mac(pj, macs):
    return pj / macs if macs else 0.0


def report(samples, trace, step, designs):
    """The Markdown report: per design and operation, activity and table energy per MAC; per design, by part."""
    lines = [f"Energy per MAC (fJ), trace {trace} step {step}: activity (RTL toggles) against table (core actions)",
             "", "| design | operation | passes | MACs | zeros (scheduled) | activity fJ/MAC | of it clock | "
             "table fJ/MAC | activity / table | multiplier toggles per useful MAC |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    groups = {}
    for sample in samples:
        key = (sample.design, sample.op if sample.op != "synthetic" else sample.layer)
        groups.setdefault(key, []).append(sample)
    for (design, op), members in groups.items():
        merged = _merge(members)
        ratio = f"{merged['activity'] / merged['table']:.2f}" if merged["table"] else "-"
        lines.append(f"| {design} | {op} | {merged['passes']} | {merged['macs']:,} | {merged['zeros']:.1%} "
                     f"| {1e3 * _per_mac(merged['activity'], merged['macs']):.1f} "
                     f"| {merged['clock'] / merged['activity'] if merged['activity'] else 0:.0%} "
                     f"| {1e3 * _per_mac(merged['table'], merged['macs']):.1f} | {ratio} | {merged['mul_toggles']} |")
    for design, _ in designs:
        members = [s for s in samples if s.design == design.name and s.op != "synthetic"]
        if not members:
            continue
        macs = sum(s.macs for s in members)
        useful = sum(s.useful_macs for s in members)
        lines += ["", f"{design.name}: by part, trace passes ({macs:,} MACs, {useful:,} useful: both operands "
                  "non-zero)", "", "| part | fJ/MAC | of it clock | toggles per MAC | toggles per useful MAC |",
                  "|---|---|---|---|---|"]
        for part in members[0].parts:
            energy = sum(s.parts[part]["energy_pj"] for s in members)
            clock = sum(s.parts[part]["clock_pj"] for s in members)
            toggles = sum(s.parts[part]["toggles"] for s in members)
            lines.append(f"| {part} | {1e3 * _per_mac(energy, macs):.2f} | {clock / energy if energy else 0:.0%} "
                         f"| {_per_mac(toggles, macs):.2f} | {_per_mac(toggles, useful):.2f} |")
    return "\n".join(lines + _multiplier_table(samples))


def _multiplier_table(samples):
    """Per layer and operation, the multipliers' toggles per MAC slot and per useful MAC of every design that has
    multipliers (trace passes), beside the scheduled operand's zeros and the useful share of the MAC slots."""
    members = [s for s in samples if s.op != "synthetic" and "multipliers" in s.parts]
    names = list(dict.fromkeys(s.design for s in members))
    if not names:
        return []
    lines = ["", "Multiplier toggles by layer and operation (trace passes): per MAC slot / per useful MAC", "",
             "| layer | operation | zeros (scheduled) | useful MACs | " + " | ".join(names) + " |",
             "|---|---|---|---|" + "---|" * len(names)]
    for layer, op in dict.fromkeys((s.layer, s.op) for s in members):
        by_design = {s.design: s for s in members if (s.layer, s.op) == (layer, op)}
        first = next(iter(by_design.values()))
        zeros = first.scheduled_zeros / first.scheduled_values if first.scheduled_values else 0.0
        cells = [f"{_per_mac(d.parts['multipliers']['toggles'], d.macs):.0f} / "
                 f"{_per_mac(d.parts['multipliers']['toggles'], d.useful_macs):.0f}" if d else "-"
                 for d in (by_design.get(name) for name in names)]
        lines.append(f"| {layer} | {op} | {zeros:.1%} | {_per_mac(first.useful_macs, first.macs):.1%} | "
                     + " | ".join(cells) + " |")
    return lines


def _merge(samples):
    values = sum(s.scheduled_values for s in samples)
    useful = sum(s.useful_macs for s in samples)
    toggles = sum(s.parts["multipliers"]["toggles"] for s in samples) if "multipliers" in samples[0].parts else None
    mul_toggles = "-" if toggles is None or not useful else f"{toggles / useful:.1f}"
    return {"passes": sum(s.passes for s in samples), "macs": sum(s.macs for s in samples),
            "zeros": sum(s.scheduled_zeros for s in samples) / values if values else 0.0,
            "activity": sum(s.activity_pj for s in samples), "clock": sum(s.parts["tile"]["clock_pj"] for s in samples),
            "table": sum(s.table_core_pj for s in samples), "mul_toggles": mul_toggles}


# What an energy table is fitted to: (its source's key, the measurement, what the entries are fitted to, the command)
RTL_ACTIVITY = ("rtl_activity", "RTL activity", "the generated RTL's switching activity", "dashraker energy --calibrate")


def write_calibrated(path, table, samples, designs, trace, commit, method=RTL_ACTIVITY):
    """Write the energy table ``table`` with the entries ``activity.calibrated_entries`` fits from the trace samples
    (the synthetic ones left out), atomically; returns the fitted entries. ``method``: what the samples measured."""
    from dashraker.mapping import activity
    from dashraker.mapping.components import table_entry

    fmt = next((params["fmt"] for _, params in designs if params), None)  # earlier reports' may have no params
    if fmt is None:
        raise CliError("--calibrate: no report names its designs' parameters (the operand format)")
    fitted = activity.calibrated_entries([s for s in samples if s.op != "synthetic"],
                                         {design.name: design.energy_parts for design, _ in designs}, fmt)
    if not fitted:
        raise CliError("--calibrate: no part of these designs performs an action the mapper counts")
    entries = {}
    for entry, (pj, energy, count, names) in fitted.items():
        parts = sorted({part for design, _ in designs if design.name in names
                        for part, component in design.energy_parts.items()
                        if table_entry(component, fmt) == entry})
        entries[entry] = (pj, f"activity energy of the parts {', '.join(parts)} of {', '.join(names)} "
                              f"({energy:,.1f} pJ) over the mapper's {count:,} actions, sampled passes of every layer "
                              f"operation ({method[3]})")
    write_table(path, table, entries, trace, commit, method)
    return fitted


def write_table(path, table, entries, trace, commit, method):
    """Write the energy table ``table`` with ``entries`` ({entry: (pJ, derivation)}) measured by ``method`` on
    ``trace`` at ``commit``, atomically."""
    source, measured, fitted_to, command = method
    import yaml

    from dashraker.outputs import atomic_write

    data = yaml.safe_load(Path(table.path).read_text())
    data["name"] = f"{data.get('name', 'table')}-{source.replace('_', '-')}"
    data.setdefault("sources", {})[source] = f"measured from {measured}, {trace}, {commit}"
    for entry, (pj, derivation) in entries.items():
        data["entries"][entry] = {
            **{key: value for key, value in data["entries"].get(entry, {}).items() if key in ("per", "node")},
            "pj": float(f"{pj:.6g}"), "source": source, "derivation": derivation}
        data["entries"][entry].setdefault("node", data.get("node", "unknown node"))
    text = f"# Energy per action fitted to {fitted_to} ({command}).\n"
    text += yaml.safe_dump(data, sort_keys=False, width=100)
    atomic_write(path, lambda file: file.write(text.encode()))
