"""A tile characterised on a standard-cell library: its mapped area and cell leakage, and the clock its timing allows,
cached beside the mapped netlist, for ``dashraker asic`` and the mapper's ``silicon: liberty`` (SPEC section 7c)."""

import json
from pathlib import Path

from dashraker.asic import TARGET_NS
from dashraker.asic.libraries import library as find_library
from dashraker.asic.synthesis import design_netlist, top_name
from dashraker.asic.timing import timing

__all__ = ["characterise", "timing_record", "register_files"]

TIMING_VERSION = 1  # bump when the timing run or its record changes, to time cached tiles again


def timing_record(timed):
    """``asic.timing.Timing`` as a JSON record: the worst register-to-register path and the next ones."""
    worst = timed.worst
    return {"version": TIMING_VERSION, "period_ns": timed.period_ns,
            "worst": None if worst is None else {
                "start": worst.start, "start_register": worst.start_register, "end": worst.end,
                "end_register": worst.end_register, "delay_ns": worst.delay_ns, "fmax_mhz": worst.fmax_mhz,
                "slack_ns": worst.slack_ns, "cells": len(worst.stages)},
            "paths": [{"start_register": p.start_register, "end_register": p.end_register, "delay_ns": p.delay_ns}
                      for p in timed.paths]}


def characterise(design, params, library="nangate45", target_ns=TARGET_NS, root="build/asic", progress=True,
                 max_seconds=3600):
    """``design``'s tile of ``params`` mapped onto ``library`` (a name or ``Library``) for ``target_ns``
    (``asic.synthesis.design_netlist``'s record, cached) with ``timing``: its static timing (OpenSTA, ideal clock,
    no wire load; cached as ``timing.json`` in the tile's folder). Raises ``SynthesisError``, ``TimingError``,
    ``LibraryError``."""
    lib = find_library(library) if isinstance(library, str) else library
    record = design_netlist(design, params, lib, target_ns, root, progress, max_seconds)
    folder = Path(record["folder"])
    path = folder / "timing.json"
    try:
        timed = json.loads(path.read_text())
        if timed.get("version") != TIMING_VERSION:
            raise ValueError("an older timing record")
    except (OSError, ValueError):
        timed = timing_record(timing(folder / "netlist.v", top_name(design), lib.path("liberty"), target_ns,
                                     folder / "sta", wire_load=None))
        path.write_text(json.dumps(timed, indent=1))
    return {**record, "timing": timed}


def register_files(record, silicon):
    """The mapped tile's area (``record``: ``characterise``'s) with its memories of at least the energy table's
    ``register_file_min_bits`` (``silicon``: the table's silicon figures) as register files of the table's per-bit
    area, its bit cell over its array efficiency (``fpga.area.asic_estimate``'s rule, in um2)."""
    per_bit = silicon["register_file_bit_cell_um2"] / silicon["sram_array_efficiency"]
    moved = [m for m in record["memories"] if m["bits"] >= silicon["register_file_min_bits"]]
    bits = sum(m["bits"] * m["count"] for m in moved)
    replaced = sum(m["um2"] * m["count"] for m in moved)
    leakage = sum(m["leakage_nw"] * m["count"] for m in moved)
    return {"um2": record["um2"] - replaced + bits * per_bit, "register_files": sum(m["count"] for m in moved),
            "bits": bits, "replaced_um2": replaced, "replaced_leakage_nw": leakage,
            "replaced_flip_flops": sum(m["flip_flops"] * m["count"] for m in moved), "um2_per_bit": per_bit,
            "min_bits": silicon["register_file_min_bits"]}
