"""``dashraker verilog baseline``: the dense tile's generator parameters."""

from dashraker.hw.baseline.tile import Tile

__all__ = ["add_arguments", "from_arguments"]


def add_arguments(parser):
    parser.add_argument("--lanes", type=int, default=16, help="MAC lanes N per PE (default 16)")


def from_arguments(args):
    return Tile(rows=args.rows, cols=args.cols, lanes=args.lanes, fmt=args.dtype)
