"""``dashraker verilog DESIGN``: write a design's Verilog."""

import importlib

from dashraker.cli import CliError

__all__ = ["register", "DESIGNS", "add_tile_arguments"]

# Design name -> module with ``add_arguments(parser)`` and ``from_arguments(args) -> Component``.
DESIGNS = {
    "baseline": "dashraker.hw.baseline.cli",
    "tensordash": "dashraker.hw.tensordash.cli",
    "fpraker": "dashraker.hw.fpraker.cli",
}


def add_tile_arguments(parser):
    """The tile arguments every design takes (rows, columns, operand format)."""
    parser.add_argument("--rows", type=int, default=1, help="PE rows R of the tile (default 1)")
    parser.add_argument("--cols", type=int, default=1, help="PE columns C of the tile (default 1)")
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16", help="operand format")


def register(subparsers):
    parser = subparsers.add_parser("verilog", help="generate Verilog for a design",
                                   description="Generate synthesisable Verilog for a design.")
    designs = parser.add_subparsers(dest="design", required=True, metavar="DESIGN")
    for name, module in DESIGNS.items():
        design = importlib.import_module(module)
        sub = designs.add_parser(name, help=f"the {name} tile", description=design.__doc__)
        add_tile_arguments(sub)
        sub.add_argument("--name", default=None, help="top module name (default: dashraker_DESIGN)")
        sub.add_argument("-o", "--output", required=True, help="Verilog file to write")
        design.add_arguments(sub)
        sub.set_defaults(func=_generate, builder=design.from_arguments)


def _generate(args):
    from dashraker.hw.verilog import write_verilog

    try:
        component = args.builder(args)
    except (TypeError, ValueError) as error:
        raise CliError(f"{args.design}: {error}") from None
    path = write_verilog(component, args.output, args.name or f"dashraker_{args.design}")
    print(f"wrote {path} ({args.design}, {args.rows}x{args.cols} PEs, latency {component.latency} cycles)")
