"""``dashraker verilog DESIGN``: write a design's Verilog; the per-design subcommands every tool shares."""

from dashraker.errors import CliError

__all__ = ["register", "add_design_parsers", "check_flag", "design_params", "tile_lanes"]

# Elaboration and conversion cost about 0.2 CPU s per lane (baseline bf16 here: 16 lanes 2.6 s,
# 64 lanes 11 s) and grow in memory alike: past this many lanes in a tile, ask first.
MAX_LANES = 512
SECONDS_PER_LANE = 0.2


def add_design_parsers(parser, func, add_options=None):
    """One subcommand per registered design with its parameters as flags; returns the subparsers.

    ``add_options(subparser)`` adds the tool's own flags. Each subcommand's namespace
    gets ``design`` (the descriptor) and ``func``.
    """
    from dashraker.designs import DESIGNS

    designs = parser.add_subparsers(dest="design_name", required=True, metavar="DESIGN")
    for design in DESIGNS.values():
        sub = designs.add_parser(design.name, help=design.summary, description=f"The {design.name} tile: "
                                 f"{design.summary}.")
        design.add_arguments(sub)
        sub.add_argument("--force-size", action="store_true",
                         help=f"go ahead with a tile of more than {MAX_LANES} lanes (rows x cols x lanes)")
        if add_options is not None:
            add_options(sub)
        sub.set_defaults(func=func, design=design)
    return designs


def check_flag(parameter, value, where=""):
    """``value`` checked by its ``Parameter``; ``CliError`` naming the flag (after ``where``) if refused."""
    try:
        return parameter.check(value)
    except ValueError as error:
        raise CliError(f"{where}{parameter.option} {error}") from None


def design_params(args):
    """The design's checked parameters from a namespace of ``add_design_parsers``; ``CliError`` if refused."""
    design = args.design
    for parameter in design.parameters:
        check_flag(parameter, getattr(args, parameter.name), f"{design.name} ")
    try:
        params = design.params(**{parameter.name: getattr(args, parameter.name) for parameter in design.parameters})
    except ValueError as error:
        raise CliError(f"{design.name}: {error}") from None
    lanes = tile_lanes(params)
    if lanes > MAX_LANES and not args.force_size:
        raise CliError(f"{design.name}: a {params['rows']}x{params['cols']} tile of {params['lanes']}-lane PEs has "
                       f"{lanes:,} lanes, estimated {lanes * SECONDS_PER_LANE / 60:.0f} CPU minutes to generate "
                       f"(limit {MAX_LANES} lanes); pass --force-size to go ahead")
    return params


def tile_lanes(params):
    """The size estimate of a tile that the size guards use: its lanes, rows x cols x lanes."""
    return params["rows"] * params["cols"] * params["lanes"]


def register(subparsers):
    parser = subparsers.add_parser("verilog", help="generate Verilog for a design",
                                   description="Generate synthesisable Verilog for a design.")

    def options(sub):
        sub.add_argument("--name", default=None, help="top module name (default: dashraker_DESIGN)")
        sub.add_argument("-o", "--out", required=True, help="Verilog file to write")

    add_design_parsers(parser, _generate, options)


def _generate(args):
    from dashraker.hw.verilog import write_verilog

    from dashraker.outputs import check_output_file

    params = design_params(args)
    check_output_file(args.out, "--out")
    try:
        component = args.design.tile(params)
    except ValueError as error:
        raise CliError(str(error)) from None
    path = write_verilog(component, args.out, args.name or f"dashraker_{args.design.name}")
    print(f"wrote {path} ({args.design.name}, {params['rows']}x{params['cols']} PEs, "
          f"latency {component.latency} cycles)")
