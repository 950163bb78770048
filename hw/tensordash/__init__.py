"""TensorDash generators: row scheduler, staging window, PE with sparse interconnect muxes, R x C tile (SPEC section 3)."""

from dashraker.hw.tensordash.pe import PE, pe_latency, window_layout
from dashraker.hw.tensordash.scheduler import Scheduler, select_layout
from dashraker.hw.tensordash.tile import CYCLE_BITS, Tile, tile_result_layout
from dashraker.hw.tensordash.window import StagingWindow, chunk_layout

__all__ = ["Scheduler", "select_layout", "PE", "pe_latency", "window_layout", "StagingWindow", "chunk_layout",
           "Tile", "tile_result_layout", "CYCLE_BITS"]
