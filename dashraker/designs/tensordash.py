"""TensorDash: a sparse-operand MAC array whose row schedulers skip zeros of the scheduled operand (SPEC section 3)."""

import numpy as np

from dashraker.designs.baseline import ACCUMULATORS, DOT, SUM_COMPONENTS, check_dot, sum_counts
from dashraker.designs.descriptor import Claim, Cost, Design, Operands, Parameter, tile_parameters
from dashraker.hw.tensordash import Tile
from dashraker.hw.tensordash.scheduler import check_parameters
from dashraker.models.interconnect import parse_pattern

__all__ = ["TENSORDASH", "SCHEDULERS"]

MAX_VALUES = 1 << 23  # scheduled values per reference-scheduler call

# Row schedulers (SPEC section 3, amended 2026-11-27; models.tensordash): the greedy lane-group chain, the
# authors' reference, or the separable request/grant allocator with 1 or 2 iterations per cycle, whose loop
# depth does not grow with the lanes. Measured in docs/results/tensordash-scheduler.md.
SCHEDULERS = ("greedy", "separable1", "separable2")
SCHEDULER = Parameter(
    "scheduler", "greedy",
    "row scheduler. greedy: the authors' order, full speedup; its loop closes at 79.9 MHz alone on ECP5 (8 lanes), "
    "65.9-66.3 in the 1x1x8 tile. separable2: 0.98-0.99x greedy's whole-step speedup, no clock gained (77.5 alone). "
    "separable1: 0.89-0.97x, 103.9 MHz alone, 69.3-74.9 in the tile (dnnsim: always greedy)",
    kind=str, choices=SCHEDULERS)

# Window threads (SPEC section 3, amended 2026-12-06 and 2026-12-07; models.tensordash.interleave): 2 interleaves two
# pass streams through one window loop of two cycles per decision (C-slow), each PE an accumulator context per thread
# (hw.tensordash.Tile); the mapper models its cycles and charges its own silicon. The figures:
# docs/results/tensordash-scheduler.md (the two-thread tile's size and clock; the cycles a 2-slow window costs).
THREADS = Parameter(
    "threads", 1,
    "window threads. 2 costs, at 1x1x8 bf16 on ECP5, 25,495 LUTs and 19,729 flip-flops against 1 thread's 19,985 "
    "and 14,820 (after synthesis; mostly a second operand store), 1.13x the packaged 4x4x16 tile's area on "
    "Nangate45 and 1.0015x a ResNet-18 step's cycles. 2 buys that tile's clock: 571 MHz on Nangate45 against 1 "
    "thread's 559 (the tree baseline's 574), bound by the accumulator, not the window; on ECP5 the window loop "
    "alone closes at 111 MHz against 1 thread's 78, but the 1x1x8 tile has not routed in 24 runs (its two operand "
    "stores congest it) (dnnsim: always 1)",
    choices=(1, 2))


def _constraint(params):
    """The generator's own check: the pattern fits the lookahead, its lane offsets stay distinct modulo N; the
    fused dot product adds into the fixed-point accumulator."""
    check_parameters(params["lanes"], params["lookahead"], params["pattern"])
    check_dot(params)


def _build(params):
    return Tile(rows=params["rows"], cols=params["cols"], lanes=params["lanes"], lookahead=params["lookahead"],
                pattern=params["pattern"], fmt=params["fmt"], accumulators=params["accumulators"],
                scheduler=params["scheduler"], dot=params["dot"], threads=params["threads"])


def _golden(params, scheduled_bits, partner_bits):
    from dashraker.models import tensordash
    from dashraker.models.numerics import fp32_bits, operand_values

    a, b = (operand_values(np.asarray(bits), params["fmt"]) for bits in (scheduled_bits, partner_bits))
    schedule = tensordash.schedule(a.numpy(), parse_pattern(params["pattern"]), params["lookahead"], params["scheduler"])
    outputs = tensordash.tile_outputs(schedule, a, b, params["fmt"], params["accumulators"], params["dot"])
    return fp32_bits(outputs).numpy().astype(np.uint32), schedule.cycles


def _evaluate(params, scheduled, partner, device="cpu"):
    """Per row set: the reference scheduler's cycles and the non-zero scheduled values (each multiplied once
    per partner operand); zero as the scheduler defines it (exponent field 0). On every device from the fused
    CPU kernel: the row sets are NumPy arrays, and the kernel maps a ResNet-18 step in about a second, where the
    reference's packed scheduler on a GPU, a few kernel launches per step, took 48 s on an H100."""
    from dashraker.models.kernels.tensordash import cycles_and_nonzero

    cycles, nonzero = cycles_and_nonzero(scheduled, parse_pattern(params["pattern"]), params["lookahead"],
                                         params["scheduler"])
    return {"cycles": cycles, "mul": nonzero}


