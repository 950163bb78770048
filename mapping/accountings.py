"""The accountings ``dashraker study`` judges every design under, and the axes a verdict moves along between them."""

import dataclasses

__all__ = ["Scenario", "SCENARIOS", "CREDITED", "AXES"]


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One accounting: the tiles each design gets, the area scope and the memory compression."""

    key: str
    label: str
    tiles: str  # "equal" (configured) or "iso" (iso-area under this scope)
    scope: str  # "compute" or "chip"
    compression: str  # "none" or "zvc"


SCENARIOS = (
    Scenario("equal", "configured tiles, compute scope, dense memory", "equal", "compute", "none"),
    Scenario("equal_chip", "configured tiles, chip scope, dense memory", "equal", "chip", "none"),
    Scenario("equal_chip_zvc", "configured tiles, chip scope, ZVC memory", "equal", "chip", "zvc"),
    Scenario("iso", "iso-area, compute scope, dense memory", "iso", "compute", "none"),
    Scenario("iso_chip", "iso-area, chip scope, dense memory", "iso", "chip", "none"),
    Scenario("iso_chip_zvc", "iso-area, chip scope, ZVC memory", "iso", "chip", "zvc"),
)

# TensorDash's paper compresses on its own design: the designs with ZVC against the reference dense (from the same
# runs as the configured tiles' accountings at chip scope).
CREDITED = Scenario("equal_chip_zvc_designs", "configured tiles, chip scope, ZVC for the designs, dense reference",
                    "equal", "chip", "zvc")

# The axes a verdict moves along: (axis, from scenario, to scenario); "leakage" compares with and without it.
AXES = (
    ("leakage (of the tiles' logic)", "equal", "equal"),
    ("on-chip SRAM in the silicon (chip scope)", "equal", "equal_chip"),
    ("zero-value compressed memory", "equal_chip", "equal_chip_zvc"),
    ("ZVC for the designs only, the reference dense", "equal_chip", "equal_chip_zvc_designs"),
    ("area budget: iso-area tiles (compute scope)", "equal", "iso"),
    ("SRAM in the iso-area budget (chip scope)", "iso", "iso_chip"),
    ("zero-value compressed memory at iso-area", "iso_chip", "iso_chip_zvc"),
)
