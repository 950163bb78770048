"""``dashraker verilog fpraker``: the FPRaker tile's generator parameters."""

from dashraker.hw.fpraker.tile import Tile

__all__ = ["add_arguments", "from_arguments"]


def add_arguments(parser):
    parser.add_argument("--lanes", type=int, default=8, help="lanes N per PE (default 8)")
    parser.add_argument("--guard-bits", type=int, default=3, help="guard bits G of the accumulator window (default 3)")
    parser.add_argument("--zero-block-cycles", type=int, choices=[0, 1], default=1,
                        help="cycles an all-zero block costs (default 1)")


def from_arguments(args):
    if args.dtype != "bf16":
        raise ValueError(f"FPRaker takes bf16 operands only, not --dtype {args.dtype}")
    return Tile(rows=args.rows, cols=args.cols, lanes=args.lanes, guard_bits=args.guard_bits,
                zero_block_cycles=args.zero_block_cycles)
