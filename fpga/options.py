"""The FPGA flow's command-line options, shared by ``dashraker fpga DESIGN`` and ``dashraker fpga compare``: added
to a parser, checked once, and passed to ``run_flow``."""

from pathlib import Path

from dashraker.errors import CliError

__all__ = ["add_flow_arguments", "check_flow_arguments", "flow"]

DEFAULT_DEVICE = "ecp5-85k"
DEFAULT_CLOCK_MHZ = 100.0


def add_flow_arguments(parser, out_help):
    from dashraker.fpga.devices import DEVICES
    from dashraker.fpga.flow import ROUTERS

    parser.add_argument("--device", default=DEFAULT_DEVICE,
                        help=f"target part: {', '.join(DEVICES)} (default {DEFAULT_DEVICE})")
    parser.add_argument("--clock", type=float, default=DEFAULT_CLOCK_MHZ,
                        help=f"target clock in MHz for place and route (default {DEFAULT_CLOCK_MHZ:g})")
    parser.add_argument("--word-bits", type=int, default=16, help="width of the wrapper's pin words (default 16)")
    parser.add_argument("--keep-depth", type=int, default=3,
                        help="module levels below the top kept through synthesis for the per-instance "
                             "breakdown (default 3: wrapper, tile, PEs, their units)")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr placement seed (default 1)")
    parser.add_argument("--seeds", type=int, default=1, metavar="K",
                        help="place and route with the K seeds from --seed on, after one synthesis, and report the "
                             "median Fmax (default 1)")
    parser.add_argument("--jobs", type=int, default=1, metavar="J",
                        help="place and route up to J of the seeds at once, one nextpnr process each (default 1)")
    parser.add_argument("--router", choices=ROUTERS, default=ROUTERS[0],
                        help="nextpnr's router (default router1; router2 copes better with congested designs)")
    parser.add_argument("--timing-weight", type=int, default=None, metavar="W",
                        help="nextpnr's placer weight of timing-critical connections (default nextpnr's, 10; "
                             "a large tile's long nets shorten with more, FPRaker's 2x2 closes with 60)")
    parser.add_argument("--timing-ripup", action="store_true",
                        help="have nextpnr's router rip up and route again the nets that fail timing (slower)")
    parser.add_argument("--out", type=Path, required=True, help=out_help)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def check_flow_arguments(args):
    """``CliError`` for a device, clock or word width the flow cannot take."""
    from dashraker.fpga.devices import device
    from dashraker.fpga.flow import MAX_CLOCK_MHZ, MAX_JOBS, MAX_SEEDS, MAX_TIMING_WEIGHT

    try:
        device(args.device)
    except ValueError as error:
        raise CliError(f"--device: {error}") from None
    if not 0 < args.clock <= MAX_CLOCK_MHZ:
        raise CliError(f"--clock must be a frequency in MHz in (0, {MAX_CLOCK_MHZ}], not {args.clock:g}")
    if args.word_bits < 1:
        raise CliError(f"--word-bits must be a positive integer, not {args.word_bits}")
    if args.keep_depth < 1:
        raise CliError(f"--keep-depth must be at least 1, not {args.keep_depth}")
    if not 1 <= args.seeds <= MAX_SEEDS:
        raise CliError(f"--seeds must be an integer in [1, {MAX_SEEDS}], not {args.seeds}")
    if not 1 <= args.jobs <= MAX_JOBS:
        raise CliError(f"--jobs must be an integer in [1, {MAX_JOBS}], not {args.jobs}")
    if args.timing_weight is not None and not 1 <= args.timing_weight <= MAX_TIMING_WEIGHT:
        raise CliError(f"--timing-weight must be an integer in [1, {MAX_TIMING_WEIGHT}], not {args.timing_weight}")


def flow(component, args, design, params, out, previous=None):
    """Run the flow with the command line's options (``previous``: see ``run_flow``); ``FlowError`` -> ``CliError``."""
    from dashraker.fpga.flow import FlowError, run_flow

    try:
        return run_flow(component, args.device, args.clock, out, design=design, params=params,
                        word_bits=args.word_bits, keep_depth=args.keep_depth,
                        seeds=range(args.seed, args.seed + args.seeds), router=args.router,
                        progress=not args.no_progress, previous=previous, jobs=args.jobs,
                        timing_weight=args.timing_weight, timing_ripup=args.timing_ripup)
    except FlowError as error:
        raise CliError(str(error)) from None
