"""The FPGA flow's command-line options, shared by ``dashraker fpga DESIGN`` and ``dashraker fpga compare``: added
to a parser, checked once, and passed to ``run_flow``."""

from dashraker.errors import CliError
from dashraker.outputs import path_argument

__all__ = ["add_flow_arguments", "flow_options", "flow"]


def add_flow_arguments(parser, out_help):
    from dashraker.fpga.devices import DEVICES
    from dashraker.fpga.flow import ROUTERS, FlowOptions

    defaults = FlowOptions()
    parser.add_argument("--device", default=defaults.device,
                        help=f"target part: {', '.join(DEVICES)} (default {defaults.device})")
    parser.add_argument("--clock", type=float, default=defaults.clock,
                        help=f"target clock in MHz for place and route (default {defaults.clock:g})")
    parser.add_argument("--word-bits", type=int, default=defaults.word_bits,
                        help=f"width of the wrapper's pin words (default {defaults.word_bits})")
    parser.add_argument("--keep-depth", type=int, default=defaults.keep_depth,
                        help="module levels below the top kept through synthesis for the per-instance "
                             f"breakdown (default {defaults.keep_depth}: wrapper, tile, PEs; more levels split "
                             "the units, but synthesis maps each kept module on its own)")
    parser.add_argument("--seed", type=int, default=defaults.seed,
                        help=f"nextpnr placement seed (default {defaults.seed})")
    parser.add_argument("--seeds", type=int, default=defaults.seeds, metavar="K",
                        help="place and route with the K seeds from --seed on, after one synthesis, and report the "
                             f"median Fmax (default {defaults.seeds})")
    parser.add_argument("--jobs", type=int, default=defaults.jobs, metavar="J",
                        help="place and route up to J of the seeds at once, one nextpnr process each "
                             f"(default {defaults.jobs})")
    parser.add_argument("--router", choices=ROUTERS, default=defaults.router,
                        help=f"nextpnr's router (default {defaults.router}; router2 copes better with congested "
                             "designs)")
    parser.add_argument("--timing-weight", type=int, default=None, metavar="W",
                        help="nextpnr's placer weight of timing-critical connections (default nextpnr's, 10; "
                             "a large tile's long nets shorten with more, FPRaker's 2x2 closes with 60)")
    parser.add_argument("--timing-ripup", action="store_true",
                        help="have nextpnr's router rip up and route again the nets that fail timing (slower)")
    parser.add_argument("--out", type=path_argument, required=True, help=out_help)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def flow_options(args):
    """The ``FlowOptions`` of the command line's flags, checked once; ``CliError`` naming the flag otherwise."""
    from dashraker.fpga.flow import FlowOptions, OptionError

    try:
        return FlowOptions(device=args.device, clock=args.clock, word_bits=args.word_bits, keep_depth=args.keep_depth,
                           seed=args.seed, seeds=args.seeds, jobs=args.jobs, router=args.router,
                           timing_weight=args.timing_weight, timing_ripup=args.timing_ripup)
    except OptionError as error:
        raise CliError(f"--{error.name.replace('_', '-')} {error.problem}") from None


def flow(component, options, design, params, out, previous=None, progress=True):
    """Run the flow (``previous``: see ``run_flow``); ``FlowError`` -> ``CliError``."""
    from dashraker.fpga.flow import FlowError, run_flow

    try:
        return run_flow(component, out, options, design=design, params=params, progress=progress, previous=previous)
    except FlowError as error:
        raise CliError(str(error)) from None
