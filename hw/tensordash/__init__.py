"""TensorDash generators: row scheduler, PE with sparse interconnect muxes, R x C tile (SPEC section 3)."""

from dashraker.hw.tensordash.pe import PE, pe_latency, window_layout
from dashraker.hw.tensordash.scheduler import Scheduler, select_layout
from dashraker.hw.tensordash.tile import CYCLE_BITS, Tile, chunk_layout, tile_result_layout

__all__ = ["Scheduler", "select_layout", "PE", "pe_latency", "window_layout", "Tile", "chunk_layout", "tile_result_layout",
           "CYCLE_BITS"]
