"""``dashraker verilog tensordash``: the TensorDash tile's generator parameters."""

from dashraker.hw.tensordash.tile import Tile

__all__ = ["add_arguments", "from_arguments"]


def add_arguments(parser):
    parser.add_argument("--lanes", type=int, default=16, help="MAC lanes N per PE (default 16)")
    parser.add_argument("--lookahead", type=int, default=2, help="lookahead H: window of H+1 steps (default 2)")
    parser.add_argument("--pattern", default="T<2,5>",
                        help="interconnect offsets: 'T<2,5>', 'T<h,0>' or '(0,0),(1,0),(1,-1),...' (default T<2,5>)")


def from_arguments(args):
    return Tile(rows=args.rows, cols=args.cols, lanes=args.lanes, lookahead=args.lookahead,
                pattern=args.pattern, fmt=args.dtype)
