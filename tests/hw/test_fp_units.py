"""The FP adder and multipliers, combinational and pipelined as the MAC uses them, bit-exact against PyTorch on both
simulators."""

from pathlib import Path

import pytest

from dashraker.designs import DESIGNS
from dashraker.hw.numerics import FPAdder, FPMultiplier, mac_stages
from dashraker.sim.runner import configuration_cases, run_cocotb

COCOTB_MODULE = Path(__file__).with_name("cocotb_fp_unit.py")

ADD = {"op": "add", "format": "fp32", "output": "sum"}
UNITS = {
    "fp32_add": (FPAdder, ADD),
    "bf16_mul": (lambda: FPMultiplier("bf16"), {"op": "mul", "format": "bf16", "output": "product"}),
    "fp32_mul": (lambda: FPMultiplier("fp32"), {"op": "mul", "format": "fp32", "output": "product"}),
}
# The pipelined units of MacUnit with the designs' default L (mac_stages), fed with idle cycles:
# name -> (build, config, stages).
ACCUMULATORS = DESIGNS["baseline"].parameter("accumulators").default
_, ADDER, _ = mac_stages("bf16", ACCUMULATORS)
PIPELINED = {
    f"fp32_add_{ADDER}": (lambda: FPAdder(ADDER), ADD, ADDER),
    **{f"{fmt}_mul_{stages}": (lambda fmt=fmt, stages=stages: FPMultiplier(fmt, stages), UNITS[f"{fmt}_mul"][1], stages)
       for fmt in ("bf16", "fp32") for stages in [mac_stages(fmt, ACCUMULATORS)[0]]},
}


# The quick suite runs every unit on Icarus, whose build is quick; the Verilator cases are slow ones (its build of
# each unit takes most of their 15-40 s): the combinational adder's vectors are the Icarus case's, on the same RTL,
# and the quick tiles' Verilator cases run the pipelined adder (the same logic cut into stages) and multipliers in
# their MAC units (the TensorDash tile's adder tree: 5-stage fp32 adders).
QUICK = {(unit, "icarus") for unit in (*UNITS, *PIPELINED)}


@pytest.mark.parametrize("unit, sim_name", configuration_cases(sorted(UNITS), QUICK))
def test_fp_unit(unit, sim_name, build_cache):
    build, config = UNITS[unit]
    count = 100_000 if unit == "fp32_add" else 30_000
    run_cocotb(build, toplevel=unit, test_module=COCOTB_MODULE, build_dir=build_cache / unit,
               simulator=sim_name, config={**config, "seed": 2026, "count": count})


@pytest.mark.parametrize("unit, sim_name", configuration_cases(sorted(PIPELINED), QUICK))
def test_pipelined_fp_unit(unit, sim_name, build_cache):
    build, config, stages = PIPELINED[unit]
    run_cocotb(build, toplevel=unit, test_module=COCOTB_MODULE, build_dir=build_cache / unit, simulator=sim_name,
               config={**config, "seed": 2027, "count": 5_000, "latency": stages, "idle": 0.2})
