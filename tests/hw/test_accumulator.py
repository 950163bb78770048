"""The fp32 accumulator of L interleaved partials, with one context and with two (two pass streams on alternate cycles,
a two-thread TensorDash PE's), bit for bit and cycle for cycle against the golden ``accumulate``, under idle cycles."""

import math
import random

import pytest
import torch

from dashraker.hw.numerics import Accumulator
from dashraker.models.baseline import accumulate

from pass_bench import run_passes
from test_fixed_accumulator import CANONICAL_NAN, EDGES, bits, passes

QUICK = {(1, 2), (2, 2)}  # (P, contexts)


# (L, P, contexts): the one-cycle loop, and adders of even and odd depths (two contexts write a context in either
# register of its pair by P's parity), passes shorter and longer than L; the quick suite runs one of each parity with
# two contexts (the tiles run one context on both simulators).
@pytest.mark.parametrize("accumulators, stages, contexts", [
    pytest.param(accumulators, stages, contexts, marks=[] if (stages, contexts) in QUICK else [pytest.mark.slow])
    for contexts in (1, 2) for accumulators, stages in [(1, 0), (2, 1), (3, 2), (6, 5)]])
def test_partials_match_the_model(accumulators, stages, contexts):
    stimulus = passes(accumulators * 10 + contexts, count=30) + [[0.0], [math.inf, -math.inf], [-0.0, -0.0]]
    expected = [bits(value) if not math.isnan(value) else CANONICAL_NAN
                for value in (accumulate(torch.tensor([sums]), accumulators)[0].item() for sums in stimulus)]
    dut = Accumulator(accumulators, stages, contexts)
    rng = random.Random(stages)
    results, latencies = run_passes(dut, stimulus, lambda ctx, value: ctx.set(dut.sum.as_value(), bits(value)),
                                    lambda: rng.choice(EDGES), rng, contexts=contexts)
    assert results == expected
    assert latencies == [dut.latency] * len(stimulus)


@pytest.mark.parametrize("contexts", [0, 3, True])
def test_contexts_are_one_or_two(contexts):
    with pytest.raises(ValueError, match=f"Accumulator contexts must be one of \\(1, 2\\), not {contexts!r}"):
        Accumulator(2, 1, contexts)
