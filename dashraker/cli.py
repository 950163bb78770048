"""The ``dashraker`` command: one entry point, one module per subcommand."""

import argparse
import importlib
import signal
import sys

__all__ = ["main"]

# Subcommand name -> module providing ``register(subparsers)``. Modules keep their
# top-level imports light so that ``dashraker --help`` stays fast.
COMMANDS = {
    "verilog": "dashraker.designs.cli",
    "trace": "dashraker.trace.cli",
    "map": "dashraker.mapping.cli",
    "sweep": "dashraker.mapping.sweep",
    "study": "dashraker.mapping.study",
    "suite": "dashraker.mapping.suite",
    "fpga": "dashraker.fpga.cli",
    "area": "dashraker.mapping.area_cli",
    "cosim": "dashraker.sim.cosim_cli",
    "energy": "dashraker.sim.energy_cli",
    "asic": "dashraker.sim.asic_cli",
    "demo": "dashraker.demo",
}


class Terminated(BaseException):
    """SIGTERM, raised like ``KeyboardInterrupt`` so that every ``finally`` runs: workers end, temporaries go."""


def _terminate(signum, frame):
    raise Terminated()


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
    from dashraker.errors import CliError, RenamedOption
    from dashraker.outputs import OutputError, begin, on_disk

    try:
        args = build_parser().parse_args(argv)
    except RenamedOption as error:
        print(f"{error.prog}: error: {error}", file=sys.stderr)
        return 2
    begin()
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return args.func(args) or 0
    except (CliError, OutputError) as error:
        message, status = error, 2
    except OSError as error:  # a full disk, a read-only file system: the file and the reason, no traceback
        message, status = f"{error.filename}: {error.strerror}" if error.filename else error, 2
    except KeyboardInterrupt:
        message, status = f"interrupted (SIGINT); {on_disk()}", 130
    except Terminated:
        message, status = f"terminated (SIGTERM); {on_disk()}", 143
    print(f"dashraker {args.command}: error: {message}", file=sys.stderr)
    return status
