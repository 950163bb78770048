"""Throughput of the FPRaker golden tile (``dashraker.models.fpraker.tile``) and its fused kernel on random bf16 data.

Usage: python bench/fpraker_speed.py [--threads 2] [--repeats 3]
Prints lane values (a, b pairs, i.e. lane MACs) processed per wall-clock second and per
CPU second (process time: on a machine shared with other jobs, the figure that does
not depend on their load) for a few tile shapes, by the golden tile (torch, ``--threads``
threads) and by the kernel (``dashraker.models.kernels.fpraker``, one thread) on the same
inputs, and checks that both give the same results; and by the cost-only kernel the mapper runs
(``tile_cycles``, on the same patterns as float32 values), whose cycles and terms it checks likewise.
"""

import argparse
import sys
import time

import dataclasses

import numpy as np
import torch

from dashraker.designs import DESIGNS
from dashraker.models.fpraker import tile
from dashraker.models.kernels import fpraker as kernel

PARAMS = DESIGNS["fpraker"].params()  # the registry's guard bits and zero-step cost

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


def _time(model, a, b, repeats):
    """Best wall and CPU seconds of ``repeats`` runs of ``model`` on ``a``, ``b``, and its result."""
    best = best_cpu = float("inf")
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = model(a, b, PARAMS["guard_bits"], PARAMS["zero_block_cycles"])
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
    return best, best_cpu, result


def _same(x, y):
    """Equal tensors, floats compared as bit patterns (NaN equals NaN)."""
    if x.is_floating_point():
        x, y = x.view(torch.int32), y.view(torch.int32)
    return x.dtype == y.dtype and torch.equal(x, y)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.threads < 1 or args.repeats < 1:
        parser.error("--threads and --repeats must be positive")
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    first = _random_bits(generator, (1, 1, 1, 8)), _random_bits(generator, (1, 1, 1, 8))
    tile(*first, PARAMS["guard_bits"], PARAMS["zero_block_cycles"])  # build the tables
    kernel.tile(*first, PARAMS["guard_bits"], PARAMS["zero_block_cycles"])  # compile (or load) the kernel
    print(f"{'passes x R x C x steps x N':28} {'values':>10} {'model':>7} {'wall s':>8} {'values/s':>10} "
          f"{'values/CPU s':>13}")
    for passes, rows, cols, steps, lanes in SHAPES:
        a = _random_bits(generator, (passes, rows, steps, lanes))
        b = _random_bits(generator, (passes, cols, steps, lanes))
        values = passes * rows * cols * steps * lanes
        shape = f"{passes}x{rows}x{cols}x{steps}x{lanes}"
        results = []
        as_values = tuple((x.numpy().astype(np.uint32) << 16).view(np.float32) for x in (a, b))  # the mapper's operands
        for name, model, operands in (("cost", kernel.tile_cycles, as_values), ("kernel", kernel.tile, (a, b)),
                                      ("golden", tile, (a, b))):  # the kernels first: torch's idle threads spin
            best, best_cpu, result = _time(model, *operands, args.repeats)
            results.append(result)
            print(f"{shape:28} {values:10d} {name:>7} {best:8.2f} {values / best:10.3g} {values / best_cpu:13.3g}")
        cost, result, want = results
        if not all(_same(getattr(result, f.name), getattr(want, f.name)) for f in dataclasses.fields(want)):
            print(f"{shape}: the kernel's results differ from the golden tile's", file=sys.stderr)
            return 1
        if not all(_same(torch.from_numpy(values), getattr(want, name)) for name, values in cost.items()):
            print(f"{shape}: the cost-only kernel's cycles or terms differ from the golden tile's", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
