"""FPRaker error vs fp64 next to the dense fp32 tree, terms per value, skipped terms and cycles per step.

Usage: python bench/fpraker_error.py [--rows 64] [--seed 0]
Random data and real tensors of one training step of the digits CNN
(``dashraker.models.training.capture_step``); the left operand of each
matmul is the term-serial one. Dense baseline: 1 cycle per step.
"""

import argparse
import sys
import time

import torch
from tqdm import tqdm

from dashraker.designs import DESIGNS
from dashraker.models.fpraker.errors import matmul_report
from dashraker.models.training import capture_step

__all__ = ["main"]

COLUMNS = [
    ("terms/val", "mean_terms_per_value", "{:.2f}"),
    ("terms/nz", "mean_terms_per_nonzero", "{:.2f}"),
    ("zeros", "zero_fraction", "{:.2f}"),
    ("skipped", "skipped_fraction", "{:.1e}"),
    ("cyc/step PE", "pe_cycles_per_step", "{:.2f}"),
    ("cyc/step tile", "tile_cycles_per_step", "{:.2f}"),
    ("FPRaker err med", "fpraker_error_median", "{:.1e}"),
    ("max", "fpraker_error_max", "{:.1e}"),
    ("fp32 tree err med", "baseline_error_median", "{:.1e}"),
    ("max", "baseline_error_max", "{:.1e}"),
]


def cases(rows, seed):
    """(name, x, w) triples: random data, then the real tensors with each operand kind term-serial."""
    generator = torch.Generator().manual_seed(seed)
    yield "random N(0,1) K=256", torch.randn(rows, 256, generator=generator), torch.randn(256, 16, generator=generator)
    spread = torch.exp2(torch.randint(-30, 30, (rows, 256), generator=generator).float())
    yield "random 2^+-30 spread", torch.randn(rows, 256, generator=generator) * spread, torch.randn(256, 16, generator=generator)
    real = capture_step(seed)
    act, weights = real["forward"]
    grads = real["input_grad"][0]
    yield "activations (fwd, a=act)", act[:rows], weights
    yield "weights (fwd, a=W^T)", weights.T.contiguous(), act[:rows].T.contiguous()
    yield "gradients (dA, a=G)", grads[:rows], weights.T.contiguous()
    yield "weight grad (dW, a=act^T)", *real["weight_grad"]
    patches, filters = real["conv_forward"]
    yield "conv fwd (a=image patches)", patches[: rows * 4], filters


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64, help="rows of the left operand per case")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.rows < 1:
        parser.error(f"--rows must be positive, got {args.rows}")
    start = time.time()
    params = DESIGNS["fpraker"].params(rows=4, cols=4)  # the registry's PE in a 4 x 4 tile, as the mapper's
    reports = [(name, matmul_report(x, w, params)) for name, x, w in tqdm(list(cases(args.rows, args.seed)),
                                                                         desc="cases")]
    header = f"{'case':28}" + "".join(f"{title:>18}" for title, _, _ in COLUMNS)
    print(header)
    for name, report in reports:
        print(f"{name:28}" + "".join(f"{fmt.format(report[key]):>18}" for _, key, fmt in COLUMNS))
    print("errors: |y - y_fp64| / sum|x_i w_i| per dot product; tile 4x4 PEs, 8 lanes, G = 3; dense baseline 1 cycle/step")
    print(f"({time.time() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
