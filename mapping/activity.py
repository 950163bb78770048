"""Energy from the generated RTL's own switching activity (SPEC section 7, amended 2026-11-27).

Per instance of the tile (``dashraker area``'s per-instance figures of the same
configuration; ``dashraker.sim.toggles`` for the toggles), over a co-simulated run:

    dynamic = toggles x (own transistors / own net bits) x E_toggle
    clock   = own flip-flops x the passes' stream cycles x E_clock

Each net bit of an instance is taken to switch an equal share of the instance's own
transistors (its cells, submodules apart). Identical instances, which ``dashraker area``
synthesises once and counts, each have the figures of their class. ``E_toggle`` and ``E_clock``
are the energy table's ``transistor_toggle`` and ``flip_flop_clock`` entries (``horowitz45``: from the
table's own 0.134 fJ per transistor per operation, the ``transistor_fj`` rule, at an
adder's activity of one toggle per net bit every other operation). A part (a design's
``area_parts``) is the sum of its instances with their submodules, as in ``dashraker area``.

The table-based figure of the same passes comes from the mapper's own cost model
(``Design.cost``) and ``mapping.engine.energy_pj``, the core's components only (the RTL has
no buffers or DRAM), with the tile's clocking as the mapper charges it: its flip-flops over the
cycles of the passes' stream (``mapping.engine.spread`` on one tile: their sum, or a two-thread window's
interleaving) at the same ``flip_flop_clock`` (so the two models' clocking is equal, and they differ in the rest).
"""

import dataclasses
import functools
import re

import numpy as np

from dashraker.designs.descriptor import Operands
from dashraker.hw.verilog import place
from dashraker.mapping.components import CLOCK, CLOCK_ENTRY, MEMORY, table_entry
from dashraker.mapping.engine import energy_pj, spread

__all__ = ["ACTIVITY_ENTRIES", "instance_energy", "part_energy", "table_counts", "stream_cycles", "macs", "Sample",
           "run_passes", "sample_passes", "synthetic_passes", "calibrated_entries", "activity_ratios",
           "activity_energy_pj", "energy_verdicts"]

ACTIVITY_ENTRIES = ("transistor_toggle", "flip_flop_clock")


def _own_figures(area, instances=()):
    """{instance: (own transistors, own flip-flops)}, the tile's own under "". ``dashraker area`` lists each class of
    identical modules once, under its first instance, with its ``count``: the other ``instances`` at the same place
    up to indices share what that place's rows count beyond their listed instances (a place of one class: each
    gets its figures). Refuses (``ValueError``) instances that the record does not count."""
    figures = {"": (area["own"]["transistors"], area["own"]["flip_flops"])}
    beyond = {}  # place -> (transistors, flip-flops, instances) of the unlisted copies
    for row in area["instances"]:
        own, copies = (row["own"]["transistors"], row["own"]["flip_flops"]), row.get("count", 1) - 1
        figures[row["instance"]] = own
        where = place(row["instance"])
        transistors, flip_flops, count = beyond.get(where, (0, 0, 0))
        beyond[where] = (transistors + copies * own[0], flip_flops + copies * own[1], count + copies)
    unlisted = {}
    for name in instances:
        if name not in figures:
            unlisted.setdefault(place(name), []).append(name)
    for where, names in unlisted.items():
        transistors, flip_flops, count = beyond.get(where, (0, 0, 0))
        if count != len(names):
            raise ValueError(f"the area record counts {count} more instances at {where}, the RTL has {len(names)} "
                             f"({', '.join(sorted(names)[:3])}...)")
        for name in names:
            figures[name] = (transistors / count, flip_flops / count)
    return figures


