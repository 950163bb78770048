"""Silicon from a real standard-cell library: technology mapping onto a Liberty library, static timing and power
from the gate-level switching of simulated passes (SPEC section 7c)."""

__all__ = ["TARGET_NS"]

TARGET_NS = 1.0  # the period a tile is mapped for unless told: the mapper's packaged 1 GHz
