"""bench/fpga_units.py's fixed-point accumulator, bit for bit against bench/accumulation_error.py's model of it."""

import gc
import math
import random
import struct
import sys
from pathlib import Path

import pytest
import torch
from amaranth.sim import Simulator

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))  # the unit and the model are the benches' own
from accumulation_error import fixed_point_accumulate  # noqa: E402
from fpga_units import FixedPointAccumulator  # noqa: E402

CANONICAL_NAN = 0x7FC00000
EDGES = [0.0, -0.0, 1e-40, -1e-40, 2.0**-64, -2.0**-64, 2.0**-65, 3 * 2.0**-66, 2.0**62, -2.0**62, 2.0**63, -2.0**63,
         math.inf, -math.inf, math.nan, 1.0, 2.0**-24, 2.0**-25, 3 * 2.0**-25, (2**24 - 1) * 2.0**-88]


def fp32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def bits(value):
    return struct.unpack("<I", struct.pack("<f", value))[0]


def passes(seed, count=120):
    """Passes of 1 to 12 tree sums: normal, spread over the frame and past it, edge values, ties at the LSB of fp32."""
    rng = random.Random(seed)
    draws = [lambda: rng.gauss(0, 1), lambda: rng.gauss(0, 1) * 2.0 ** rng.randint(-90, 70), lambda: rng.choice(EDGES)]
    return [[fp32(rng.choice(draws)()) for _ in range(rng.randint(1, 12))] for _ in range(count)]


def test_fixed_point_model_rounds_once():
    # tree sums on the frame's grid whose exact sum float64 holds: one rounding to fp32 is torch's
    rng = random.Random(0)
    for _ in range(200):
        sums = [fp32(rng.choice([1, -1]) * rng.randint(1, 2**24 - 1) * 2.0 ** rng.randint(-64, 6)) for _ in range(6)]
        sums = [value for value in sums if math.ldexp(value, 64) == int(math.ldexp(value, 64))]
        exact = math.fsum(sums)
        if not sums or abs(math.ldexp(exact, 64)) >= 2**53:
            continue
        result, out_of_range = fixed_point_accumulate(torch.tensor([sums]))
        rounded = torch.tensor(exact, dtype=torch.float64).float().item()
        assert out_of_range == 0 and bits(result.item()) == bits(rounded)
    # truncation towards zero below the frame, one rounding at the end, and the range
    assert fixed_point_accumulate(torch.tensor([[2.0**-65, 2.0**-65]]))[0].item() == 0.0
    assert fixed_point_accumulate(torch.tensor([[-(2.0**-64) * 1.5]]))[0].item() == -(2.0**-64)
    assert fixed_point_accumulate(torch.tensor([[1.0, 2.0**-24, 2.0**-24]]))[0].item() == 1.0 + 2.0**-23
    result, out_of_range = fixed_point_accumulate(torch.tensor([[2.0**62, 2.0**62], [1.0, math.inf], [3.0, -3.0]]))
    assert math.isnan(result[0]) and math.isnan(result[1]) and result[2].item() == 0.0 and out_of_range == 2


@pytest.mark.parametrize("seed", [0, 1])
def test_fixed_point_unit_matches_the_model(seed):
    stimulus = passes(seed)
    expected = [fixed_point_accumulate(torch.tensor([sums]))[0].item() for sums in stimulus]
    dut = FixedPointAccumulator()
    results = []
    rng = random.Random(seed)

    async def bench(ctx):
        async def tick(ready):
            ctx.set(dut.results.ready, ready)
            if ctx.get(dut.results.valid) and ready:
                results.append(ctx.get(dut.results.payload.as_value()))
            await ctx.tick()

        for sums in stimulus:
            for index, value in enumerate(sums):
                while rng.random() < 0.2:  # idle cycles between steps
                    ctx.set(dut.steps.valid, 0)
                    await tick(rng.random() < 0.5)
                ctx.set(dut.steps.payload.sum.as_value(), bits(value))
                ctx.set(dut.steps.payload.last, index == len(sums) - 1)
                ctx.set(dut.steps.valid, 1)
                await tick(rng.random() < 0.5)
            ctx.set(dut.steps.valid, 0)
            # backpressure, then the host takes the result: it is held only until the next pass's replaces it
            for cycle in range(16):
                await tick(cycle >= 6 or rng.random() < 0.5)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(results) == len(expected)
    for got, want in zip(results, expected):
        assert got == (CANONICAL_NAN if math.isnan(want) else bits(want))


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_fixed_point_unit_refuses_a_frame_past_fp32():
    with pytest.raises(ValueError, match="width must be an integer >= 40"):
        FixedPointAccumulator(width=16)
    with pytest.raises(ValueError, match="normal fp32 power of two, not lsb=100"):
        FixedPointAccumulator(lsb=100)
    gc.collect()  # the refused objects sit in cycles with their tracebacks: gone while the filter applies
