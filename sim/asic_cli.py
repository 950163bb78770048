"""``dashraker asic DESIGN``: a tile on a standard-cell library: its area, its clock from static timing and its
energy from the gate-level switching of real trace passes (or random ones), the netlist checked against the RTL.

Mapping: ``asic.synthesis`` (Yosys and ABC onto the Liberty library); timing: ``asic.timing`` (OpenSTA);
energy: the flattened netlist co-simulated (``sim.gates``) on the passes ``dashraker energy`` samples, its
outputs and cycles compared with the RTL's on the same passes, each cell charged from the library's tables
by its simulated switching (``asic.power``). The command lives with co-simulation, above the mapper whose
pass formation and energy table it uses.
"""

import contextlib
import re
import sys
from pathlib import Path

from dashraker.designs import design as find_design
from dashraker.errors import CliError, renamed_choices
from dashraker.mapping.ops import OPS, RENAMED_OPS
from dashraker.outputs import path_argument

__all__ = ["register", "REPORTS", "RANDOM_STEPS", "gate_runs"]

REPORTS = ("asic.json", "asic.md")
RANDOM_STEPS = 16  # steps of each random pass (--random)


def register(subparsers):
    from dashraker.asic import TARGET_NS
    from dashraker.asic.libraries import LIBRARIES
    from dashraker.designs.cli import add_design_parsers

    parser = subparsers.add_parser(
        "asic", help="a tile on a standard-cell library: area, clock (OpenSTA) and energy from gate-level switching",
        description="Map a design's tile onto a standard-cell library (Yosys and ABC, hierarchy kept), report its "
                    "area per part, its worst register-to-register path and the clock it allows (OpenSTA, no wire "
                    "load, ideal clock), and, with --trace or --random, the energy of passes simulated on the "
                    "flattened gate-level netlist (outputs and cycles checked against the RTL's), each cell charged "
                    "from the library's power tables by its switching. Mapped tiles are cached.")

    def options(sub):
        sub.add_argument("--library", choices=list(LIBRARIES), default=next(iter(LIBRARIES)),
                         help=f"standard-cell library (default {next(iter(LIBRARIES))})")
        sub.add_argument("--clock-ns", type=float, default=None,
                         help=f"clock period (ns) the mapping targets and energy is reported at (default: target "
                              f"{TARGET_NS:g} ns, energy at the clock the timing allows)")
        sub.add_argument("--trace", type=path_argument, help="trace folder whose passes are simulated for energy")
        sub.add_argument("--layer", action="append", help="--trace: a layer (repeatable; default: every layer)")
        renamed_choices(sub, "--op", OPS, RENAMED_OPS, help="--trace: the training operation (default: every one "
                        "of the layer)")
        sub.add_argument("--step", type=int, help="--trace: recorded step (default: the last)")
        sub.add_argument("--passes", type=int, default=8,
                         help="--trace: passes K per layer operation, spread evenly over its passes (default 8)")
        sub.add_argument("--random", type=int, default=None, metavar="N",
                         help=f"simulate N dense random passes of {RANDOM_STEPS} steps instead of a trace")
        sub.add_argument("--calibrate", type=path_argument, default=None,
                         help="--trace: write an energy table (YAML, the packaged table's format) whose per-action "
                              "entries are fitted to the gate-level energy of these passes, for map's energy_table")
        sub.add_argument("--add-report", type=path_argument, action="append", default=[], metavar="FOLDER",
                         help="--calibrate: an earlier asic report (--out folder) of another design on the same "
                              "trace and step, whose passes join the fit (repeatable)")
        sub.add_argument("--out", type=path_argument, help=f"folder for {' and '.join(REPORTS)}")
        sub.add_argument("--build", type=path_argument, default=Path("build/asic"),
                         help="folder of cached mapped tiles and gate-level models (default build/asic)")
        sub.add_argument("--max-minutes", type=float, default=60,
                         help="refuse a tile whose estimated mapping takes longer, unless --force-size (default 60)")
        sub.add_argument("--no-progress", action="store_true", help="no progress display")

    add_design_parsers(parser, _run, options)


