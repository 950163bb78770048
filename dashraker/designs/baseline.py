"""The dense baseline: R x C PEs of N bit-parallel MAC lanes (SPEC section 2)."""

import numpy as np

from dashraker.designs.descriptor import Cost, Design, Parameter, tile_parameters
from dashraker.hw.baseline import Tile

__all__ = ["BASELINE", "ACCUMULATORS"]

# The MAC datapath's accumulation order (SPEC section 2), shared with TensorDash's PEs: by default (0) the 128-bit
# fixed-point accumulator rounded once per pass, the smallest and closest to fp64 (docs/numerics.md, "Accumulation
# order"); L >= 1 interleaved fp32 partials, L = 6 the fewest whose loop takes the 5-stage adder, 1 the one-cycle loop.
ACCUMULATORS = Parameter("accumulators", 0, "interleaved partial fp32 accumulators L per PE (0: one 128-bit "
                         "fixed-point accumulator; 1: the one-cycle fp32 loop)", minimum=0, maximum=16)


def _build(params):
    return Tile(rows=params["rows"], cols=params["cols"], lanes=params["lanes"], fmt=params["fmt"],
                accumulators=params["accumulators"])


def _golden(params, scheduled_bits, partner_bits):
    import torch

    from dashraker.models.baseline import dense_tile
    from dashraker.models.numerics import fp32_bits, operand_values

    a, b = (operand_values(np.asarray(bits), params["fmt"]) for bits in (scheduled_bits, partner_bits))
    outputs = torch.stack([dense_tile(a[p], b[p], params["fmt"], params["accumulators"]) for p in range(a.shape[0])])
    return fp32_bits(outputs).numpy().astype(np.uint32), None


def _pass_counts(params, arrays, value_bits):
    """Every lane of every PE multiplies and adds in every cycle."""
    lane_cycles = int((arrays["cycles"] * arrays["rows"] * arrays["cols"]).sum()) * params["lanes"]
    return {"mul": lane_cycles, "add_fp32": lane_cycles}


BASELINE = Design(
    name="baseline",
    summary="the dense tile: N bit-parallel MAC lanes per PE, one step per cycle",
    parameters=(*tile_parameters(("bf16", "fp32")), Parameter("lanes", 16, "MAC lanes N per PE", minimum=1),
                ACCUMULATORS),
    packages=("dashraker.hw.baseline", "dashraker.models.baseline"),
    build=_build,
    golden=_golden,
    cost=Cost(operands="none", pass_counts=_pass_counts),
    area_parts={"pe": r"pe\d+_\d+", "multipliers": r"pe\d+_\d+\.mul\d+", "adder_tree": r"pe\d+_\d+\.tree",
                "accumulator": r"pe\d+_\d+\.accumulate"},
    reference=True,
)
