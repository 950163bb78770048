"""FPRaker: term-serial floating-point PEs that skip zero and out-of-bounds terms (SPEC section 4)."""

import numpy as np

from dashraker.designs.descriptor import Claim, Cost, Design, Operands, Parameter, tile_parameters
from dashraker.hw.fpraker import Tile
from dashraker.hw.fpraker.bounds import MAX_GUARD_BITS
from dashraker.hw.fpraker.tile import tile_fill

__all__ = ["FPRAKER"]

MAX_VALUES = 1 << 22  # values per cost-model call: 16 MiB of float32 per side (2**17 to 2**22 map alike)


def _build(params):
    return Tile(rows=params["rows"], cols=params["cols"], lanes=params["lanes"], guard_bits=params["guard_bits"],
                zero_block_cycles=params["zero_block_cycles"])


def _fill(params):
    return tile_fill(params["lanes"])


def _golden(params, scheduled_bits, partner_bits):
    from dashraker.models import fpraker
    from dashraker.models.numerics import fp32_bits

    result = fpraker.tile(scheduled_bits, partner_bits, params["guard_bits"], params["zero_block_cycles"])
    return fp32_bits(result.outputs).numpy().astype(np.uint32), result.cycles.numpy()


def _evaluate(params, scheduled, partner, device="cpu"):
    """Per pass: the tile's cycles and in-bound terms (the golden model's, from its fused kernels: Numba's cost-only
    one on the CPU, the Triton one on a GPU), the non-zero (term-encoded) scheduled values, and for the cycle
    breakdown the out-of-bounds terms skipped and the cycles of each PE alone, summed over steps and PEs."""
    if device == "cpu":
        return _evaluate_sets(params, scheduled, None, partner, None)
    import torch

    from dashraker.models.kernels import fpraker_cuda

    result = fpraker_cuda.tile_values(scheduled, partner, params["guard_bits"], params["zero_block_cycles"])
    # one transfer back, so one wait on the GPU per call
    cycles, terms, encodes, skipped, pe_cycles = torch.stack((result.cycles, result.terms,
                                                              scheduled.count_nonzero((1, 2, 3)), result.skipped_terms,
                                                              result.pe_cycles)).cpu()
    return {"cycles": cycles.numpy(), "terms": terms.numpy(), "term_encodes": encodes.numpy(),
            "skipped_terms": skipped.numpy(), "pe_cycles": pe_cycles.numpy()}


def _evaluate_sets(params, scheduled_sets, row_pick, partner_sets, col_pick):
    """``_evaluate`` on the CPU of the passes ``scheduled_sets[row_pick]`` against ``partner_sets[col_pick]`` (None:
    each pass its own set), each set decoded and counted once."""
    from dashraker.models.kernels import fpraker

    cost = fpraker.tile_cycles(scheduled_sets, partner_sets, params["guard_bits"], params["zero_block_cycles"],
                               row_pick, col_pick)
    encodes = fpraker.nonzero_values(scheduled_sets)
    return {"cycles": cost["cycles"], "terms": cost["terms"],
            "term_encodes": encodes if row_pick is None else encodes[row_pick],
            "skipped_terms": cost["skipped_terms"], "pe_cycles": cost["pe_cycles"]}


def _pass_counts(params, arrays, value_bits):
    """Every lane adds into the integer tree each cycle; each step aligns every lane to the running maximum exponent
    and adds its sum into the accumulator once (moving its frame; there is no renormalisation)."""
    lanes = params["lanes"]
    steps = int((arrays["steps"] * arrays["rows"] * arrays["cols"]).sum())
    lane_cycles = int((arrays["cycles"] * arrays["rows"] * arrays["cols"]).sum()) * lanes
    return {"add_int32": lane_cycles, "exponent_lanes": steps * lanes, "step_ends": steps}


FPRAKER = Design(
    name="fpraker",
    summary="term-serial floating-point PEs: a's significand as signed power-of-two terms, b bit-parallel",
    parameters=(
        *tile_parameters(("bf16",)),
        Parameter("lanes", 8, "lanes N per PE", minimum=1),
        Parameter("guard_bits", 3, "guard bits G of the accumulator's frame", minimum=0, maximum=MAX_GUARD_BITS),
        # 0 is not offered: the RTL takes a clock for every step, and an all-zero pass costing 0 cycles would deliver
        # its results in the clock of the previous pass's (issue 38)
        Parameter("zero_block_cycles", 1, "cycles an all-zero step costs (the RTL takes one for every step)",
                  choices=(1,)),
    ),
    packages=("dashraker.hw.fpraker", "dashraker.models.fpraker"),
    build=_build,
    golden=_golden,
    cost=Cost(operands=Operands.BOTH, evaluate=_evaluate, evaluate_sets=_evaluate_sets, pass_counts=_pass_counts,
              max_values=MAX_VALUES,
              components={"term_encodes": "term_encode", "terms": "term_shift", "exponent_lanes": "exponent_lane",
                          "step_ends": "step_accumulate"}),
    fill=_fill,
    published=(  # FPRaker: Awad et al., MICRO 2021 (arXiv 2010.08065)
        Claim("faster than FP MAC units at iso-compute area", "> 1x", "MICRO 2021, abstract", 1.0, "iso", "speedup",
              strict=True),
        Claim("more energy-efficient at iso-compute area", "> 1x", "MICRO 2021, abstract", 1.0, "iso",
              "energy_efficiency", strict=True),
    ),
    area_parts={"pe": r"pe\d+_\d+", "lanes": r"pe\d+_\d+\.lane\d+", "front_end": r"front_end",
                "exponent_unit": r"front_end\.exponent_unit\d+_\d+", "bounds": r"front_end\.bounds\d+_\d+",
                "decoder": r"front_end\.decoder\d+_\d+", "encoder": r"front_end\.decoder\d+_\d+\.encoder\d+",
                "output": r"output", "rounder": r"output\.rounder\d+_\d+", "sequencer": r"sequencer\d+_\d+"},
    energy_parts={"lanes": "terms", "encoder": "term_encodes", "exponent_unit": "exponent_lanes",
                  "rounder": "step_ends"},
)