def _passes(args, params):
    """[(layer, op, groups)] of the passes to simulate, every input read and checked before any synthesis."""
    from dashraker.mapping.activity import sample_passes, synthetic_passes
    from dashraker.mapping.runner import layer_ops
    from dashraker.trace import TraceError, open_trace

    geometry = (params["rows"], params["cols"], params["lanes"])
    if args.random is not None:
        if args.trace is not None:
            raise CliError("give --trace or --random, not both")
        if args.random < 1:
            raise CliError(f"--random must be positive, not {args.random}")
        return None, [("random", "random", list(synthetic_passes("random", *geometry, args.random, RANDOM_STEPS,
                                                                   params["fmt"])))]
    if args.trace is None:
        if args.layer or args.op or args.step is not None:
            raise CliError("--layer, --op and --step choose passes of --trace: give it")
        return None, []
    if args.passes < 1:
        raise CliError(f"--passes must be positive, not {args.passes}")
    try:
        trace = open_trace(args.trace)
    except TraceError as error:
        raise CliError(str(error)) from None
    step = trace.steps[-1] if args.step is None else args.step
    if step not in trace.steps:
        raise CliError(f"{trace.path}: step {step} is not recorded; recorded steps are {trace.steps}")
    names = [layer.name for layer in trace.layers]
    for name in args.layer or ():
        if name not in names:
            raise CliError(f"{trace.path}: no layer {name!r}; layers are {', '.join(names)}")
    work = []
    for index, layer in enumerate(trace.layers):
        if args.layer and layer.name not in args.layer:
            continue
        ops = layer_ops(index, layer)
        if args.op is not None and args.op not in ops:
            if args.layer:  # a layer asked for by name; without --layer, the layers that have the operation
                raise CliError(f"{trace.path}: layer {layer.name!r} has no {args.op} passes (SPEC section 5)")
            continue
        try:
            tensors = trace.load(layer.name, step)
        except TraceError as error:
            raise CliError(str(error)) from None
        for op in ops:
            if args.op is None or op == args.op:
                groups = list(sample_passes(layer, tensors, op, *geometry, args.passes, params["fmt"]))
                if groups:
                    work.append((layer.name, op, groups))
    return step, work


def _run(args):
    from dashraker.asic.liberty import LibertyError, read_liberty
    from dashraker.asic.libraries import LibraryError, library
    from dashraker.asic.timing import TimingError, find_sta
    from dashraker.designs.cli import design_params
    from dashraker.outputs import OutputFolder

    params = design_params(args)
    design = args.design
    if args.clock_ns is not None and not args.clock_ns > 0:
        raise CliError(f"--clock-ns must be a positive period, not {args.clock_ns:g}")
    if not args.max_minutes > 0:
        raise CliError(f"--max-minutes must be positive, not {args.max_minutes:g}")
    lib = library(args.library)
    try:
        liberty = read_liberty(lib.path("liberty"))
        find_sta()
    except (LibraryError, LibertyError, TimingError) as error:
        raise CliError(str(error)) from None
    step, work = _passes(args, params)
    if args.calibrate is not None:
        from dashraker.outputs import check_output_file

        if args.trace is None:
            raise CliError("--calibrate fits the energy table to trace passes: give --trace")
        check_output_file(args.calibrate, "--calibrate")
    elif args.add_report:
        raise CliError("--add-report joins an earlier report's passes to --calibrate's fit: give --calibrate")
    earlier = [read_report(folder, args.trace, step, design.name) for folder in args.add_report]
    for folder, record in zip(args.add_report, earlier):
        if record["params"].get("fmt") != params["fmt"]:
            raise CliError(f"{folder}: passes in {record['params'].get('fmt')}, this run's in {params['fmt']}")
    if len({record["design"] for record in earlier}) < len(earlier):
        raise CliError("--add-report: two reports of one design")
    out = OutputFolder(args.out, "--out", lambda path: {e.name for e in path.iterdir()} <= set(REPORTS),
                       "give a new folder or an earlier asic report") if args.out is not None else None
    with out if out is not None else contextlib.nullcontext():  # one run at a time on --out, from the start
        return _characterise(args, design, params, lib, liberty, step, work, out, earlier)


