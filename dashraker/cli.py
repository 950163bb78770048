"""The ``dashraker`` command: one entry point, one module per subcommand."""

import argparse
import importlib
import sys

__all__ = ["main", "CliError"]

# Subcommand name -> module providing ``register(subparsers)``. Modules keep their
# top-level imports light so that ``dashraker --help`` stays fast.
COMMANDS = {
    "verilog": "dashraker.hw.cli",
    "trace": "dashraker.trace.cli",
    "map": "dashraker.mapping.cli",
    "fpga": "dashraker.fpga.cli",
    "area": "dashraker.fpga.area",
    "cosim": "dashraker.sim.cosim_cli",
    "demo": "dashraker.demo",
}


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2, no traceback."""


def build_parser():
    parser = argparse.ArgumentParser(
        prog="dashraker",
        description="Generate, verify and map TensorDash/FPRaker-style training accelerators.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        importlib.import_module(module).register(subparsers)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except CliError as error:
        print(f"dashraker {args.command}: error: {error}", file=sys.stderr)
        return 2
