"""FPRaker models: the bit-exact golden PE/tile (``golden``), its error analysis and the training-numerics study."""

from dashraker.models.fpraker.golden import MAX_TERMS, TileResult, encode_terms, pe, tile, window_width

__all__ = ["MAX_TERMS", "TileResult", "encode_terms", "pe", "tile", "window_width"]