def instance_energy(area, toggles, cycles, table):
    """Per instance: ``{"toggles", "bits", "transistors", "flip_flops", "dynamic_pj", "clock_pj"}`` of its own nets
    and cells, from ``area`` (``fpga.area.design_area``'s record), ``toggles`` (``{instance: Toggles}``),
    ``cycles`` clocked and the energy ``table`` (its activity entries)."""
    e_toggle, e_clock = (table.entries[name] for name in ACTIVITY_ENTRIES)
    figures = _own_figures(area, toggles)
    result = {}
    for name in sorted(set(figures) | set(toggles)):
        transistors, flip_flops = figures.get(name, (0, 0))
        count = toggles.get(name)
        toggled, bits = (count.toggles, count.bits) if count is not None else (0, 0)
        per_bit = transistors / bits if bits else 0.0
        result[name] = {"toggles": toggled, "bits": bits, "transistors": transistors, "flip_flops": flip_flops,
                        "dynamic_pj": toggled * per_bit * e_toggle, "clock_pj": flip_flops * cycles * e_clock}
    return result


def _subtree(energies, root):
    return [value for name, value in energies.items() if name == root or name.startswith(root + ".")]


def part_energy(energies, area_parts):
    """Per part of ``area_parts`` (name -> instance-path regex): the summed figures of its instances and their
    submodules; ``tile_own`` the tile's own logic; ``tile`` everything."""
    keys = ("toggles", "bits", "transistors", "flip_flops", "dynamic_pj", "clock_pj")
    parts = {}
    for part, pattern in area_parts.items():
        roots = [name for name in energies if name and re.fullmatch(pattern, name)]
        rows = [row for root in roots for row in _subtree(energies, root)]
        parts[part] = {key: sum(row[key] for row in rows) for key in keys}
        parts[part]["instances"] = len(roots)
    parts["tile_own"] = {key: energies[""][key] for key in keys} if "" in energies else dict.fromkeys(keys, 0)
    parts["tile"] = {key: sum(row[key] for row in energies.values()) for key in keys}
    for figures in parts.values():
        figures["energy_pj"] = figures["dynamic_pj"] + figures["clock_pj"]
    return parts


def macs(scheduled, partner, rows_used, cols_used):
    """Dense MAC slots (steps x lanes x used rows x used columns) and useful MACs (both operands non-zero) of passes
    ``[P, R, S, N]`` / ``[P, C, S, N]``."""
    _, _, steps, lanes = scheduled.shape
    dense = int((np.asarray(rows_used) * np.asarray(cols_used)).sum()) * steps * lanes
    useful = int(np.einsum("psn,psn->", (scheduled != 0).sum(axis=1, dtype=np.int64),
                           (partner != 0).sum(axis=1, dtype=np.int64)))
    return dense, useful


def stream_cycles(design, params, cycles):
    """The cycles of one tile's stream of passes of ``cycles`` (theirs alone, in stream order), as the mapper charges
    a tile's clocking (``mapping.engine.spread`` on one tile): their sum, or a two-thread window's interleaving."""
    stream = None if design.cost.stream is None else functools.partial(design.cost.stream, params)
    return spread(cycles, 1, stream)


def table_counts(design, params, scheduled, partner, rows_used, cols_used):
    """The mapper's action counts of passes of equal steps, as ``mapping.engine.map_op`` makes them (a per-row-set
    counter counts once per used partner column)."""
    cost = design.cost
    passes, _, steps, _ = scheduled.shape
    counts, cycles = {}, np.full(passes, steps, np.int64)
    if cost.operands is not Operands.NONE:
        found = dict(cost.evaluate(params, scheduled, partner if cost.operands is Operands.BOTH else None))
        cycles = np.asarray(found.pop("cycles"), np.int64)
        partners = np.asarray(cols_used) if cost.operands is Operands.SCHEDULED else 1
        for name, values in found.items():
            counts[name] = int((np.asarray(values) * partners).sum())
    arrays = {"cycles": cycles, "steps": np.full(passes, steps, np.int64), "rows": np.asarray(rows_used, np.int64),
              "cols": np.asarray(cols_used, np.int64)}
    counts.update(cost.pass_counts(params, arrays, 16 if params["fmt"] == "bf16" else 32))
    return counts, cycles


