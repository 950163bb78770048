"""The fused multiply-add lanes of a ``MacUnit`` (``dot="fma"``) in Amaranth's simulator, bit for bit and cycle for
cycle against the golden ``fma_lanes``, under idle cycles, with edge values (the tiles run on both simulators)."""

import math
import random

import pytest
import torch

from dashraker.hw.numerics import MacUnit
from dashraker.models.baseline import fma_lanes
from dashraker.models.numerics import bf16_bits_to_fp32, fp32_bits, to_bf16_bits

from pass_bench import run_passes

# bf16 operands: zeros, a subnormal (DAZ), specials, products beyond fp32's range and below it, ties at fp32's LSB.
EDGES = [0.0, -0.0, 1e-40, math.inf, -math.inf, math.nan, 2.0**64, -(2.0**64), 2.0**-64, 3.0, 1.0, -1.0, 2.0**-24,
         1.0078125, 3.0e38]


def _passes(seed, lanes, count):
    """Passes of 1 to 9 steps of bf16 bit patterns [steps][lanes]: normal, spread, edge values, cancellations."""
    rng = random.Random(seed)
    draws = [lambda: rng.gauss(0, 1), lambda: rng.gauss(0, 1) * 2.0 ** rng.randint(-70, 70), lambda: rng.choice(EDGES)]
    passes = []
    for index in range(count):
        steps = rng.randint(1, 9)
        a = [[rng.choice(draws)() for _ in range(lanes)] for _ in range(steps)]
        b = [[rng.choice(draws)() for _ in range(lanes)] for _ in range(steps)]
        if index % 4 == 1:  # each product cancelled by the next step's
            b = [row if step % 2 == 0 else [-x for x in b[step - 1]] for step, row in enumerate(b)]
            a = [row if step % 2 == 0 else a[step - 1] for step, row in enumerate(a)]
        passes.append(tuple(to_bf16_bits(torch.tensor(x, dtype=torch.float32)) for x in (a, b)))
    return passes


# the last: two contexts (two pass streams on alternate cycles, a two-thread TensorDash PE's), each lane's own
@pytest.mark.parametrize("lanes, accumulators, contexts", [(2, 1, 1), (3, 2, 1), (4, 6, 1),
                                                        pytest.param(3, 2, 2, marks=pytest.mark.slow)])
def test_fma_lanes_match_the_model(lanes, accumulators, contexts):
    stimulus = _passes(lanes * 10 + accumulators + contexts - 1, lanes, 40)
    expected = [fp32_bits(fma_lanes(bf16_bits_to_fp32(a)[None], bf16_bits_to_fp32(b)[None], accumulators))[0].item()
                for a, b in stimulus]
    dut = MacUnit(lanes, "bf16", accumulators, "fma", contexts=contexts)
    rng = random.Random(accumulators)

    def packed(row):
        return sum(int(value) << (16 * lane) for lane, value in enumerate(row))

    def drive(ctx, operands):
        ctx.set(dut.a.as_value(), operands[0])
        ctx.set(dut.b.as_value(), operands[1])

    steps = [[(packed(a[step]), packed(b[step])) for step in range(len(a))] for a, b in stimulus]
    results, latencies = run_passes(dut, steps, drive,
                                    lambda: (rng.getrandbits(16 * lanes), rng.getrandbits(16 * lanes)), rng,
                                    contexts=contexts)
    assert results == expected
    assert latencies == [dut.latency] * len(stimulus)