def _characterise(args, design, params, lib, liberty, step, work, out, earlier):
    """Map the tile onto the library, time it, run the passes of ``work`` on its netlist; print and write the report
    (and the energy table fitted to its passes and the ``earlier`` reports'); exit status 1 where the netlist
    disagrees with the RTL."""
    import dataclasses

    from dashraker.asic import TARGET_NS
    from dashraker.asic.synthesis import SynthesisError
    from dashraker.asic.tile import characterise, register_files
    from dashraker.asic.timing import TimingError
    from dashraker.mapping.config import load_config

    target = args.clock_ns or TARGET_NS
    try:
        record = characterise(design, params, lib, target, args.build, not args.no_progress,
                              None if args.force_size else args.max_minutes * 60)
    except (SynthesisError, TimingError) as error:
        raise CliError(str(error)) from None
    config = dataclasses.replace(load_config(None, design.name), params=params)  # the packaged energy table's
    table = config.energy
    area = {k: v for k, v in record.items() if k not in ("instances", "timing")}
    area["unparted"] = [row for row in record["instances"] if "." not in row["instance"]
                        and not any(re.fullmatch(pattern, row["instance"]) for pattern in design.area_parts.values())]
    report = {"design": design.name, "params": params, "library": {"name": lib.name, "title": lib.title},
              "target_ns": target, "area": area,
              "register_files": register_files(record, table.silicon), "energy_table": table.name,
              "timing": record["timing"]}
    if work:
        report["energy"] = _energy(args, design, params, lib, liberty, record, work, step, config)
    text = describe(report)
    print(text)
    disagree = [run for run in report.get("energy", {}).get("runs", ())
                if run["output_mismatches"] or run["cycle_mismatches"]]
    if disagree:  # the gate-level netlist does not compute what the RTL does: no figure of it is to be used
        print(f"DISAGREE: {len(disagree)} layer operations' passes differ from the RTL's; no energy table written",
              file=sys.stderr)
    elif args.calibrate is not None:
        fit = _calibrate(args.calibrate, [report, *earlier], table)
        print(f"wrote {args.calibrate}: " + ", ".join(f"{name} {pj:.4g} pJ" for name, pj in fit.entries.items()))
    if out is not None:
        from dashraker.trace.store import save_json

        with out.staging() as staging:
            save_json(staging / REPORTS[0], report)
            (staging / REPORTS[1]).write_text(text + "\n")
        print(f"\nwrote {out.path / REPORTS[0]}, {out.path / REPORTS[1]}")
    return 1 if disagree else 0


def _energy(args, design, params, lib, liberty, record, work, step, config):
    """Each layer operation's passes on the gate-level netlist (of the mapped tile ``record``) beside the RTL: checks
    and energy by part, and the table's core energy of the same passes (their actions and the tile's clocking)."""
    from dashraker.progress import bar as progress_bar

    from dashraker.asic import TARGET_NS
    from dashraker.asic.netlist import NetlistError
    from dashraker.asic.synthesis import SynthesisError
    from dashraker.mapping.calibration import charged_pj
    from dashraker.sim import gates
    from dashraker.sim.cosim import Cosim, CosimBuildError

    folder, timed = Path(record["folder"]), record["timing"]
    period = args.clock_ns or (timed["worst"]["delay_ns"] if timed["worst"] else TARGET_NS)
    total = sum(len(group[0]) for *_, groups in work for group in groups)
    rows = []
    with progress_bar(total=total, desc="asic: gate-level passes", unit="pass", disable=args.no_progress) as bar:
        try:
            bar.set_postfix_str("building the RTL model", refresh=True)
            rtl = Cosim(design, params, build_root=args.build / "cosim", optimize="-O0")
            bar.set_postfix_str("building the gate-level model", refresh=True)
            model = gates.build(design, params, folder, lib, liberty, args.build / "cosim", progress=not args.no_progress)
        except (CosimBuildError, SynthesisError, NetlistError, ValueError) as error:
            raise CliError(str(error)) from None
        bar.set_postfix_str(design.name, refresh=True)
        for layer, op, groups in work:
            run = gates.run_gate_level(model, rtl, groups, bar)
            energy = gates.gate_energy(model, run, period, lib, design.area_parts)
            rows.append({"layer": layer, "op": op, "passes": run.passes, "pass_cycles": run.pass_cycles,
                         "stream_cycles": run.stream_cycles, "sim_cycles": run.sim_cycles, "macs": run.macs,
                         "useful_macs": run.useful_macs,
                         "output_mismatches": run.output_mismatches, "cycle_mismatches": run.cycle_mismatches,
                         "counts": run.counts, "table_core_fj": 1e3 * charged_pj(
                             run.counts, run.stream_cycles, record["flip_flops"], config.energy.entries, params["fmt"]),
                         **energy.as_dict()})
    return {"trace": str(args.trace) if args.trace else None, "step": step, "period_ns": period,
            "clock": "given" if args.clock_ns else "timing", "runs": rows}


