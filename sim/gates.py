"""Gate-level co-simulation: a tile's mapped netlist run on the same passes as its RTL, checked bit for bit, and
charged from the library by its switching (``asic.power``)."""

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dashraker.asic.netlist import Netlist, net_name
from dashraker.asic.power import charge
from dashraker.asic.synthesis import flat, top_name
from dashraker.mapping.activity import macs, stream_cycles, table_counts
from dashraker.sim.cosim import Cosim

__all__ = ["GateNetlist", "GateRun", "run_gate_level", "gate_energy", "build"]


class GateNetlist:
    """The flattened netlist of a synthesis folder (``asic.synthesis.measure``) as ``Cosim`` builds it: ``key``
    names the build after the netlist's own contents, ``write`` writes its simulation Verilog."""

    def __init__(self, folder, top, library, liberty, progress=True):
        path = flat(folder, top, library, progress)
        self.netlist = Netlist(path, top, liberty)
        self.key = hashlib.sha256(path.read_bytes()).hexdigest()[:12]

    def write(self, path):
        Path(path).write_text(self.netlist.simulation_verilog())
        return path


@dataclass
class GateRun:
    """What a batch of passes did on the netlist: ``passes``, ``pass_cycles`` (the passes' own cycles, as the
    RTL counts them), ``stream_cycles`` (those of their streams, as the mapper clocks a tile), ``sim_cycles``, dense
    ``macs`` and ``useful_macs`` (both operands non-zero), ``mismatches`` (passes whose outputs or cycles differ from
    the RTL's), ``toggles`` {net bit: count}, ``counts``: the mapper's action counts of the same passes
    (``mapping.activity.table_counts``)."""

    passes: int = 0
    pass_cycles: int = 0
    stream_cycles: int = 0
    sim_cycles: int = 0
    macs: int = 0
    useful_macs: int = 0
    output_mismatches: int = 0
    cycle_mismatches: int = 0
    toggles: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)


def run_gate_level(gates, rtl, groups, progress=None):
    """Run ``groups`` ((scheduled, partner, rows_used, cols_used) of equal steps each) on the gate-level model
    ``gates`` (a ``Cosim`` of a ``GateNetlist`` with toggles) and on the RTL model ``rtl`` (a ``Cosim``), counting
    the netlist's toggles from zero; returns a ``GateRun``."""
    result = GateRun()
    gates.zero_toggles()
    for scheduled, partner, rows_used, cols_used in groups:
        got, want = gates.run(scheduled, partner), rtl.run(scheduled, partner)
        result.passes += len(scheduled)
        result.pass_cycles += int(np.asarray(got.cycles).sum())
        result.stream_cycles += stream_cycles(gates.design, gates.params, got.cycles)
        result.sim_cycles += got.sim_cycles
        counts, _ = table_counts(gates.design, gates.params, scheduled, partner, rows_used, cols_used)
        for name, value in counts.items():
            result.counts[name] = result.counts.get(name, 0) + value
        dense, useful = macs(scheduled, partner, rows_used, cols_used)
        result.macs += dense
        result.useful_macs += useful
        result.output_mismatches += int((got.outputs != want.outputs).reshape(len(scheduled), -1).any(axis=1).sum())
        result.cycle_mismatches += int((np.asarray(got.cycles) != np.asarray(want.cycles)).sum())
        if progress is not None:
            progress.update(len(scheduled))
    names = {net_name(bit): bit for bit in gates.netlist.netlist.drivers} | {
        net_name(bit): bit for bit in gates.netlist.netlist.fanout}
    result.toggles = {names[name]: count for name, count in gates.net_toggles().items() if name in names}
    return result


def gate_energy(gates, run, period_ns, library, area_parts):
    """``asic.power.Energy`` of ``run`` (a ``GateRun`` of ``gates``) at ``period_ns``: clock and leakage over the
    passes' stream cycles, as the activity model charges them (a stream's fill and drain overlap other passes)."""
    return charge(gates.netlist.netlist, run.toggles, run.stream_cycles, period_ns, library, area_parts)


def build(design, params, folder, library, liberty, build_root, optimize="-O0", progress=True):
    """The gate-level model (``Cosim`` with toggle counters) of the netlist in the synthesis ``folder``."""
    return Cosim(design, params, build_root=build_root, optimize=optimize, toggles=True,
                 netlist=GateNetlist(folder, top_name(design), library, liberty, progress))