@dataclasses.dataclass
class Sample:
    """Activity and table figures of one run of passes on one design."""

    design: str
    layer: str
    op: str
    passes: int = 0
    rtl_cycles: int = 0
    stream_cycles: int = 0
    sim_cycles: int = 0
    macs: int = 0
    useful_macs: int = 0
    scheduled_values: int = 0
    scheduled_zeros: int = 0
    counts: dict = dataclasses.field(default_factory=dict)
    parts: dict = dataclasses.field(default_factory=dict)
    table_pj: dict = dataclasses.field(default_factory=dict)

    @property
    def activity_pj(self):
        return self.parts["tile"]["energy_pj"]

    @property
    def table_core_pj(self):
        return sum(value for key, value in self.table_pj.items() if key not in MEMORY)

    def as_dict(self):
        return {**dataclasses.asdict(self), "activity_pj": self.activity_pj, "table_core_pj": self.table_core_pj}


def run_passes(cosim, area, config, groups, layer, op, progress=None, prime=False):
    """Run ``groups`` (a list of (scheduled, partner, rows_used, cols_used) of equal steps each) on ``cosim``
    (built with toggles) from zeroed counts; returns a ``Sample`` with the activity energy per part and the table's
    energy of the same passes (``config``: the energy table, format and memory sizes). With ``prime`` the first
    group runs once uncounted first, so that the counts are those of a steady stream of such passes (not of the
    switch from whatever ran before)."""
    design, params = cosim.design, cosim.params
    sample = Sample(design.name, layer, op)
    if prime and groups:
        cosim.run(*groups[0][:2])
    cosim.zero_toggles()
    for scheduled, partner, rows_used, cols_used in groups:
        run = cosim.run(scheduled, partner)
        counts, cycles = table_counts(design, params, scheduled, partner, rows_used, cols_used)
        for name, value in counts.items():
            sample.counts[name] = sample.counts.get(name, 0) + value
        dense, useful = macs(scheduled, partner, rows_used, cols_used)
        sample.passes += len(scheduled)
        sample.rtl_cycles += int(np.asarray(run.cycles).sum())
        sample.stream_cycles += stream_cycles(design, params, run.cycles)
        sample.sim_cycles += run.sim_cycles
        sample.macs += dense
        sample.useful_macs += useful
        used = np.arange(scheduled.shape[1])[None, :] < np.asarray(rows_used)[:, None]
        values = scheduled[used]
        sample.scheduled_values += int(values.size)
        sample.scheduled_zeros += int(values.size - np.count_nonzero(values))
        if progress is not None:
            progress.update(len(scheduled))
    # clocking over the passes' stream (what the mapper charges): the pipeline's fill and drain at the end of each
    # call overlaps the next passes in a stream, and is left out
    energies = instance_energy(area, cosim.toggle_counts(), sample.stream_cycles, config.energy)
    sample.parts = part_energy(energies, design.area_parts)
    sample.table_pj = {**energy_pj(sample.counts, config),
                       CLOCK[0]: area["flip_flops"] * sample.stream_cycles * config.energy.entries[CLOCK_ENTRY]}
    return sample


def sample_passes(layer, tensors, op, rows, cols, lanes, count, fmt="bf16", rounding="nearest"):
    """``count`` passes of one operation spread evenly over the mapper's pass order (``mapping.dataflow``), grouped
    by problem: yields (scheduled, partner, rows_used, cols_used) per problem that holds sampled passes."""
    from dashraker.mapping.dataflow import plan

    problems = plan(layer, tensors, op, lanes, fmt, rounding).problems
    sizes = [problem.rows.num_sets(rows) * problem.cols.num_sets(cols) for problem in problems]
    total = sum(sizes)
    if total == 0:
        return
    picks = np.unique(np.linspace(0, total - 1, min(count, total)).round().astype(np.int64))
    starts = np.cumsum([0, *sizes])
    for index, problem in enumerate(problems):
        local = picks[(picks >= starts[index]) & (picks < starts[index + 1])] - starts[index]
        if local.size == 0:
            continue
        row_set, col_set = np.divmod(local, problem.cols.num_sets(cols))
        scheduled = np.stack([problem.rows.sets(rows, r, r + 1)[0] for r in row_set])
        partner = np.stack([problem.cols.sets(cols, c, c + 1)[0] for c in col_set])
        yield scheduled, partner, problem.rows.used(rows, row_set), problem.cols.used(cols, col_set)


