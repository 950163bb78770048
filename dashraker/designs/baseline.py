"""The dense baseline: R x C PEs of N bit-parallel MAC lanes (SPEC section 2)."""

import dataclasses

import numpy as np

from dashraker.designs.descriptor import Cost, Design, Operands, Parameter, tile_parameters
from dashraker.hw.baseline import Tile

__all__ = ["BASELINE", "BASELINES", "ACCUMULATORS", "DOT", "BASELINE_DOT", "SUM_COMPONENTS", "check_dot", "sum_counts"]

# The MAC datapath's accumulation order (SPEC section 2), shared with TensorDash's PEs: by default (0) the 384-bit
# fixed-point accumulator rounded once per pass, exact over fp32's whole range (docs/guides/fused-dot.md);
# L >= 1 interleaved fp32 partials, L = 6 the fewest whose loop takes the 5-stage adder, 1 the one-cycle loop.
ACCUMULATORS = Parameter("accumulators", 0, "interleaved partial fp32 accumulators L per PE (0: one 384-bit "
                         "fixed-point accumulator; 1: the one-cycle fp32 loop)", minimum=0, maximum=16)
# A step's sum (SPEC section 2, amended 2026-11-27), shared with TensorDash's PEs: the fp32 adder tree, or the fused
# dot product (exact products aligned in a window, an integer adder tree, into the fixed-point accumulator).
DOT = Parameter("dot", "tree", "a step's sum: 'tree' (fp32 adder tree) or 'fused' (exact products aligned to the "
                "step's largest in a window, summed as integers into the fixed-point accumulator)", kind=str,
                choices=("tree", "fused"))
# The baseline's alone (SPEC section 2, amended 2026-12-06): the conventional unit FPRaker's paper compares with, a
# fused multiply-add per lane into the lane's own fp32 accumulator; TensorDash moves products between lanes.
BASELINE_DOT = dataclasses.replace(
    DOT, choices=(*DOT.choices, "fma"),
    help=DOT.help + "; or 'fma' (each lane a bf16 x bf16 + fp32 fused multiply-add into its own fp32 accumulator, "
    "--accumulators >= 1 interleaved partials per lane, the lanes summed by the fp32 tree at the pass's end)")

# The dense baselines ``dashraker study`` judges the iso-area claims against, each in turn the reference (SPEC section
# 7b), by name -> their own parameters: the fp32 tree into the fixed-point accumulator (the default), the fused dot
# product, and the conventional unit of FPRaker's paper, a fused multiply-add per lane (the one-cycle loop).
BASELINES = {"tree": {"dot": "tree", "accumulators": 0}, "fused": {"dot": "fused", "accumulators": 0},
             "fma": {"dot": "fma", "accumulators": 1}}


def check_dot(params):
    """The fused dot product adds into the fixed-point accumulator only; a fused multiply-add lane takes bf16
    operands (an fp32 product would round) into fp32 accumulators."""
    if params["dot"] == "fused" and params["accumulators"] != 0:
        raise ValueError(f"dot 'fused' adds into the fixed-point accumulator: accumulators must be 0, not "
                         f"{params['accumulators']}")
    if params["dot"] == "fma" and params["accumulators"] == 0:
        raise ValueError("dot 'fma' accumulates each lane in fp32: accumulators must be at least 1 (1: the "
                         "sequential fused multiply-add), not 0")
    if params["dot"] == "fma" and params["fmt"] != "bf16":
        raise ValueError(f"dot 'fma' multiplies bf16 operands exactly: fmt must be bf16, not {params['fmt']}")


def _build(params):
    return Tile(rows=params["rows"], cols=params["cols"], lanes=params["lanes"], fmt=params["fmt"],
                accumulators=params["accumulators"], dot=params["dot"])


def _golden(params, scheduled_bits, partner_bits):
    import torch

    from dashraker.models.baseline import dense_tile
    from dashraker.models.numerics import fp32_bits, operand_values

    a, b = (operand_values(np.asarray(bits), params["fmt"]) for bits in (scheduled_bits, partner_bits))
    outputs = torch.stack([dense_tile(a[p], b[p], params["fmt"], params["accumulators"], params["dot"])
                           for p in range(a.shape[0])])
    return fp32_bits(outputs).numpy().astype(np.uint32), None


def _pass_counts(params, arrays, value_bits):
    """Every lane of every PE multiplies and adds in every cycle; with ``dot="fma"`` every lane also writes its
    accumulator, and a pass ends in the sums of each lane's partials and of the lanes'."""
    pe_cycles = int((arrays["cycles"] * arrays["rows"] * arrays["cols"]).sum())
    counts = {"mul": pe_cycles * params["lanes"], **sum_counts(params, pe_cycles)}
    if params.get("dot") == "fma":
        lanes, pe_passes = params["lanes"], int((arrays["rows"] * arrays["cols"]).sum())
        counts["add_fp32"] += pe_passes * (lanes * (params["accumulators"] - 1) + lanes - 1)
        counts["lane_registers"] = pe_cycles * lanes
    return counts


# The fused dot product's and the fused multiply-add lanes' own actions -> their energy-table entries; the fp32 adds
# (a tree's or an FMA's) are shared.
SUM_COMPONENTS = {"fused_lanes": "fused_lane", "frame_adds": "frame_add", "lane_registers": "register_fp32"}


def sum_counts(params, pe_cycles):
    """The step sums' actions over ``pe_cycles`` PE-cycles: an fp32 add per lane (N - 1 tree nodes and the
    accumulator, or each fused multiply-add lane's add), or the fused dot product's lanes (exponent, alignment, integer tree node) and frame adds.
    TensorDash's PEs share it (their ``dot``); the mapper costs each design's dense reference with the reference's
    own parameters (``mapping.silicon.reference_params``)."""
    if params.get("dot", DOT.default) == "fused":
        return {"fused_lanes": pe_cycles * params["lanes"], "frame_adds": pe_cycles}
    return {"add_fp32": pe_cycles * params["lanes"]}


BASELINE = Design(
    name="baseline",
    summary="the dense tile: N bit-parallel MAC lanes per PE, one step per cycle",
    parameters=(*tile_parameters(("bf16", "fp32")), Parameter("lanes", 16, "MAC lanes N per PE", minimum=1),
                ACCUMULATORS, BASELINE_DOT),
    packages=("dashraker.hw.baseline", "dashraker.models.baseline"),
    build=_build,
    golden=_golden,
    constraint=check_dot,
    cost=Cost(operands=Operands.NONE, pass_counts=_pass_counts, components=SUM_COMPONENTS),
    area_parts={"pe": r"pe\d+_\d+", "multipliers": r"pe\d+_\d+\.mul\d+", "adder_tree": r"pe\d+_\d+\.tree",
                "fused_tree": r"pe\d+_\d+\.dot", "accumulator": r"pe\d+_\d+\.accumulate\d*"},
    energy_parts={"multipliers": "mul", "adder_tree": "add_fp32", "fused_tree": "fused_lanes", "accumulator": "add_fp32"},
    reference=True,
)
