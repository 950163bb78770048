"""Error vs fp64 of the baseline's step sums and accumulation orders (SPEC section 2), beside FPRaker's.

Usage: python bench/accumulation_error.py [--rows 64] [--seed 0] [--lanes 8] [--guards 0,3,8,15]
The cases of bench/fpraker_error.py (random data, then real tensors of one
training step of the digits CNN), then random N(0,1) operands scaled so that the
products sit near 2^-40, 2^-48, 2^-56, 2^-100 and 2^58 (K = 256), then a 2^+-20
spread and heavy-tailed products (N exp(2N)), in bf16 as the PEs see them. Columns:

- fp32 loop: the fp32 adder tree per step, its sums added in the one-cycle fp32
  loop (L = 1); L=6: into 6 interleaved fp32 partials combined by the fp32 tree;
- fixed: the tree sums into the fixed-point accumulator (L = 0, the designs'
  default): 384 bits from 2^-192, exact for every fp32 number, rounded once;
- old fixed: the accumulator this replaced, emulated: each tree sum truncated to
  a multiple of 2^-64, NaN for a sum or running total of 2^63 or more (``out``
  counts those passes);
- fused: ``--dot fused``, the exact products aligned to the step's largest in a
  window of 2p + G bits (G = ``FUSED_GUARD_BITS``), summed as integers into the
  fixed-point accumulator, rounded once;
- fma: ``--dot fma``, each lane a bf16 x bf16 + fp32 fused multiply-add into its
  own fp32 accumulator (one rounding per step, L = 1), the lanes' accumulators
  summed by the fp32 tree at the end of the pass;
- FPRaker: its golden model (guard bits 3), the left operand term-serial;
- fp64->fp32: the fp64 dot product rounded to fp32, the least error any fp32
  result can have.
A second table sweeps the fused window's G over ``--guards``.
"""

import argparse
import math
import sys
import time

import torch
from torch.nn import functional as F
from tqdm import tqdm

from dashraker.designs import DESIGNS
from dashraker.formats import FUSED_GUARD_BITS
from dashraker.models.baseline import (accumulate, accumulate_addends, adder_tree, fixed_point_accumulate, fma_lanes,
                                       fused_steps)
from dashraker.models.fpraker.golden import tile as fpraker_tile
from dashraker.models.numerics import fp32_mul, quantize, to_bf16_bits
from fpraker_error import cases  # a sibling script: the same random and real tensors

__all__ = ["main"]

MAGNITUDES = (-40, -48, -56, -100, 58)  # log2 of the products' scale in the added rows


def magnitude_cases(rows, seed):
    """(name, x, w): N(0,1) operands scaled by 2^(m/2) each, so that the products sit near 2^m, K = 256."""
    generator = torch.Generator().manual_seed(seed + 1)
    for power in MAGNITUDES:
        scale = 2.0 ** (power / 2)
        yield (f"products 2^{power} K=256", torch.randn(rows, 256, generator=generator) * scale,
               torch.randn(256, 16, generator=generator) * scale)


def tail_cases(rows, seed):
    """(name, x, w) where the claims of the error table stop holding: a 2^+-20 spread of the left operand's exponents,
    and heavy-tailed products (x = N exp(2N'), log-normal magnitudes), K = 256."""
    generator = torch.Generator().manual_seed(seed + 2)
    spread = torch.exp2(torch.randint(-20, 20, (rows, 256), generator=generator).float())
    yield "random 2^+-20 spread", torch.randn(rows, 256, generator=generator) * spread, \
        torch.randn(256, 16, generator=generator)
    tails = torch.randn(rows, 256, generator=generator) * torch.exp(2 * torch.randn(rows, 256, generator=generator))
    yield "heavy-tailed N exp(2N)", tails, torch.randn(256, 16, generator=generator)


