"""Silicon from a real standard-cell library: technology mapping onto a Liberty library, static timing and power
from the gate-level switching of simulated passes (SPEC section 7c)."""