def _stream(params, cycles):
    """A tile's stream of passes through the window's threads (``models.threads.stream_cycles``)."""
    from dashraker.models.threads import stream_cycles

    return stream_cycles(cycles, params["threads"])


def _pass_ends(params, cycles):
    """The cycle each pass of a tile's stream ends on through the window's threads
    (``models.threads.pass_ends``)."""
    from dashraker.models.threads import pass_ends

    return pass_ends(cycles, params["threads"])


def _pass_counts(params, arrays, value_bits):
    """Every PE lane adds each cycle; each row's scheduler and operand muxes and each PE's partner muxes switch."""
    lanes = params["lanes"]
    pe_cycles = int((arrays["cycles"] * arrays["rows"] * arrays["cols"]).sum())
    lane_cycles = pe_cycles * lanes
    row_lane_cycles = int((arrays["cycles"] * arrays["rows"]).sum()) * lanes
    return {**sum_counts(params, pe_cycles), "mux_bits": (row_lane_cycles + lane_cycles) * value_bits,
            "scheduler_lanes": row_lane_cycles}


TENSORDASH = Design(
    name="tensordash",
    summary="sparse-operand MAC array: operand muxes and a row scheduler skip zeros of the scheduled operand",
    parameters=(
        *tile_parameters(("bf16", "fp32")),
        Parameter("lanes", 16, "MAC lanes N per PE", minimum=1),
        # at most 7: a cycle then consumes up to 8 steps; the generated window grows with H (issue 38)
        Parameter("lookahead", 2, "lookahead H: a staging window of H+1 steps", minimum=0, maximum=7),
        Parameter("pattern", "T<2,5>", "interconnect offsets: 'T<2,5>', 'T<h,0>' or '(0,0),(1,0),(1,-1),...'",
                  kind=str, validate=parse_pattern),
        ACCUMULATORS,
        SCHEDULER,
        THREADS,
        DOT,
    ),
    packages=("dashraker.hw.tensordash", "dashraker.models.tensordash"),
    build=_build,
    golden=_golden,
    constraint=_constraint,
    dataflow_params={"dnnsim": {"scheduler": "greedy", "threads": 1}},  # the authors' simulator: greedy, 1 thread
    published=(  # TensorDash: Mahmoud et al., MICRO 2020, and its extended version, arXiv 2009.00748
        Claim("speedup in training", "1.95x", "MICRO 2020 and arXiv 2009.00748, abstract", 1.95, "equal", "speedup"),
        Claim("compute energy efficiency", "1.89x", "arXiv 2009.00748, abstract", 1.89, "equal",
              "core_energy_efficiency"),
        Claim("energy efficiency with on- and off-chip memory", "1.6x", "arXiv 2009.00748, abstract", 1.6,
              "equal_chip_zvc", "energy_efficiency"),
        Claim("energy efficiency with on- and off-chip memory", "1.6x", "arXiv 2009.00748, abstract", 1.6,
              "equal_chip_zvc_designs", "energy_efficiency"),
        Claim("energy efficiency on top of a Tensorcore-based accelerator", "1.5x", "MICRO 2020, abstract", 1.5,
              "equal_chip_zvc_designs", "energy_efficiency"),
        Claim("area overhead over the accelerator", "under 5%", "MICRO 2020, abstract", 0.05, "equal_chip",
              "area_overhead", above=False),
    ),
    cost=Cost(operands=Operands.SCHEDULED, evaluate=_evaluate, pass_counts=_pass_counts, max_values=MAX_VALUES,
              stream=_stream, pass_ends=_pass_ends,
              components={**SUM_COMPONENTS, "mux_bits": "mux8_bit", "scheduler_lanes": "scheduler_lane"}),
    area_parts={"pe": r"pe\d+_\d+", "mac": r"pe\d+_\d+\.mac", "multipliers": r"pe\d+_\d+\.mac\.mul\d+",
                "adder_tree": r"pe\d+_\d+\.mac\.tree", "fused_tree": r"pe\d+_\d+\.mac\.dot",
                "accumulator": r"pe\d+_\d+\.mac\.accumulate",
                "partner_muxes": r"pe\d+_\d+\.partner_mux", "window": r"window", "scheduler": r"window\.scheduler\d+",
                "store": r"window\.store\d*", "row_muxes": r"window\.row_mux\d+"},
    energy_parts={"multipliers": "mul", "adder_tree": "add_fp32", "fused_tree": "fused_lanes", "accumulator": "add_fp32",
                  "partner_muxes": "mux_bits", "row_muxes": "mux_bits", "scheduler": "scheduler_lanes"},
)
