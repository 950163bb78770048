"""``dashraker map TRACE --config CFG [--design ...] --out DIR``: cycles and energy of a recorded training trace."""

import dataclasses
import sys
from pathlib import Path

from dashraker.errors import CliError, renamed_option
from dashraker.outputs import path_argument

__all__ = ["register", "add_config_option", "run", "check_trace", "check_sizes", "warn_unrecorded", "design_list", "design_configs"]


def register(subparsers):
    from dashraker.designs import DESIGNS
    from dashraker.mapping.config import (AREA_ESTIMATES, AREA_MEASURES, AREA_SCOPES, COMPARISONS, COMPRESSIONS,
                                          DATAFLOWS, SILICON_MODELS)

    parser = subparsers.add_parser(
        "map",
        help="map a recorded training trace onto a design: cycles, speedup, energy",
        description="Map every layer and training operation (forward, input gradient, weight gradient) of a "
        "trace onto the configured accelerator; print a summary and write map.csv, map.json and plots.",
    )
    parser.add_argument("trace", type=path_argument, help="trace folder (dashraker trace record)")
    add_config_option(parser)
    parser.add_argument(
        "--design",
        action="append",
        help="design(s) to map, repeatable or comma-separated, 'all' for every one "
        f"({', '.join(DESIGNS)}); default: the configuration's design",
    )
    parser.add_argument("--out", required=True, help="folder for map.csv, map.json, speedup.png, energy.png "
                        "(replaced whole at the end; a folder holding anything else is refused)")
    parser.add_argument("--step", action="append", help="recorded step(s) to map, repeatable or comma-separated "
                        "(default: all)")
    parser.add_argument("--jobs", type=int, default=None, help="local worker processes (default: one per 1e10 "
                        "multiply-accumulates x designs, at most one per CPU; 1: in this process); also the tiles "
                        "whose area is synthesised at once (default: one per CPU)")
    add_dask_option(parser, "; the trace must be at the same path on storage they share (docs/guides/cli-map.md)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-plots", action="store_true", help="write map.csv and map.json only: no plots (they "
                        "take seconds to draw, a large share of a small trace's map)")
    parser.add_argument("--skip-unsupported", action="store_true", help="map the other layers of a trace holding "
                        "layers of a type this version does not take (listed in the report); default: refuse it")
    parser.add_argument("--device", default="cpu", help="where the designs' cost models run: cpu (fused kernels) "
                        "or cuda[:N] (PyTorch on a GPU; same figures) (default cpu)")
    parser.add_argument("--compare", choices=COMPARISONS, help="lanes: the configured tiles; iso-area: also each "
                        "design with as many tiles as fit the reference design's area (default: the configuration's)")
    parser.add_argument("--dataflow", choices=DATAFLOWS, help="pass formation: default (SPEC section 5) "
                        "or dnnsim (the TensorDash authors' simulator, docs/guides/cli-map.md, Dataflow) (default: the configuration's)")
    parser.add_argument("--area", choices=AREA_MEASURES, help="iso-area measure: asic (the silicon model's area: CMOS "
                        "transistors, or um2 of library cells) or fpga (LUTs from FPGA flow reports) (default: the "
                        "configuration's)")
    add_silicon_options(parser, SILICON_MODELS)
    parser.add_argument("--area-scope", choices=AREA_SCOPES, help="silicon that area and leakage count: compute "
                        "(the tiles' logic) or chip (also the tile buffers and the global buffer) (default: the "
                        "configuration's)")
    parser.add_argument("--area-estimate", choices=AREA_ESTIMATES, help="tiles' area: asic (queues of at "
                        "least the energy table's register_file_min_bits as register files) or generated (the RTL as "
                        "it is, memories in flip-flops) (default: the configuration's)")
    parser.add_argument("--compression", choices=COMPRESSIONS, help="memory traffic: none (dense) or zvc (zero-value "
                        "compressed buffers and DRAM) (default: the configuration's memory.compression)")
    parser.add_argument("--fpga-reports", type=path_argument, help="folder searched for 'dashraker fpga' report.json files "
                        "of the mapped configurations (--area fpga)")
    parser.set_defaults(func=run)


