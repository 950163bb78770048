"""The fixed-point accumulator, bit for bit and cycle for cycle against the golden ``fixed_point_accumulate``, under
idle cycles, over fp32's whole range (the tiles run it on both simulators)."""

import math
import random
import struct

import pytest
import torch
from amaranth.sim import Simulator

from dashraker.hw.numerics import FixedPointAccumulator
from dashraker.models.baseline import fixed_point_accumulate

from pass_bench import run_passes

CANONICAL_NAN = 0x7FC00000
EDGES = [0.0, -0.0, 2.0**-126, -2.0**-126, 2.0**-125, 3 * 2.0**-127, 2.0**62, -2.0**62, 2.0**63, -2.0**63, 2.0**127,
         3.4e38, -3.4e38, math.inf, -math.inf, math.nan, 1.0, 2.0**-24, 2.0**-25, 3 * 2.0**-25, (2**24 - 1) * 2.0**-149]


def fp32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def bits(value):
    return struct.unpack("<I", struct.pack("<f", value))[0]


def passes(seed, count=150):
    """Passes of 1 to 12 tree sums: normal, spread over fp32's range, edge values, ties at fp32's LSB."""
    rng = random.Random(seed)
    draws = [lambda: rng.gauss(0, 1), lambda: rng.gauss(0, 1) * 2.0 ** rng.randint(-130, 127),
             lambda: rng.choice(EDGES)]
    return [[fp32(rng.choice(draws)()) for _ in range(rng.randint(1, 12))] for _ in range(count)]


@pytest.mark.parametrize("contexts", [1, 2])
def test_unit_matches_the_model(contexts):
    """With two contexts, two pass streams on alternate cycles, each pass's result as alone."""
    seed = contexts - 1
    stimulus = passes(seed, count=40)
    # the edge cases whole: all zeros, every special alone and mixed, sums past fp32's largest and below its smallest
    stimulus += [[0.0] * 5, [-0.0], [math.inf, 1.0], [-math.inf, -math.inf], [math.inf, -math.inf], [math.nan, 1.0],
                 [3.4e38, 3.4e38], [-3.4e38, -3.4e38], [3.4e38, 3.4e38, -3.4e38], [2.0**70, math.inf],
                 [2.0**-125, -1.5 * 2.0**-126], [-(2.0**-125), 1.5 * 2.0**-126], [1.0, 2.0**-24],
                 [1.0 + 2.0**-23, 2.0**-24]]
    expected = [bits(value) if not math.isnan(value) else CANONICAL_NAN
                for value in (fixed_point_accumulate(torch.tensor([sums]))[0].item() for sums in stimulus)]
    dut = FixedPointAccumulator(contexts=contexts)
    rng = random.Random(seed)
    results, latencies = run_passes(dut, stimulus, lambda ctx, value: ctx.set(dut.sum.as_value(), bits(value)),
                                    lambda: rng.choice(EDGES), rng, contexts=contexts)
    assert results == expected
    assert latencies == [dut.latency] * len(stimulus)


def test_latency_is_the_stages_registers():
    """One pass of one sum: the cycles its valid takes through each stage method are that stage's constant, and
    they add up to the latency (counted from the registers, not summed by hand)."""
    from dashraker.hw.numerics import fixed_accumulator as fixed
    from dashraker.hw.numerics.integer_rounder import INTEGER_ROUNDER_LATENCY

    stages = {"align": fixed.ALIGN_STAGES, "loop": fixed.LOOP_STAGES, "resolve": fixed.RESOLVE_STAGES,
              "magnitude": fixed.MAGNITUDE_STAGES, "rounder": INTEGER_ROUNDER_LATENCY, "result": fixed.RESULT_STAGES}
    dut = FixedPointAccumulator()
    sim = Simulator(dut)  # elaborates the stages
    assert list(dut.stage_valids) == list(stages)
    seen = {}

    async def bench(ctx):
        ctx.set(dut.valid, 1)
        ctx.set(dut.last, 1)
        ctx.set(dut.sum.as_value(), bits(1.5))
        for cycle in range(2 * dut.latency):
            for name, valid in dut.stage_valids.items():
                if ctx.get(valid) and name not in seen:
                    seen[name] = cycle
            await ctx.tick()
            ctx.set(dut.valid, 0)

    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    arrivals = [seen[name] for name in stages]
    assert [b - a for a, b in zip([0, *arrivals], arrivals)] == list(stages.values())
    assert arrivals[-1] == dut.latency == fixed.FIXED_ACCUMULATOR_LATENCY
