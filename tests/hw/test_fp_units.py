"""The FP adder and multipliers, bit-exact against PyTorch on both simulators."""

from pathlib import Path

import pytest

from dashraker.hw.numerics import FPAdder, FPMultiplier
from dashraker.sim.runner import run_cocotb

COCOTB_MODULE = Path(__file__).with_name("cocotb_fp_unit.py")

UNITS = {
    "fp32_add": (FPAdder, {"op": "add", "format": "fp32", "output": "sum"}),
    "bf16_mul": (lambda: FPMultiplier("bf16"), {"op": "mul", "format": "bf16", "output": "product"}),
    "fp32_mul": (lambda: FPMultiplier("fp32"), {"op": "mul", "format": "fp32", "output": "product"}),
}


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_fp_unit(unit, simulator, build_cache):
    build, config = UNITS[unit]
    count = 100_000 if unit == "fp32_add" else 30_000
    run_cocotb(build, toplevel=unit, test_module=COCOTB_MODULE, build_dir=build_cache / unit,
               simulator=simulator, config={**config, "seed": 2026, "count": count})