def add_config_option(parser):
    """``--config FILE|PRESET``, for ``map``, ``study``, ``sweep`` and ``suite``: a configuration file or a packaged
    preset's name (``config.config_path``)."""
    from dashraker.mapping.config import PRESETS

    parser.add_argument("--config", type=path_argument, help="accelerator configuration YAML, or a packaged preset: "
                        f"{', '.join(PRESETS)} (docs/guides/cli-map.md, Presets) (default: {PRESETS[0]})")


def add_dask_option(parser, more=""):
    """``--dask ADDRESS``: map on a Dask cluster's workers. It was ``--scheduler``, which ``map --scheduler greedy``
    read as an address (TensorDash's row scheduler is a configuration key): that flag is refused before any work."""
    parser.add_argument("--dask", metavar="tcp://HOST:PORT",
                        help=f"map on the workers of the Dask scheduler at this address instead of local ones{more}")
    renamed_option(parser, "--scheduler", "--dask ADDRESS (a Dask scheduler's address); TensorDash's row scheduler "
                                          "is the configuration's tensordash.scheduler")


def add_silicon_options(parser, models):
    """``--silicon`` (one of ``models``) and the caches of the tiles' figures, for ``map`` and ``study``."""
    parser.add_argument("--silicon", choices=models, help="tiles' area and leakage: transistors (CMOS transistors, "
                        "'dashraker area') or liberty (the configuration's standard-cell library, 'dashraker asic')"
                        f"{', both: each side by side' if 'both' in models else ''} (default: the configuration's)")
    parser.add_argument("--area-cache", type=path_argument, default=Path("build/area"),
                        help="folder of cached 'dashraker area' figures, for leakage and iso-area (default build/area)")
    parser.add_argument("--asic-cache", type=path_argument, default=Path("build/asic"),
                        help="folder of tiles mapped onto the library ('dashraker asic --build'), for silicon: liberty "
                        "and clocks from static timing (default build/asic)")
    parser.add_argument("--force-size", action="store_true", help="synthesise a tile past the size guard of "
                        "`dashraker verilog` (512 lanes) for its silicon (a tile already measured is never refused)")


def design_list(values):
    """The design names of ``--design`` options (repeatable, comma-separated, 'all'); ``[None]`` (the configuration's)
    where none is given; a ``CliError`` for an unknown one."""
    from dashraker.designs import DESIGNS

    if not values:
        return [None]
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    if not names:
        raise CliError(f"--design: no design named in {','.join(values)!r}; choose from {', '.join(DESIGNS)} or all")
    names = list(DESIGNS) if "all" in names else list(dict.fromkeys(names))
    unknown = [name for name in names if name not in DESIGNS]
    if unknown:
        raise CliError(f"--design: unknown design {unknown[0]!r}; choose from {', '.join(DESIGNS)} or all")
    return names


def is_map_output(path):
    """Whether the folder ``path`` holds only ``map`` reports (what a new run may replace)."""
    from dashraker.mapping.isoarea import PLOT
    from dashraker.mapping.report import REPORTS

    return {entry.name for entry in Path(path).iterdir()} <= {*REPORTS, PLOT}


