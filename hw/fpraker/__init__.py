"""FPRaker term-serial floating-point PE and tile (SPEC section 4)."""

from dashraker.hw.fpraker.encoder import TermEncoder
from dashraker.hw.fpraker.pe import PE, ExponentUnit
from dashraker.hw.fpraker.rounder import Rounder
from dashraker.hw.fpraker.tile import Tile, output_layout

__all__ = ["TermEncoder", "ExponentUnit", "PE", "Rounder", "Tile", "output_layout"]
