"""``dashraker verilog DESIGN``: write a design's Verilog; the per-design subcommands every tool shares."""

from dashraker.cli import CliError

__all__ = ["register", "add_design_parsers", "design_params"]


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
        if add_options is not None:
            add_options(sub)
        sub.set_defaults(func=func, design=design)
    return designs


def design_params(args):
    """The design's checked parameters from a namespace of ``add_design_parsers``; ``CliError`` if refused."""
    design = args.design
    for parameter in design.parameters:
        try:
            parameter.check(getattr(args, parameter.name))
        except ValueError as error:
            raise CliError(f"{design.name} {parameter.option} {error}") from None
    try:
        return design.params(**{parameter.name: getattr(args, parameter.name) for parameter in design.parameters})
    except ValueError as error:
        raise CliError(f"{design.name}: {error}") from None


def register(subparsers):
    parser = subparsers.add_parser("verilog", help="generate Verilog for a design",
                                   description="Generate synthesisable Verilog for a design.")

    def options(sub):
        sub.add_argument("--name", default=None, help="top module name (default: dashraker_DESIGN)")
        sub.add_argument("-o", "--out", required=True, help="Verilog file to write")

    add_design_parsers(parser, _generate, options)


def _generate(args):
    from dashraker.hw.verilog import write_verilog

    params = design_params(args)
    try:
        component = args.design.tile(params)
    except ValueError as error:
        raise CliError(str(error)) from None
    path = write_verilog(component, args.out, args.name or f"dashraker_{args.design.name}")
    print(f"wrote {path} ({args.design.name}, {params['rows']}x{params['cols']} PEs, "
          f"latency {component.latency} cycles)")