def run(args):
    from dashraker.mapping.report import summary_table, write_reports
    from dashraker.mapping.runner import totals
    from dashraker.outputs import OutputFolder
    from dashraker.trace.cli import step_list

    if args.jobs is not None and args.jobs < 1:
        raise CliError(f"--jobs must be at least 1, not {args.jobs}")
    if args.jobs is not None and args.dask:
        raise CliError("--jobs and --dask exclude each other: the cluster's workers are the jobs")
    steps = step_list("--step", args.step)
    configs = design_configs(args)
    check_sizes(configs, args.area_cache, args.asic_cache, args.force_size)
    if not args.trace.is_dir():
        raise CliError(f"{args.trace}: not a trace folder")
    out = OutputFolder(args.out, "--out", is_map_output, "give a new folder or one of earlier map reports")
    if (args.compare or configs[0].compare) == "iso-area":
        from dashraker.outputs import check_output_folder

        check_output_folder(args.area_cache, "--area-cache")  # before the mapping and the synthesis
    with out:
        unrecorded = check_trace(args.trace, configs, steps, args.skip_unsupported)  # before the tiles' synthesis
        configs = with_silicon(configs, args.area_cache, not args.no_progress, args.jobs, args.asic_cache)
        rows = _map(args, configs, steps)
        sums = totals(rows)
        print(summary_table(rows, sums))
        meta = {"trace": str(args.trace), "configs": [config.as_dict() for config in configs]}
        if args.skip_unsupported:
            meta["skipped_layers"] = _skipped(args.trace)
        if unrecorded:
            meta["unrecorded_layers"] = [{"name": name, "type": kind} for name, kind in unrecorded]
        iso_area = None
        if (args.compare or configs[0].compare) == "iso-area":
            meta["iso_area"] = iso_area = _iso_area(args, configs, steps, sums)
        with out.staging() as staging:
            names = list(write_reports(staging, rows, sums, meta, plots=not args.no_plots))
            if iso_area is not None and not args.no_plots:
                from dashraker.mapping import isoarea

                isoarea.plot(staging / isoarea.PLOT, iso_area["designs"], iso_area["unit"])
                names.append(isoarea.PLOT)
    print("\nwrote " + ", ".join(str(out.path / name) for name in names))


def design_configs(args):
    """The configuration of each design ``--design`` names (``design_list``), with the command's overrides
    (``override``), its library's tools checked: ``CliError`` for a bad one, before any work."""
    from dashraker.mapping.config import ConfigError, load_config

    try:
        configs = [override(load_config(args.config, design, args.device), args) for design in design_list(args.design)]
    except ConfigError as error:
        raise CliError(str(error)) from None
    check_tools(configs, args.asic_cache)
    return configs


def override(config, args):
    """``config`` with the command line's ``--dataflow``, ``--area-scope``, ``--area-estimate``, ``--silicon`` and
    ``--compression`` where given."""
    if getattr(args, "silicon", None):
        config = dataclasses.replace(config, silicon=args.silicon)
    if getattr(args, "dataflow", None):
        config = dataclasses.replace(config, dataflow=args.dataflow)
    if getattr(args, "area_scope", None):
        config = dataclasses.replace(config, area_scope=args.area_scope)
    if getattr(args, "area_estimate", None):
        config = dataclasses.replace(config, area_estimate=args.area_estimate)
    if getattr(args, "compression", None):
        config = dataclasses.replace(config, memory=dataclasses.replace(config.memory, compression=args.compression))
    return config


def check_trace(path, configs, steps, skip_unsupported=False):
    """A ``CliError`` where ``map_trace`` would refuse the trace (``runner.check_mappable``), before any work; returns
    the modules its recording left out (``Trace.unrecorded``), warned of on stderr."""
    from dashraker.mapping.runner import check_mappable
    from dashraker.trace import TraceError, open_trace

    try:
        trace = open_trace(path)
        check_mappable(trace, configs, steps, skip_unsupported)
    except (TraceError, ValueError) as error:
        raise CliError(str(error)) from None
    warn_unrecorded(trace)
    return trace.unrecorded


def warn_unrecorded(trace):
    """Say on stderr, before the work, that ``trace``'s figures leave out the work of modules its recording did not
    record: its verdict is the recorded layers', not the whole network's."""
    from dashraker.trace.store import unrecorded_message

    if trace.unrecorded:
        print(f"warning: {trace.path}: {unrecorded_message(trace.unrecorded)}", file=sys.stderr, flush=True)


