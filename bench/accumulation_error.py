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
- into a two's complement fixed-point accumulator of ``--width`` bits whose least
  significant bit weighs 2^``--lsb`` (default 128 bits from 2^-64: magnitudes below
  2^63), rounded once to fp32, to nearest even, at the end of the pass. A tree sum
  enters it aligned to the frame, its bits below the frame's LSB dropped
  (truncation towards zero, as a right shift of the magnitude drops them); the
  sum is exact from there on. A pass whose running sum leaves the frame, or a
  tree sum at 2^63 or beyond, is out of range: counted in the last column, and
  its error is infinite.
"""

import argparse
import math
import sys
import time

import torch
from torch.nn import functional as F
from tqdm import tqdm

from dashraker.models.baseline import accumulate, adder_tree
from dashraker.models.numerics import fp32_mul, quantize
from fpraker_error import cases  # a sibling script: the same random and real tensors

__all__ = ["main", "fixed_point_accumulate"]

PARTIALS = (2, 3, 4, 6, 8)


def _round_fp32(units, lsb):
    """``units * 2**lsb`` (a Python int) rounded to fp32, to nearest even; +0 for 0, subnormals flushed to zero."""
    if units == 0:
        return 0.0
    magnitude, shift = abs(units), max(abs(units).bit_length() - 24, 0)
    kept, dropped = divmod(magnitude, 1 << shift)
    half = (1 << shift) >> 1
    if shift and (dropped > half or (dropped == half and kept & 1)):
        kept += 1
    value = math.ldexp(kept, shift + lsb)  # exact in float64: at most 25 significant bits
    if value >= 2.0**128:
        value = math.inf
    elif value < 2.0**-126:
        value = 0.0
    return math.copysign(value, units)


def fixed_point_accumulate(step_sums, width=128, lsb=-64):
    """Tree sums [..., steps] (fp32) summed in a ``width``-bit fixed-point frame from 2^``lsb``, rounded once.

    Returns the fp32 results [...] (float64 tensor; NaN where the pass went out of range) and
    the count of passes out of range.
    """
    limit = 1 << (width - 1)  # two's complement: -limit <= sum < limit
    flat = step_sums.double().reshape(-1, step_sums.shape[-1]).tolist()
    results, out_of_range = [], 0
    for steps in flat:
        total, inside = 0, True
        for value in steps:
            if not abs(value) < math.ldexp(1, width - 1 + lsb):  # Inf and NaN too
                inside = False
                break
            total += int(math.ldexp(value, -lsb))  # exact scaling; int() truncates towards zero
            inside = inside and -limit <= total < limit
        out_of_range += not inside
        results.append(_round_fp32(total, lsb) if inside else math.nan)
    return torch.tensor(results, dtype=torch.float64).reshape(step_sums.shape[:-1]), out_of_range


def _steps(matrix, lanes):
    """Rows of ``matrix [M, K]`` as [M, steps, lanes] in bf16 (fp32 tensor), zero-padded."""
    steps = -(-matrix.shape[1] // lanes)
    return quantize(F.pad(matrix.float(), (0, steps * lanes - matrix.shape[1])), "bf16").reshape(len(matrix), steps,
                                                                                                  lanes)


def errors(x, w, lanes, width, lsb):
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
    results["fixed"], out_of_range = fixed_point_accumulate(step_sums, width, lsb)
    figures = {"out_of_range": out_of_range}
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
    parser.add_argument("--width", type=int, default=128, help="bits of the fixed-point accumulator (default 128)")
    parser.add_argument("--lsb", type=int, default=-64, help="exponent of its least significant bit (default -64)")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.lanes < 1 or args.width < 2:
        parser.error("--rows and --lanes must be positive and --width at least 2")
    start = time.time()
    table = [(name, errors(x, w, args.lanes, args.width, args.lsb))
             for name, x, w in tqdm(list(cases(args.rows, args.seed)), desc="cases")]
    orders = {"L=1": "fp32 loop", **{f"L={count}": f"L={count}" for count in PARTIALS}, "fixed": "fixed"}
    titles = [title for name in orders.values() for title in (f"{name} med", "max")]
    print(f"{'case':28}" + "".join(f"{title:>14}" for title in titles) + f"{'out of range':>14}")
    for name, figures in table:
        print(f"{name:28}" + "".join(f"{value:>14.1e}" for order in orders for value in figures[order])
              + f"{figures['out_of_range']:>14}")
    print(f"errors: |y - y_fp64| / sum|x_i w_i| per dot product; bf16 operands, {args.lanes} lanes; L partial fp32 "
          f"accumulators combined by the fp32 tree; fixed point: {args.width} bits from 2^{args.lsb}, rounded once")
    print(f"({time.time() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