def synthetic_passes(kind, rows, cols, lanes, passes, steps, fmt="bf16", seed=0):
    """Passes of random dense operands (``kind`` "random": normal values, none zero) or of zeros ("zeros") in the
    operand format, as one group of ``sample_passes``."""
    import torch

    from dashraker.models.numerics import quantize

    if kind == "zeros":
        a = np.zeros((passes, rows, steps, lanes), np.float32)
        b = np.zeros((passes, cols, steps, lanes), np.float32)
    else:
        generator = torch.Generator().manual_seed(seed)
        a, b = (quantize(torch.randn(shape, generator=generator), fmt).numpy()
                for shape in ((passes, rows, steps, lanes), (passes, cols, steps, lanes)))
        a[a == 0], b[b == 0] = 1.0, 1.0
    yield a, b, np.full(passes, rows), np.full(passes, cols)


def calibrated_entries(samples, energy_parts, fmt):
    """Per energy-table entry that some design's ``energy_parts`` attributes a part to: the activity energy of those
    parts over the mapper's count of the action, pooled over ``samples`` (``Sample``s of designs by name in
    ``energy_parts``: {design: {part: component}}; a part the sample's configuration lacks, as the fused tree of a
    tree-summing baseline, is left out). Returns {entry: (pJ, activity pJ, count, designs)}."""
    pooled = {}
    for sample in samples:
        present = {part: component for part, component in energy_parts.get(sample.design, {}).items()
                   if part in sample.parts}
        for part, component in present.items():
            entry = table_entry(component, fmt)
            energy, count, designs = pooled.get(entry, (0.0, 0, set()))
            pooled[entry] = (energy + sample.parts[part]["energy_pj"], count, designs | {sample.design})
        for component in set(present.values()):
            entry = table_entry(component, fmt)
            energy, count, designs = pooled[entry]
            pooled[entry] = (energy, count + sample.counts.get(component, 0), designs)
    return {entry: (energy / count, energy, count, sorted(designs))
            for entry, (energy, count, designs) in pooled.items() if count > 0}


def activity_ratios(samples):
    """{(design, op): activity energy / the table's core energy} of ``samples``' trace passes (synthetic left out),
    pooled per design and operation; an operation whose table core energy is zero is left out."""
    pooled = {}
    for sample in samples:
        if sample.op == "synthetic":
            continue
        activity, table = pooled.get((sample.design, sample.op), (0.0, 0.0))
        pooled[sample.design, sample.op] = (activity + sample.activity_pj, table + sample.table_core_pj)
    return {key: activity / table for key, (activity, table) in pooled.items() if table > 0}


def activity_energy_pj(sums, design, ratios, core_only=False):
    """A design's energy over all its operations with each operation's core energy (the mapper's ``sums``, as
    ``mapping.runner.totals`` gives them) scaled by its activity/table ratio (``activity_ratios``); memory and
    leakage as the table has them (left out with ``core_only``). Refuses (``KeyError``) an operation with no
    ratio."""
    total = 0.0
    for (name, op), figures in sums.items():
        if name != design or op == "all":
            continue
        if (design, op) not in ratios:
            raise KeyError(f"{design} {op}: no activity sample of this operation (dashraker energy --design {design})")
        core = figures["core_energy_pj"]
        total += ratios[design, op] * core + (0.0 if core_only else figures["energy_pj"] - core)
    return total


def energy_verdicts(equal, iso, ratios, reference):
    """Per design, at the configured tiles (``equal``) and at iso-area (``iso``: the mapper's ``sums`` of each
    design's iso-area tile count): energy efficiency over ``reference`` under the table (the mapper's energy) and
    under the activity model (``activity_energy_pj``), each design against the reference in the same model; the
    same of the core energy alone (``*_core_*``)."""
    verdicts = {}
    for design in dict.fromkeys(name for name, op in iso if op == "all"):
        entry = {}
        for label, sums in (("equal", equal), ("iso", iso)):
            for key, core in (("", False), ("core_", True)):
                field = "core_energy_pj" if core else "energy_pj"
                entry[f"table_{key}{label}"] = sums[reference, "all"][field] / sums[design, "all"][field]
                entry[f"activity_{key}{label}"] = (activity_energy_pj(sums, reference, ratios, core)
                                                   / activity_energy_pj(sums, design, ratios, core))
        verdicts[design] = entry
    return verdicts
