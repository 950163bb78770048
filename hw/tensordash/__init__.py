"""TensorDash generators: row scheduler, operand mux, operand store, staging window, PE, R x C tile (SPEC section 3)."""

from dashraker.hw.tensordash.mux import OperandMux, staging_layout
from dashraker.hw.tensordash.pe import PE
from dashraker.hw.tensordash.scheduler import Scheduler, select_layout
from dashraker.hw.tensordash.store import StepStore
from dashraker.hw.tensordash.tile import Tile
from dashraker.hw.tensordash.window import StagingWindow, chunk_layout, decision_layout

__all__ = ["Scheduler", "select_layout", "OperandMux", "staging_layout", "StepStore", "PE",
           "StagingWindow", "chunk_layout", "decision_layout", "Tile"]
