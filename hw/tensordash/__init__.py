"""TensorDash generators: row scheduler, staging window, PE with sparse interconnect muxes, R x C tile (SPEC section 3)."""

from dashraker.hw.tensordash.pe import PE, pe_latency, staging_layout
from dashraker.hw.tensordash.scheduler import Scheduler, select_layout
from dashraker.hw.tensordash.tile import Tile
from dashraker.hw.tensordash.window import StagingWindow, chunk_layout

__all__ = ["Scheduler", "select_layout", "PE", "pe_latency", "staging_layout", "StagingWindow", "chunk_layout",
           "Tile"]
