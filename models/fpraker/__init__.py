"""FPRaker models: the bit-exact golden PE/tile (``golden``), its error analysis and the training-numerics study."""

from dashraker.models.fpraker.golden import (
    ACCUMULATOR_BITS,
    FRAME_BITS,
    MAX_TERMS,
    TileResult,
    encode_terms,
    pe,
    tile,
)

__all__ = ["ACCUMULATOR_BITS", "FRAME_BITS", "MAX_TERMS", "TileResult", "encode_terms", "pe", "tile"]