def _steps(matrix, lanes):
    """Rows of ``matrix [M, K]`` as [M, steps, lanes] in bf16 (fp32 tensor), zero-padded."""
    steps = -(-matrix.shape[1] // lanes)
    return quantize(F.pad(matrix.float(), (0, steps * lanes - matrix.shape[1])), "bf16").reshape(len(matrix), steps,
                                                                                                  lanes)


def _old_fixed(step_sums):
    """The 128-bit accumulator from 2^-64 this replaced: sums truncated to multiples of 2^-64 (each stays an fp32
    number), added exactly, rounded once; NaN where a sum or the running total reaches 2^63."""
    sums = step_sums.double()
    truncated = (torch.trunc(sums * 2.0**64) / 2.0**64).float()
    out = (sums.abs() >= 2.0**63).any(-1) | (sums.cumsum(-1).abs() >= 2.0**63).any(-1)
    return torch.where(out, math.nan, fixed_point_accumulate(truncated)), out


def errors(x, w, lanes, guards):
    """Median and max error of each order for ``x [M, K] @ w [K, N]``, and the old accumulator's passes out of range.

    Errors are ``|y - y64| / sum_i |x_i w_i|`` per dot product (y64: the fp64 dot product of the
    same bf16 operands), as bench/fpraker_error.py measures them; NaN counts as an infinite error.
    """
    a, b = _steps(x, lanes), _steps(w.T.contiguous(), lanes)  # [M, S, lanes], [N, S, lanes]
    m, n = len(a), len(b)
    step_sums = adder_tree(fp32_mul(a[:, None], b[None]))  # [M, N, S]
    products = a.double()[:, None] * b.double()[None]
    exact, scale = products.sum((2, 3)), products.abs().sum((2, 3))
    old, out = _old_fixed(step_sums)
    pairs = fpraker_tile(to_bf16_bits(a)[:, None].expand(m, n, *a.shape[1:]).reshape(m * n, 1, *a.shape[1:]),
                         to_bf16_bits(b)[None].expand(m, n, *b.shape[1:]).reshape(m * n, 1, *b.shape[1:]),
                         *(DESIGNS["fpraker"].parameter(name).default for name in ("guard_bits", "zero_block_cycles")))
    fused = {guard: accumulate_addends(fused_steps(a[:, None].expand(m, n, *a.shape[1:]),
                                                   b[None].expand(m, n, *b.shape[1:]), "bf16", guard))
             for guard in sorted({FUSED_GUARD_BITS, *guards})}
    results = {"fp32 loop": accumulate(step_sums, accumulators=1), "L=6": accumulate(step_sums, accumulators=6),
               "fixed": accumulate(step_sums, accumulators=0), "old fixed": old, "fused": fused[FUSED_GUARD_BITS],
               "fma": fma_lanes(a[:, None], b[None]), "FPRaker": pairs.outputs.reshape(m, n), "fp64->fp32": exact.float(),
               **{f"G={guard}": y for guard, y in fused.items()}}
    figures = {"out": int(out.sum())}
    counted = scale > 1e-300
    for name, y in results.items():
        error = ((y.double() - exact).abs() / scale)[counted].nan_to_num(nan=math.inf)
        figures[name] = (error.median().item(), error.max().item())
    return figures


def _table(rows, columns, extra=None):
    titles = [title for name in columns for title in (f"{name} med", "max")]
    print(f"{'case':28}" + "".join(f"{title:>15}" for title in titles) + (f"{extra:>6}" if extra else ""))
    for name, figures in rows:
        print(f"{name:28}" + "".join(f"{value:>15.1e}" for column in columns for value in figures[column])
              + (f"{figures[extra]:>6}" if extra else ""))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64, help="rows of the left operand per case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lanes", type=int, default=8, help="lanes N: products per step (default 8)")
    parser.add_argument("--guards", default="0,3,8,15", help="the fused window's guard bits G to sweep (0..15)")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.lanes < 1:
        parser.error("--rows and --lanes must be positive")
    try:
        guards = [int(guard) for guard in args.guards.split(",")]
    except ValueError:
        parser.error(f"--guards must be integers separated by commas, not {args.guards!r}")
    if not all(0 <= guard <= 15 for guard in guards):
        parser.error(f"--guards must lie in 0..15, not {args.guards!r}")
    start = time.time()
    all_cases = [*cases(args.rows, args.seed), *magnitude_cases(args.rows, args.seed), *tail_cases(args.rows, args.seed)]
    table = [(name, errors(x, w, args.lanes, guards)) for name, x, w in tqdm(all_cases, desc="cases")]
    _table(table, ["fp32 loop", "L=6", "old fixed", "fixed", "fused", "fma", "FPRaker", "fp64->fp32"],
           extra="out")
    print(f"errors: |y - y_fp64| / sum|x_i w_i| per dot product (inf: NaN); bf16 operands, {args.lanes} lanes; fixed: "
          f"384 bits from 2^-192; old fixed: 128 bits from 2^-64 (out: its NaN passes); fused: window 2p + "
          f"{FUSED_GUARD_BITS} bits; fma: a fused multiply-add per lane, L = 1; FPRaker: guard bits 3")
    print()
    _table(table, [f"G={guard}" for guard in sorted({FUSED_GUARD_BITS, *guards})])
    print("the fused dot product's error by the window's guard bits G (window 16 + G bits for bf16)")
    print(f"({time.time() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