# The calibration's measurement, in ``energy_cli.write_calibrated``'s terms
GATE_LEVEL = ("gate_level", "gate-level switching", "the gate-level netlist's switching on a standard-cell library",
              "dashraker asic --calibrate")


def read_report(folder, trace, step, design):
    """The record of an earlier ``asic.json`` in ``folder``: of another design's passes of the same trace and step."""
    import json

    path = Path(folder) / REPORTS[0]
    try:
        record = json.loads(path.read_text())
        energy, other = record["energy"], record["design"]
        find_design(other)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CliError(f"{path}: not a readable asic report with energy ({error})") from None
    if energy.get("trace") is None or Path(energy["trace"]).resolve() != Path(trace).resolve() \
            or energy.get("step") != step:
        raise CliError(f"{path}: passes of {energy.get('trace')} step {energy.get('step')}, not of {trace} step {step}")
    if other == design:
        raise CliError(f"{path}: a report of {design}, the design this run measures")
    return record


def gate_runs(records):
    """``mapping.calibration.Run``s of the runs of ``asic.json`` records: each run's gate-level energy with its
    leakage left out (the mapper charges leakage apart), the cycles of its passes and the mapped tile's
    flip-flops."""
    from dashraker.mapping.calibration import Run

    return [Run(record["design"], run["layer"], run["op"], (run["fj"] - run["total"]["leakage"]) / 1e3, run["counts"],
                run["cycles"], record["area"]["flip_flops"], run["macs"])
            for record in records for run in record["energy"]["runs"]]


def _calibrate(path, records, table):
    """The energy table fitted jointly (``mapping.calibration.fit_table``) to the gate-level energy of the records'
    runs (``asic.json`` records of distinct designs on the same passes), written to ``path``; returns the fit."""
    from dashraker.mapping.calibration import fit_table
    from dashraker.sim.energy_cli import project_commit, write_table

    runs = gate_runs(records)
    designs = ", ".join(record["design"] for record in records)
    try:
        fit = fit_table(runs, records[0]["params"]["fmt"])
    except ValueError as error:
        raise CliError(f"--calibrate: {error}") from None
    worst = max(abs(fit.residual(run)) for run in runs)
    how = (f"non-negative least squares over {len(runs)} runs of {designs} (gate-level energy, leakage left out, "
           f"against the mapper's action counts and each tile's flip-flops x cycles: {fit.identified} of "
           f"{len(fit.entries)} entries' directions fixed by the runs; the worst run off by {worst:.1%}; "
           f"{GATE_LEVEL[3]})")
    entries = {name: (pj, how) for name, pj in fit.entries.items()}
    source, measured, fitted_to, command = GATE_LEVEL
    method = (source, f"{measured} on {records[0]['library']['title']}", fitted_to, command)
    write_table(path, table, entries, records[0]["energy"]["trace"], project_commit(), method)
    return fit


