"""Toggle counts per instance from Verilator's toggle coverage (SPEC section 7, amended 2026-11-27).

A model built with ``VERILATOR_ARGS`` (Debian's Verilator 5.006, as every pyverilator
build, SPEC section 8) counts, for every bit of every net the Verilog declares, how
many times its value changed: a toggle is one change, 0 to 1 or 1 to 0, so an n-bit
counter's bit i (bit 0 the least significant) toggles 2^(n-i) times over 2^n cycles.
Verilator adds one counter per bit and an update after every ``eval``; the counts are
read through its coverage API (``VerilatedCovContext::zero`` and ``write``, the C
functions ``EXTENSION`` appends to pyverilator's wrapper) as a coverage ``.dat`` file.

Verilator sums the points of every instance of one module into one count; Amaranth
writes every instance as a module of its own, named by its instance path
(``baseline_tile.pe0_0.mul0``), so the counts are per instance. The clock and reset
nets are left out (clocking is charged per flip-flop instead).

Verilator's coverage context is one per process, shared by every model loaded in it (their
points are told apart by module name): count one model at a time, zeroing before its run and
reading after.

The simulation loop evaluates the model twice per cycle (new inputs, then the clock
edge): a net that combines a register with the tile's input payload may change twice in
a cycle where hardware switches once. Those nets are the input stage's alone.
"""

import ctypes
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["VERILATOR_ARGS", "EXTENSION", "VERSION", "EXCLUDED", "Toggles", "read_dat", "per_instance",
           "read_counts"]

VERSION = 1  # bump when the instrumentation or the extension changes, to rebuild cached models
# Every bit of every net, however wide (Verilator's default skips vectors wider than 256 bits: the payloads).
VERILATOR_ARGS = ("--coverage-toggle", "--coverage-max-width", str(1 << 20))
EXCLUDED = ("clk", "rst")  # charged as clocking, or never toggling during a run

EXTENSION = """
// dashraker toggle counting (Verilator toggle coverage, read through its coverage API)
#include "verilated_cov.h"
extern "C" {
void cosim_toggles_zero() { Verilated::threadContextp()->coveragep()->zero(); }
void cosim_toggles_write(const char* path) { Verilated::threadContextp()->coveragep()->write(path); }
}
"""

_POINT = re.compile(r"^C '(.*)' (\d+)$")


@dataclass
class Toggles:
    """Toggles of one instance's own nets: ``toggles`` bit changes in all over ``bits`` net bits."""

    toggles: int = 0
    bits: int = 0


def read_dat(path):
    """The toggle points of a coverage ``.dat`` file: a list of (module, net bit, count)."""
    points = []
    for line in Path(path).read_text().splitlines():
        match = _POINT.match(line)
        if not match:
            continue
        keys = dict(item.split("\x02", 1) for item in match[1].split("\x01") if "\x02" in item)
        page = keys.get("page", "")
        if page.startswith("v_toggle/"):
            points.append((page.removeprefix("v_toggle/"), keys.get("o", ""), int(match[2])))
    return points


def _net(bit_name):
    """A net's name without its bit index (``q[3]`` -> ``q``)."""
    return re.sub(r"\s*\[\d+\]$", "", bit_name).strip()


def per_instance(points, top):
    """``{instance path below ``top`` (its own nets under ""): Toggles}`` of ``read_dat``'s points, clock and
    reset left out."""
    counts = {}
    for module, bit, count in points:
        if _net(bit).lstrip("\\") in EXCLUDED or not (module == top or module.startswith(top + ".")):
            continue
        name = "" if module == top else module.removeprefix(top + ".")
        entry = counts.setdefault(name, Toggles())
        entry.toggles += count
        entry.bits += 1
    return counts


def read_counts(lib, top):
    """The toggles counted by a loaded model ``lib`` (pyverilator's library with ``EXTENSION``) per instance."""
    with tempfile.TemporaryDirectory(prefix="dashraker-toggles-") as folder:
        path = os.path.join(folder, "coverage.dat")
        lib.cosim_toggles_write(ctypes.c_char_p(path.encode()))
        return per_instance(read_dat(path), top)
