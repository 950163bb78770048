"""Error vs fp64 of the baseline's accumulation orders (SPEC section 2): the fp32 loop, L partials, a fixed-point sum.

Usage: python bench/accumulation_error.py [--rows 64] [--seed 0] [--lanes 8]
The cases of bench/fpraker_error.py (random data, then real tensors of one
training step of the digits CNN), in bf16 as the baseline PE sees them: each
step's lane products are summed by the fp32 adder tree, and the tree sums of a
pass are accumulated

- in the one-cycle fp32 loop (L = 1, today's ``accumulate``);
- into L interleaved partial fp32 accumulators (step t into partial t mod L, each
  an in-order fp32 sum from +0) combined by the balanced fp32 tree at the end of
  the pass (``accumulate(step_sums, accumulators=L)``);
- into the fixed-point accumulator (L = 0, the designs' default,
  ``accumulate(step_sums, accumulators=0)``): 128 bits whose least significant
  bit weighs 2^-64 (magnitudes below 2^63), rounded once to fp32, to nearest
  even, at the end of the pass. A tree sum enters it aligned to the frame, its
  bits below the frame's LSB dropped (truncation towards zero, as a right shift
  of the magnitude drops them); the sum is exact from there on. A pass whose
  running sum leaves the frame, or a tree sum at 2^63 or beyond, is out of
  range (NaN): counted in the last column, and its error is infinite.
"""

import argparse
import math
import sys
import time

from torch.nn import functional as F
from tqdm import tqdm

from dashraker.models.baseline import accumulate, adder_tree
from dashraker.models.numerics import fp32_mul, quantize
from fpraker_error import cases  # a sibling script: the same random and real tensors

__all__ = ["main"]

PARTIALS = (2, 3, 4, 6, 8)


def _steps(matrix, lanes):
    """Rows of ``matrix [M, K]`` as [M, steps, lanes] in bf16 (fp32 tensor), zero-padded."""
    steps = -(-matrix.shape[1] // lanes)
    return quantize(F.pad(matrix.float(), (0, steps * lanes - matrix.shape[1])), "bf16").reshape(len(matrix), steps,
                                                                                                  lanes)


def errors(x, w, lanes):
    """Median and max error of each accumulation order for ``x [M, K] @ w [K, N]``, and passes out of range.

    Errors are ``|y - y64| / sum_i |x_i w_i|`` per dot product (y64: the fp64 dot product of the
    same bf16 operands), as bench/fpraker_error.py measures them.
    """
    a, b = _steps(x, lanes), _steps(w.T.contiguous(), lanes)  # [M, S, lanes], [N, S, lanes]
    step_sums = adder_tree(fp32_mul(a[:, None], b[None]))  # [M, N, S]
    products = a.double()[:, None] * b.double()[None]
    exact, scale = products.sum((2, 3)), products.abs().sum((2, 3))
    results = {"L=1": accumulate(step_sums)}
    results.update({f"L={count}": accumulate(step_sums, accumulators=count) for count in PARTIALS})
    results["fixed"] = accumulate(step_sums, accumulators=0)
    figures = {"out_of_range": int((results["fixed"].isnan() & exact.isfinite()).sum())}
    counted = scale > 1e-300
    for name, y in results.items():
        error = ((y.double() - exact).abs() / scale)[counted].nan_to_num(nan=math.inf)
        figures[name] = (error.median().item(), error.max().item())
    return figures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64, help="rows of the left operand per case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lanes", type=int, default=8, help="lanes N: products per adder tree (default 8)")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.lanes < 1:
        parser.error("--rows and --lanes must be positive")
    start = time.time()
    table = [(name, errors(x, w, args.lanes))
             for name, x, w in tqdm(list(cases(args.rows, args.seed)), desc="cases")]
    orders = {"L=1": "fp32 loop", **{f"L={count}": f"L={count}" for count in PARTIALS}, "fixed": "fixed"}
    titles = [title for name in orders.values() for title in (f"{name} med", "max")]
    print(f"{'case':28}" + "".join(f"{title:>14}" for title in titles) + f"{'out of range':>14}")
    for name, figures in table:
        print(f"{name:28}" + "".join(f"{value:>14.1e}" for order in orders for value in figures[order])
              + f"{figures['out_of_range']:>14}")
    print(f"errors: |y - y_fp64| / sum|x_i w_i| per dot product; bf16 operands, {args.lanes} lanes; L partial fp32 "
          f"accumulators combined by the fp32 tree; fixed point: 128 bits from 2^-64, rounded once")
    print(f"({time.time() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
