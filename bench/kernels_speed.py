"""Values per CPU second of the fused kernels (``models.kernels``) against the reference models they replace.

    .venv/bin/python bench/kernels_speed.py [--passes 5000] [--steps 36]

TensorDash: cycles and non-zero counts of random passes (4 rows x 16 lanes, T<2,5>, H=2, as the
mapper's default array) at several densities, against ``models.tensordash.cycles`` over
``nonzero`` plus ``count_nonzero`` (what the mapper ran before). Quantization: normal values,
specials and ties to bf16 (both roundings) and fp32, against ``models.numerics.quantize``.
Every figure is checked equal to the reference's before it is printed. Kernels are compiled
(or loaded from their cache) before timing.
"""

import argparse
import time

import numpy as np
import torch

from dashraker.designs import DESIGNS
from dashraker.models import numerics
from dashraker.models.interconnect import parse_pattern
from dashraker.models import tensordash as td
from dashraker.models.kernels.numerics import quantize
from dashraker.models.kernels.tensordash import cycles_and_nonzero


def _cpu_s(function, *args):
    """(result, CPU seconds) of one call: the best of three."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        result = function(*args)
        best = min(best, time.process_time() - start)
    return result, best


_PARAMS = DESIGNS["tensordash"].params()  # the registry's scheduler: pattern, lookahead and order
SCHEDULE = (parse_pattern(_PARAMS["pattern"]), _PARAMS["lookahead"], _PARAMS["scheduler"])


def _reference_counts(values):
    flags = td.nonzero(values)
    return td.cycles(flags, *SCHEDULE), np.count_nonzero(flags, axis=(1, 2, 3))


def _row(name, size, kernel_s, reference_s):
    print(f"{name:<28} {size / kernel_s:>12.3e} {size / reference_s:>12.3e} {reference_s / kernel_s:>8.1f}x")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=5000)
    parser.add_argument("--steps", type=int, default=36, help="dense steps per pass (36: a 3x3 tap over 64 channels)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    torch.set_num_threads(1)  # one thread, as the mapper's workers
    cycles_and_nonzero(np.ones((1, 4, 3, 16), np.float32), *SCHEDULE)
    quantize(np.ones(3, np.float32), "bf16")
    print(f"{'values/CPU s':<28} {'kernel':>12} {'reference':>12} {'ratio':>9}")
    for density in (0.1, 0.36, 0.64, 0.9, 1.0):
        values = (rng.random((args.passes, 4, args.steps, 16)) < density).astype(np.float32)
        got, kernel_s = _cpu_s(cycles_and_nonzero, values, *SCHEDULE)
        want, reference_s = _cpu_s(_reference_counts, values)
        assert all(np.array_equal(a, b) for a, b in zip(got, want)), f"TensorDash kernel differs at density {density}"
        _row(f"tensordash density {density:.2f}", values.size, kernel_s, reference_s)
    bits = rng.integers(0, 2**32, 1 << 22).astype(np.uint32)
    bits[::4] = (bits[::4] & 0xFFFF0000) | 0x8000  # ties
    values = np.concatenate([bits.view(np.float32), rng.standard_normal(1 << 22).astype(np.float32)])
    for fmt, rounding in (("bf16", "nearest"), ("bf16", "truncate"), ("fp32", "nearest")):
        got, kernel_s = _cpu_s(quantize, values, fmt, rounding)
        want, reference_s = _cpu_s(lambda: numerics.quantize(torch.from_numpy(values), fmt, rounding).numpy())
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), f"quantize kernel differs on {fmt} {rounding}"
        _row(f"quantize {fmt} {rounding}", values.size, kernel_s, reference_s)


if __name__ == "__main__":
    main()
