"""TensorDash: a sparse-operand MAC array whose row schedulers skip zeros of the scheduled operand (SPEC section 3)."""

import numpy as np

from dashraker.designs.baseline import ACCUMULATORS
from dashraker.designs.descriptor import Cost, Design, Parameter, tile_parameters
from dashraker.hw.tensordash import Tile
from dashraker.hw.tensordash.scheduler import check_parameters
from dashraker.models.interconnect import parse_pattern

__all__ = ["TENSORDASH"]

MAX_VALUES = 1 << 23  # scheduled values per reference-scheduler call


def _constraint(params):
    """The generator's own check: the pattern fits the lookahead, its lane offsets stay distinct modulo N."""
    check_parameters(params["lanes"], params["lookahead"], params["pattern"])


def _build(params):
    return Tile(rows=params["rows"], cols=params["cols"], lanes=params["lanes"], lookahead=params["lookahead"],
                pattern=params["pattern"], fmt=params["fmt"], accumulators=params["accumulators"])


def _golden(params, scheduled_bits, partner_bits):
    from dashraker.models import tensordash
    from dashraker.models.numerics import fp32_bits, operand_values

    a, b = (operand_values(np.asarray(bits), params["fmt"]) for bits in (scheduled_bits, partner_bits))
    schedule = tensordash.schedule(a.numpy(), parse_pattern(params["pattern"]), params["lookahead"])
    outputs = tensordash.tile_outputs(schedule, a, b, params["fmt"], params["accumulators"])
    return fp32_bits(outputs).numpy().astype(np.uint32), schedule.cycles


def _evaluate(params, scheduled, partner, device="cpu"):
    """Per row set: the reference scheduler's cycles and the non-zero scheduled values (each multiplied once
    per partner operand); zero as the scheduler defines it (exponent field 0). On every device from the fused
    CPU kernel: the row sets are NumPy arrays, and the kernel maps a ResNet-18 step in about a second, where the
    reference's packed scheduler on a GPU, a few kernel launches per step, took 48 s on an H100."""
    from dashraker.models.kernels.tensordash import cycles_and_nonzero

    cycles, nonzero = cycles_and_nonzero(scheduled, parse_pattern(params["pattern"]), params["lookahead"])
    return {"cycles": cycles, "mul": nonzero}


def _pass_counts(params, arrays, value_bits):
    """Every PE lane adds each cycle; each row's scheduler and operand muxes and each PE's partner muxes switch."""
    lanes = params["lanes"]
    lane_cycles = int((arrays["cycles"] * arrays["rows"] * arrays["cols"]).sum()) * lanes
    row_lane_cycles = int((arrays["cycles"] * arrays["rows"]).sum()) * lanes
    return {"add_fp32": lane_cycles, "mux_bits": (row_lane_cycles + lane_cycles) * value_bits,
            "scheduler_lanes": row_lane_cycles}


TENSORDASH = Design(
    name="tensordash",
    summary="sparse-operand MAC array: operand muxes and a row scheduler skip zeros of the scheduled operand",
    parameters=(
        *tile_parameters(("bf16", "fp32")),
        Parameter("lanes", 16, "MAC lanes N per PE", minimum=1),
        Parameter("lookahead", 2, "lookahead H: a staging window of H+1 steps", minimum=0),
        Parameter("pattern", "T<2,5>", "interconnect offsets: 'T<2,5>', 'T<h,0>' or '(0,0),(1,0),(1,-1),...'",
                  kind=str, validate=parse_pattern),
        ACCUMULATORS,
    ),
    packages=("dashraker.hw.tensordash", "dashraker.models.tensordash"),
    build=_build,
    golden=_golden,
    constraint=_constraint,
    cost=Cost(operands="scheduled", evaluate=_evaluate, pass_counts=_pass_counts, max_values=MAX_VALUES),
    area_parts={"pe": r"pe\d+_\d+", "mac": r"pe\d+_\d+\.mac", "multipliers": r"pe\d+_\d+\.mac\.mul\d+",
                "adder_tree": r"pe\d+_\d+\.mac\.tree", "accumulator": r"pe\d+_\d+\.mac\.accumulate",
                "partner_muxes": r"pe\d+_\d+\.partner_mux", "window": r"window", "scheduler": r"window\.scheduler\d+",
                "store": r"window\.store", "row_muxes": r"window\.row_mux\d+"},
)
