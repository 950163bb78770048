"""Throughput of the FPRaker golden tile (``dashraker.models.fpraker.tile``) on random bf16 data.

Usage: python bench/fpraker_speed.py [--threads 2] [--repeats 3]
Prints lane values (a, b pairs) processed per wall-clock second and per CPU second
(process time: on a machine shared with other jobs, the figure that does not
depend on their load) for a few tile shapes.
"""

import argparse
import sys
import time

import torch

from dashraker.models.fpraker import tile

__all__ = ["main"]

SHAPES = [  # passes, rows, cols, steps, lanes
    (64, 16, 16, 36, 8),
    (8, 16, 16, 288, 8),
    (512, 4, 4, 36, 8),
    (4096, 1, 1, 72, 8),
]


def _random_bits(generator, shape):
    """Normal-ish bf16 patterns: random signs and fractions, exponents 127 +- 8, a fifth of them zero."""
    sign = torch.randint(0, 2, shape, generator=generator)
    exponent = 119 + torch.randint(0, 17, shape, generator=generator)
    bits = (sign << 15) | (exponent << 7) | torch.randint(0, 128, shape, generator=generator)
    return torch.where(torch.rand(shape, generator=generator) < 0.2, 0, bits)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.threads < 1 or args.repeats < 1:
        parser.error("--threads and --repeats must be positive")
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    tile(_random_bits(generator, (1, 1, 1, 8)), _random_bits(generator, (1, 1, 1, 8)))  # build the tables
    print(f"{'passes x R x C x steps x N':28} {'values':>10} {'wall s':>8} {'values/s':>10} {'values/CPU s':>13}")
    for passes, rows, cols, steps, lanes in SHAPES:
        a = _random_bits(generator, (passes, rows, steps, lanes))
        b = _random_bits(generator, (passes, cols, steps, lanes))
        best = best_cpu = float("inf")
        for _ in range(args.repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            tile(a, b)
            best = min(best, time.perf_counter() - start)
            best_cpu = min(best_cpu, time.process_time() - start_cpu)
        values = passes * rows * cols * steps * lanes
        shape = f"{passes}x{rows}x{cols}x{steps}x{lanes}"
        print(f"{shape:28} {values:10d} {best:8.2f} {values / best:10.3g} {values / best_cpu:13.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
