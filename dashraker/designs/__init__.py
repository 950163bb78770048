"""The design registry: one descriptor per design, the only list of designs (SPEC section 1).

A new design is added by writing its packages (``hw/``, ``models/``) and one
descriptor module here, and naming it in ``DESIGNS``.
"""

from dashraker.designs.baseline import BASELINE
from dashraker.designs.descriptor import Cost, Design, Operands, Parameter
from dashraker.designs.fpraker import FPRAKER
from dashraker.designs.tensordash import TENSORDASH

__all__ = ["DESIGNS", "BASELINE", "TENSORDASH", "FPRAKER", "Cost", "Design", "Operands", "Parameter", "design", "reference"]

DESIGNS = {d.name: d for d in (BASELINE, TENSORDASH, FPRAKER)}


def design(name):
    """The descriptor named ``name``; ``ValueError`` listing the designs otherwise."""
    try:
        return DESIGNS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown design {name!r}; choose from {', '.join(DESIGNS)}") from None


def reference():
    """The dense design every other one is compared against."""
    return next(d for d in DESIGNS.values() if d.reference)
