"""Dense baseline design."""

from dashraker.hw.baseline.tile import Tile

__all__ = ["Tile"]