def check_tools(configs, asic_cache):
    """A ``CliError`` where ``configs`` map tiles onto a library that is not installed, or without OpenSTA, or into an
    ``asic_cache`` that is not a folder: before any synthesis."""
    from dashraker.mapping import silicon
    from dashraker.outputs import check_output_folder

    if any(config.uses_library for config in configs):
        check_output_folder(asic_cache, "--asic-cache")
    try:
        silicon.check_tools(configs)
    except silicon.SiliconError as error:
        raise CliError(str(error)) from None


def check_sizes(configs, area_cache, asic_cache, force=False):
    """A ``CliError`` where a tile that ``with_silicon`` would synthesise is past the size guard of ``verilog``
    (``check_size``) and not ``force``, or its figures could not be cached in ``area_cache``: before the trace is read
    and the tiles synthesised."""
    from dashraker.designs.cli import check_size
    from dashraker.mapping import silicon
    from dashraker.outputs import check_output_folder

    todo = silicon.unmeasured(configs, area_cache, asic_cache)
    for design, params in todo:
        check_size(design, params, force)
    if todo and any(config.silicon != "liberty" for config in configs):
        check_output_folder(area_cache, "--area-cache")


def with_silicon(configs, area_cache, progress, jobs=None, asic_cache="build/asic"):
    """Every configuration with its tile and the reference tile measured (for leakage) and at its clock, or a
    ``CliError``; tiles not yet measured are synthesised ``jobs`` at a time (``silicon.resolve_all``)."""
    from dashraker.mapping import silicon

    try:
        return silicon.resolve_all(configs, area_cache, progress, jobs, asic_cache)
    except silicon.SiliconError as error:
        raise CliError(f"leakage needs the tile's silicon: {error}") from None


def _skipped(trace):
    """The layers ``--skip-unsupported`` left out, printed and as the report lists them."""
    from dashraker.trace import open_trace

    skipped = [{"name": layer.name, "type": layer.type, "reason": layer.reason} for layer in open_trace(trace).unsupported]
    for layer in skipped:
        print(f"skipped layer {layer['name']!r}: {layer['reason']}")
    return skipped


def _map(args, configs, steps):
    """``map_trace`` with the command's options; bad input (trace, steps, cluster) as a ``CliError``."""
    from dashraker.mapping.executors import ClusterError
    from dashraker.mapping.runner import map_trace
    from dashraker.trace import TraceError

    try:
        return map_trace(args.trace, configs, steps, args.jobs, not args.no_progress, args.dask,
                         args.skip_unsupported)
    except (TraceError, ValueError, ClusterError) as error:
        raise CliError(str(error)) from None


def _iso_area(args, configs, steps, sums):
    """Map each design again with as many tiles as fit the reference's area; print the comparison, return it."""

    from dashraker.designs import reference
    from dashraker.mapping import isoarea
    from dashraker.mapping.runner import totals

    measure = args.area or configs[0].area
    ref = reference().name
    if (ref, "all") not in sums:
        raise CliError(f"--compare iso-area: map the reference design too (--design {ref},...)")
    try:
        budget = isoarea.budget(configs, measure, args.area_cache, args.fpga_reports, not args.no_progress)
    except isoarea.AreaMeasureError as error:
        raise CliError(str(error)) from None
    iso_sums = {**sums, **totals(_map(args, budget.resized(configs), steps))}
    entries = isoarea.compare(sums, iso_sums, budget.areas, {c.design.name: c.tiles for c in configs},
                              budget.tiles_iso, ref, budget.fixed)
    print("\n" + isoarea.iso_table(entries, budget))
    print("energy counts every action of every tile, every tile's clocked flip-flops and the leakage of all the "
          f"configured silicon ({budget.scope} scope); perf/area counts each design's cycles at its clock")
    return {"measure": measure, "unit": budget.unit, "scope": budget.scope,
            "estimate": budget.estimate if measure == "asic" else None, "reference": ref,
            "reference_params": configs[0].reference,
            "fixed_area": budget.fixed, "designs": entries}