def describe(report):
    """The Markdown report of ``report`` (the command's JSON record)."""
    area, timed = report["area"], report["timing"]
    params = " ".join(f"{k}={v}" for k, v in report["params"].items())
    lines = [f"# {report['design']} {params} on {report['library']['title']}", "",
             f"Mapped for a {report['target_ns']:g} ns clock: {area['um2']:,.0f} um2 ({area['gates']:,.0f} NAND2 "
             f"equivalents), {area['cells']:,} cells, {area['flip_flops']:,} flip-flops holding "
             f"{area['flip_flop_um2'] / area['um2']:.0%} of the area (mapping {area['seconds']:.0f} s; "
             f"{area['folder']}).", "",
             "| part | instances | um2 | share of tile | cells | flip-flop share |", "|---|---|---|---|---|---|"]
    rows = [(name, part) for name, part in area["parts"].items() if part.get("instances", 1)]
    rows += [(f"{row['instance']} (no part)", row) for row in area["unparted"]]
    for name, part in rows:
        share = part["flip_flop_um2"] / part["um2"] if part["um2"] else 0.0
        lines.append(f"| {name} | {part.get('instances', part.get('count', '-'))} | {part['um2']:,.0f} "
                     f"| {part['um2'] / area['um2']:.1%} | {part['cells']:,} | {share:.0%} |")
    rf = report["register_files"]
    if rf["register_files"]:
        memories = "memory" if rf["register_files"] == 1 else "memories"
        lines += ["", f"With its {rf['register_files']} {memories} of at least {rf['min_bits']:,} bits ({rf['bits']:,} "
                  f"bits) as register files of {rf['um2_per_bit']:.3f} um2 per bit ({report['energy_table']}'s bit cell "
                  f"over its array efficiency) in place of {rf['replaced_um2']:,.0f} um2 of mapped cells: "
                  f"{rf['um2']:,.0f} um2."]
    worst = timed["worst"]
    lines.append("")
    if worst is None:
        lines.append("Timing: no register-to-register path.")
    else:
        lines.append(f"Timing (OpenSTA, no wire load, ideal clock): the worst register-to-register path takes "
                     f"{worst['delay_ns']:.3f} ns with setup, {worst['fmax_mhz']:,.0f} MHz, through {worst['cells']} "
                     f"pins from {worst['start_register']} to {worst['end_register']}.")
    if "energy" in report:
        lines += _energy_lines(report["energy"], [row["instance"] for row in area["unparted"]])
    return "\n".join(lines)


def _energy_lines(energy, unparted):
    from dashraker.asic.power import CATEGORIES

    source = f"trace {energy['trace']} step {energy['step']}" if energy["trace"] else "random dense passes"
    clock = "given" if energy["clock"] == "given" else "the clock the timing allows"
    lines = ["", f"Energy of passes of {source} on the gate-level netlist at {1e3 / energy['period_ns']:,.0f} MHz "
             f"({clock}; clock and leakage over the cycles of the passes' stream):", "",
             "| layer | operation | passes | outputs / cycles as the RTL's | mW | pJ per pass | pJ per MAC slot | "
             "pJ per useful MAC | " + " | ".join(CATEGORIES) + " | the table's core pJ per MAC slot (actions and clocking) |",
             "|---|---|---|---|---|---|---|---|" + "---|" * (len(CATEGORIES) + 1)]
    for run in energy["runs"]:
        agree = "yes" if not run["output_mismatches"] and not run["cycle_mismatches"] else \
            f"NO: {run['output_mismatches']} / {run['cycle_mismatches']} passes differ"
        useful = f"{run['fj'] / 1e3 / run['useful_macs']:.2f}" if run["useful_macs"] else "-"
        shares = " | ".join(f"{run['total'][c] / run['fj']:.0%}" if run["fj"] else "-" for c in CATEGORIES)
        lines.append(f"| {run['layer']} | {run['op']} | {run['passes']} | {agree} | {run['mw']:.2f} "
                     f"| {run['fj'] / 1e3 / run['passes']:,.1f} | {run['fj'] / 1e3 / run['macs']:.2f} | {useful} "
                     f"| {shares} | {run['table_core_fj'] / 1e3 / run['macs']:.2f} |")
    runs = energy["runs"]
    fj = sum(run["fj"] for run in runs)
    slots = sum(run["macs"] for run in runs)
    parts = {}
    for run in runs:
        for name, figures in run["parts"].items():
            parts[name] = parts.get(name, 0.0) + sum(figures.values())
        for name in unparted:
            key = f"{name} (no part)"
            parts[key] = parts.get(key, 0.0) + sum(run["instances"].get(name, {}).values())
    lines += ["", f"By part, all runs ({slots:,} MAC slots):", "", "| part | pJ per MAC slot | share of tile |",
              "|---|---|---|"]
    for name, value in parts.items():
        lines.append(f"| {name} | {value / 1e3 / slots:.3f} | {value / fj:.1%} |")
    return lines
