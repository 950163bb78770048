"""``dashraker fpga DESIGN ...`` and ``dashraker fpga compare``: synthesis, place and route, reports."""

from dashraker.designs.cli import add_design_parsers, design_params, tile_lanes
from dashraker.errors import CliError
from dashraker.fpga.options import add_flow_arguments, flow, flow_options

__all__ = ["register"]

# No design takes fewer LUTs per lane on ECP5 (docs/results/fpga-history.md: FPRaker 864 at 8 lanes, the
# baseline 1,320): a lower bound, so the early refusal never refuses a design that would fit.
MIN_LUTS_PER_LANE = 500


def register(subparsers):
    parser = subparsers.add_parser(
        "fpga", help="synthesise, place and route a design for an FPGA; compare the designs",
        description="Wrap a generated design in a device top level (narrow registered word streams), synthesise "
        "it with Yosys, place and route it with nextpnr at a target clock, and report LUTs, flip-flops, DSP "
        "blocks, block RAM, Fmax and the critical path (report.json, report.md).")
    designs = add_design_parsers(
        parser, _run_design, lambda sub: add_flow_arguments(sub, "folder for the netlists, logs and report.json / report.md"))
    from dashraker.fpga.compare import register as register_compare

    register_compare(designs)


def _run_design(args):
    from dashraker.fpga.report import summary

    options = flow_options(args)
    params = design_params(args)
    luts, available = tile_lanes(params) * MIN_LUTS_PER_LANE, options.target.capacity["lut"]
    if luts > available and not args.force_size:
        raise CliError(f"{args.design.name}: {tile_lanes(params):,} lanes need at least {luts:,} LUTs "
                       f"({MIN_LUTS_PER_LANE} per lane) and {args.device} has {available:,}; refused before synthesis "
                       "(pass --force-size to try anyway)")
    from dashraker.fpga.flow import is_flow_output
    from dashraker.outputs import OutputFolder

    out = OutputFolder(args.out, "--out", is_flow_output, "give a new folder or one of an earlier flow run")
    try:
        component = args.design.tile(params)
    except ValueError as error:
        raise CliError(str(error)) from None
    with out:
        report = flow(component, options, args.design.name, params, args.out, progress=not args.no_progress)
    print(summary(report))
    print(f"reports: {args.out / 'report.json'}, {args.out / 'report.md'}")
