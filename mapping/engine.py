"""Cycles, hardware-action counts, traffic and energy of one layer operation on one design.

Per pass, the cycles come from the real values, through the design's cost model
(``Design.cost``): a pass costs its dense steps, or what the design's reference model
counts over the scheduled side alone (evaluated once per row set and shared by its
column sets) or over both sides. Passes go to the tiles round robin in pass order
(row set by row set, column sets innermost); an operation lasts as long as its
busiest tile (tiles run independently, each with its own buffers; a design may run a tile's
passes other than one after another: ``Cost.stream``). Every operation is
also costed on the reference (dense) design of the same array, as the configuration sets it
(``silicon.reference_params``: SPEC section 7b), for the speedups. Times are each
tile's cycles at its own clock (``AcceleratorConfig.clock_mhz``, ``reference_clock_mhz``).
"""

import dataclasses
import functools

import numpy as np

from dashraker.designs import reference
from dashraker.designs.descriptor import Operands
from dashraker.mapping import memory, silicon
from dashraker.mapping.components import MEMORY, STATIC, components
from dashraker.mapping.dataflow import operands, plan, problem_passes

__all__ = ["spread", "map_op", "energy_pj", "evaluation_key"]


def spread(pass_cycles, tiles, stream=None):
    """Cycles of passes run round robin on ``tiles`` tiles: the busiest tile's, its passes' cycles summed or,
    with ``stream`` (``Cost.stream`` of the design's parameters), as the design runs a tile's stream of passes."""
    pass_cycles = np.asarray(pass_cycles, np.int64)
    padded = np.zeros(-(-pass_cycles.size // tiles) * tiles, np.int64)
    padded[: pass_cycles.size] = pass_cycles
    per_tile = padded.reshape(-1, tiles)
    return int(np.max(per_tile.sum(axis=0) if stream is None else stream(per_tile), initial=0))


def energy_pj(counts, config):
    """Energy per component (pJ) of hardware-action ``counts`` with the configuration's table."""
    table = config.energy
    unit = {
        "mul": table.entries[f"mul_{config.fmt}"],
        "tile_sram_words": table.sram_pj(config.memory.tile_buffer_kib),
        "global_sram_words": table.sram_pj(config.memory.global_buffer_kib),
    }
    return {key: float(counts.get(key, 0)) * (unit[key] if key in unit else table.entries[entry])
            for key, entry in components().items()}


class _Passes:
    """Per-pass arrays of an operation, gathered problem by problem, then concatenated."""

    def __init__(self):
        self.parts = {name: [] for name in ("cycles", "steps", "rows", "cols", "row_key", "col_key")}
        self.row_keys = self.col_keys = 0

    def add(self, cycles, steps, rows, cols, row_set, col_set):
        for name, value in zip(self.parts, (cycles, steps, rows, cols, row_set + self.row_keys, col_set + self.col_keys)):
            self.parts[name].append(np.broadcast_to(np.asarray(value, np.int64), rows.shape))
        self.row_keys += int(row_set.max(initial=-1)) + 1
        self.col_keys += int(col_set.max(initial=-1)) + 1

    def arrays(self):
        return {name: np.concatenate(parts) if parts else np.zeros(0, np.int64) for name, parts in self.parts.items()}


@dataclasses.dataclass(frozen=True)
class _Picked:
    """Passes of one side as its stream sets and each pass's set (``sets[pick]``), for a cost model that reads the
    sets itself (``Cost.evaluate_sets``)."""

    sets: np.ndarray
    pick: np.ndarray

    def __len__(self):
        return len(self.pick)


def _size(part):
    """Values in a chunk's array: a NumPy array's, on a GPU a torch tensor's, or the stream sets' of a ``_Picked``."""
    if isinstance(part, _Picked):
        return part.sets.size
    return part.size if isinstance(part, np.ndarray) else part.numel()


def _join(parts):
    """One array of a batch's chunks (a lone chunk as it is, uncopied), NumPy or torch alike; ``_Picked`` chunks as
    their sets one after another, each pick moved past the sets before it."""
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], _Picked):
        starts = np.cumsum([0] + [len(part.sets) for part in parts[:-1]])
        return _Picked(np.concatenate([part.sets for part in parts]),
                       np.concatenate([part.pick + start for part, start in zip(parts, starts)]))
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    import torch  # a GPU's chunks; the CPU path runs without PyTorch

    return torch.cat(parts)


def _on_device(batch, device):
    """A batch's passes gathered on ``device`` from its stream sets, which alone travel (a fraction of the passes)."""
    import torch

    def gather(sets, pick):
        sets = np.require(sets, requirements=("C", "W"))  # torch takes writable arrays only: a copy of a view
        return torch.from_numpy(sets).to(device)[torch.from_numpy(pick).to(device)]

    return gather(batch.scheduled_sets, batch.row_pick), gather(batch.partner_sets, batch.col_pick)


def _across_problems(problems, chunks, evaluate, limit):
    """Per-problem results of ``evaluate`` over ``chunks``, batching chunks of equal steps from many problems.

    ``chunks(index, problem)`` yields tuples of arrays (or torch tensors) whose first axis is passes (or row sets);
    ``evaluate(*arrays)`` returns a tuple of per-pass arrays. A layer with many small problems
    (groups, kernel offsets) thus costs the reference models a few large calls, not many small ones.
    A batch stops short of ``limit`` values when the next chunk would pass it, so a chunk of about
    ``limit`` values goes alone, uncopied.
    """
    results = [[] for _ in problems]
    pending = []  # (problem index, chunk) of one step count

    def flush():
        if pending:
            outputs = evaluate(*(_join(parts) for parts in zip(*(chunk for _, chunk in pending))))
            offset = 0
            for owner, chunk in pending:
                count = len(chunk[0])
                results[owner].append(tuple(np.asarray(out)[offset : offset + count] for out in outputs))
                offset += count
            pending.clear()

    for steps in dict.fromkeys(problem.steps for problem in problems):
        for index, problem in enumerate(problems):
            if problem.steps == steps:
                for chunk in chunks(index, problem):
                    held = sum(_size(part) for _, earlier in pending for part in earlier)
                    if held + sum(_size(part) for part in chunk) > limit:
                        flush()
                    pending.append((index, chunk))
        flush()
    return [tuple(np.concatenate(parts) for parts in zip(*result)) for result in results]


def _evaluate(problems, config):
    """Per problem, the cost model's per-pass (or per-row-set) arrays, as a dict of arrays."""
    cost, params = config.design.cost, config.params
    by_row_set, limit = cost.operands is Operands.SCHEDULED, cost.batch_values(config.device)
    by_sets = cost.evaluate_sets is not None and config.device == "cpu"
    names = []

    def chunks(index, problem):
        if by_row_set:
            sets = problem.rows.num_sets(config.rows)
            per_batch = max(1, limit // (config.rows * problem.steps * config.lanes))
            for first in range(0, sets, per_batch):
                yield (problem.rows.sets(config.rows, first, min(first + per_batch, sets)),)
        else:
            for batch in problem_passes(index, problem, config.rows, config.cols, limit):
                if by_sets:
                    yield _Picked(batch.scheduled_sets, batch.row_pick), _Picked(batch.partner_sets, batch.col_pick)
                elif config.device == "cpu":
                    yield batch.scheduled, batch.partner
                else:
                    yield _on_device(batch, config.device)

    def evaluate(scheduled, partner=None):
        if by_sets:
            result = cost.evaluate_sets(params, scheduled.sets, scheduled.pick, partner.sets, partner.pick)
        else:
            result = cost.evaluate(params, scheduled, partner, config.device)
        names[:] = list(result)
        return tuple(result.values())

    per_problem = _across_problems(problems, chunks, evaluate, limit)
    return [dict(zip(names, arrays)) for arrays in per_problem]


def _dnnsim_carried(config, op_plan):
    """For the ``dnnsim`` dataflow on a design with a staging window (a ``lookahead`` and a ``pattern``): a function
    ``cost(problem, counts)`` giving a problem's per-pass cycles as DNNsim counts them (``mapping.dnnsim``: the
    leading all-zero steps jumped, one skip counter per layer, operation, group and sample, carried from pass to pass)
    and adding its multiplications (DNNsim's: the non-zero scheduled values, each once per partner) to ``counts``;
    else None. It stands in for the design's own evaluation, whose cycles DNNsim's replace and whose only count
    is the same multiplications (checked by tests/mapping/test_map_dnnsim.py)."""
    params = config.params
    if (config.dataflow != "dnnsim" or config.design.cost.operands is not Operands.SCHEDULED
            or not {"lookahead", "pattern"} <= set(params)):
        return None
    from dashraker.mapping import dnnsim
    from dashraker.models.interconnect import parse_pattern

    pattern, state = parse_pattern(params["pattern"]), {"call": None, "skip": 0}
    rows_outer = op_plan.scheduled == ("G" if op_plan.op == "bwd_input" else "A")  # windows / activations on rows

    def cost(problem, counts):
        call = dnnsim.call_of(problem.label)
        skip = state["skip"] if call == state["call"] else 0
        cycles, state["skip"], multiplications = dnnsim.problem_cycles(problem, config.rows, config.cols, pattern,
                                                                       params["lookahead"], rows_outer, skip)
        state["call"] = call
        counts["mul"] += multiplications
        return cycles

    return cost


def _set_bytes(streams, size, value_bytes, limit=1 << 22):
    """Zero-value compressed bytes of each set of ``size`` streams (``memory.zvc_bytes``)."""
    sets = streams.num_sets(size)
    nonzero = np.zeros(sets, np.int64)
    per_batch = max(1, limit // (size * streams.steps * streams.lanes))
    for first in range(0, sets, per_batch):
        last = min(first + per_batch, sets)
        block = streams.sets(size, first, last)
        nonzero[first:last] = np.count_nonzero(block.reshape(last - first, -1), axis=1)
    values = streams.used(size, np.arange(sets)) * streams.steps * streams.lanes
    return memory.zvc_bytes(values, nonzero, value_bytes)


def _tensor_bytes(plans, fmt, name, value_bytes):
    """Zero-value compressed bytes of a whole operand tensor, cached in ``plans``."""
    key = ("zvc", fmt, name)
    if key not in plans:
        array = plans[fmt][name]
        plans[key] = int(memory.zvc_bytes(array.size, int(np.count_nonzero(array)), value_bytes))
    return plans[key]


def cycle_breakdown(config, counts, pass_cycles, cycles, fill):
    """Where a term-serial design's cycles go (its cost model counts ``pe_cycles`` and ``terms``), adding up to
    ``cycles`` exactly: per tile (the passes' cycles over the tiles), the cycles at the mean in-bound term
    count of a lane, the extra of each PE's maximum over its lanes, the extra of the tile's lockstep (its
    busiest PE); then the busiest tile's excess over the mean tile and the pipeline fill. ``skipped_terms``:
    the terms of non-zero products skipped as out of bounds (not cycles: they cost none)."""
    pes, tiles = config.rows * config.cols, config.tiles
    work = int(np.sum(pass_cycles))
    mean = counts["terms"] / (config.lanes * pes)
    lanes = counts["pe_cycles"] / pes - mean
    return {"mean_terms": mean / tiles, "lane_max": lanes / tiles, "lockstep": (work - mean - lanes) / tiles,
            "tile_imbalance": cycles - fill - work / tiles, "fill": fill, "skipped_terms": int(counts["skipped_terms"])}


def map_op(config, layer, tensors, op, plans=None, weight_share=1.0):
    """Map one operation of one layer on ``config``'s design and on the dense baseline of the same array.

    ``plans`` (a dict) caches the converted tensors, the operation's plans and its passes' evaluation across
    operations and configurations (those differing only in what comes after the passes, such as tiles, clock, memory
    or silicon, share one evaluation);
    ``weight_share``: the share of the weights' DRAM traffic charged (``memory.traffic``; below 1 for one group of a
    batch's samples, ``runner.group_samples``).
    Returns a dict of figures (see docs/guides/cli-map.md).
    """
    plans = {} if plans is None else plans
    if config.clock_mhz is None:
        raise ValueError(f"{config.design.name}: clock_mhz: {config.clock_source} comes from the tiles' timing: "
                         "resolve the configuration first (mapping.silicon.resolve_all)")
    op_plan = _cached_plan(config, layer, tensors, op, plans)
    arrays, dense, counts = _cached_passes(config, op_plan, plans)
    value_bits = 8 * _value_bytes(config)
    counts.update(config.design.cost.pass_counts(config.params, arrays, value_bits))
    compressed = _compressed(config, plans, op_plan) if config.memory.compression == "zvc" else None
    traffic = memory.traffic(config, op_plan, arrays, compressed, weight_share)
    baseline_counts = {**reference().cost.pass_counts(silicon.reference_params(config), dense, value_bits),
                       **traffic.counts}
    counts.update(traffic.counts)
    cycles, dense_cycles, breakdown = _op_cycles(config, counts, arrays, dense)
    timing = memory.timing(config, cycles, traffic.dram_bytes)
    dense_timing = memory.timing(dataclasses.replace(config, clock_mhz=config.reference_clock_mhz), dense_cycles,
                                 traffic.dram_bytes)
    return {
        **_plan_figures(config, layer, op, op_plan, arrays),
        "dense_cycles": dense_cycles,
        "cycles": cycles,
        "speedup": dense_cycles / cycles if cycles else 1.0,
        **timing,
        "dense_time_s": dense_timing["time_s"],
        "time_speedup": dense_timing["time_s"] / timing["time_s"] if timing["time_s"] else 1.0,
        "clock_mhz": config.clock_mhz,
        "clock_source": config.clock_source,
        "dram_bytes": traffic.dram_bytes,
        "compression": config.memory.compression,
        **_energy_figures(config, counts, baseline_counts, timing["time_s"], dense_timing["time_s"]),
        "cycle_breakdown": breakdown,
        "counts": counts,
    }


def _value_bytes(config):
    """Bytes of a value in the operand format."""
    return 2 if config.fmt == "bf16" else 4


def evaluation_key(config):
    """What an operation's passes and their evaluation depend on besides the operation (``_cached_passes``; the
    plan's own key, ``_plan_key``, is a part of it): configurations with equal keys share them."""
    return (config.lanes, config.fmt, config.rounding, config.dataflow, config.design.name,
            repr(sorted(config.params.items())), config.device)


def _plan_key(config, op):
    return op, config.lanes, config.fmt, config.rounding, config.dataflow


def _cached_plan(config, layer, tensors, op, plans):
    """The operation's plan on ``config``'s lanes, format and dataflow, from ``plans`` or made and kept there."""
    fmt = (config.fmt, config.rounding)
    if fmt not in plans:
        plans[fmt] = operands(layer, tensors, *fmt)
    key = _plan_key(config, op)
    if key not in plans:
        plans[key] = plan(layer, tensors, op, config.lanes, *fmt, arrays=plans[fmt], dataflow=config.dataflow)
    return plans[key]


def _cached_passes(config, op_plan, plans):
    """``_pass_arrays`` of the operation on ``config``, from ``plans`` or made and kept there: it depends on the plan,
    the design and its parameters and where the cost model runs alone. The counts are a copy, for the caller to add
    to."""
    key = ("passes", op_plan.op, *evaluation_key(config))
    if key not in plans:
        plans[key] = _pass_arrays(config, op_plan)
    arrays, dense, counts = plans[key]
    return arrays, dense, dict(counts)


def _set_indices(problem, config):
    """The row set and column set of each of a problem's passes on ``config``'s array, column sets innermost."""
    col_sets = problem.cols.num_sets(config.cols)
    return np.divmod(np.arange(problem.rows.num_sets(config.rows) * col_sets), col_sets)


def _pass_arrays(config, op_plan):
    """Every pass of the operation on the design and on the dense baseline (``_Passes.arrays``) and the action counts
    of the cost model's evaluation."""
    design_passes, dense_passes = _Passes(), _Passes()
    counts = dict.fromkeys(components(), 0)
    carried = _dnnsim_carried(config, op_plan)
    evaluates = config.design.cost.operands is not Operands.NONE and carried is None
    per_problem = _evaluate(op_plan.problems, config) if evaluates else [None] * len(op_plan.problems)
    for problem, evaluated in zip(op_plan.problems, per_problem):
        row_set, col_set = _set_indices(problem, config)
        rows, cols = problem.rows.used(config.rows, row_set), problem.cols.used(config.cols, col_set)
        if carried is not None:
            cycles = carried(problem, counts)
        else:
            cycles = problem.steps if evaluated is None else _problem_cycles(config, problem, evaluated, counts)
        design_passes.add(cycles, problem.steps, rows, cols, row_set, col_set)
        dense_passes.add(problem.steps, problem.steps, rows, cols, row_set, col_set)
    return design_passes.arrays(), dense_passes.arrays(), counts


def _problem_cycles(config, problem, evaluated, counts):
    """A problem's cycles per pass from its evaluation, whose action counts go into ``counts``."""
    operands = config.design.cost.operands
    found = dict(evaluated)
    cycles = found.pop("cycles")
    if operands is Operands.SCHEDULED:  # per row set: shared by its column sets, counted per partner
        cycles = np.repeat(cycles, problem.cols.num_sets(config.cols))
    partners = problem.cols.count if operands is Operands.SCHEDULED else 1
    for name, values in found.items():
        counts[name] = counts.get(name, 0) + int(values.sum()) * partners
    return cycles


def _compressed(config, plans, op_plan):
    """ZVC: the compressed bytes of every pass's row and column sets (in ``_pass_arrays``' order) and of the two
    operand tensors."""
    set_bytes = {"row_bytes": [], "col_bytes": []}
    for problem in op_plan.problems:
        row_set, col_set = _set_indices(problem, config)
        set_bytes["row_bytes"].append(_set_bytes(problem.rows, config.rows, _value_bytes(config))[row_set])
        set_bytes["col_bytes"].append(_set_bytes(problem.cols, config.cols, _value_bytes(config))[col_set])
    compressed = {name: np.concatenate(parts) if parts else np.zeros(0, np.int64) for name, parts in set_bytes.items()}
    compressed["operand_bytes"] = [_tensor_bytes(plans, (config.fmt, config.rounding), name, _value_bytes(config))
                                   for name in (op_plan.scheduled, op_plan.partner)]
    return compressed


def _op_cycles(config, counts, arrays, dense):
    """The operation's cycles on the design (its busiest tile's, plus the pipeline fill) and on the dense baseline,
    and where a term-serial design's cycles go (``cycle_breakdown``; None for the other designs)."""
    stream = config.design.cost.stream
    stream = None if stream is None else functools.partial(stream, config.params)
    cycles, dense_cycles = spread(arrays["cycles"], config.tiles, stream), spread(dense["cycles"], config.tiles)
    fill = config.design.fill(config.params) if arrays["cycles"].size else 0
    cycles += fill  # the design's pipeline fill
    breakdown = None
    if {"pe_cycles", "terms", "skipped_terms"} <= counts.keys():
        breakdown = cycle_breakdown(config, counts, arrays["cycles"], cycles, fill)
    return cycles, dense_cycles, breakdown


def _plan_figures(config, layer, op, op_plan, arrays):
    """The row's figures of the operation's plan: sides, zeros, problems and passes."""
    return {
        "layer": layer.name,
        "op": op,
        "design": config.design.name,
        "scheduled": op_plan.scheduled,
        "partner": op_plan.partner,
        "zero_fraction_scheduled": op_plan.zero_fraction[op_plan.scheduled],
        "zero_fraction_partner": op_plan.zero_fraction[op_plan.partner],
        "problems": len(op_plan.problems),
        "passes": int(arrays["cycles"].size),
        "values_scheduled": int((arrays["steps"] * arrays["rows"]).sum()) * config.lanes,
    }


def _energy_figures(config, counts, baseline_counts, time_s, dense_time_s):
    """The row's energy figures of the design and of the dense baseline, the tiles' clocking and leakage over their
    run times included (each at its own clock)."""
    energy, baseline_energy = energy_pj(counts, config), energy_pj(baseline_counts, config)
    clock = silicon.clock_pj(config, config.tile, time_s, config.clock_mhz)
    baseline_clock = silicon.clock_pj(config, config.reference_tile, dense_time_s, config.reference_clock_mhz)
    energy["clock"], baseline_energy["clock"] = clock or 0.0, baseline_clock or 0.0
    leakage = silicon.leakage_pj(config, config.tile, time_s)
    baseline_leakage = silicon.leakage_pj(config, config.reference_tile, dense_time_s)
    energy["leakage"], baseline_energy["leakage"] = leakage or 0.0, baseline_leakage or 0.0
    total, baseline_total = sum(energy.values()), sum(baseline_energy.values())
    core, baseline_core = (sum(v for k, v in e.items() if k not in MEMORY + STATIC) for e in (energy, baseline_energy))
    return {
        "area_scope": config.area_scope,
        "area_estimate": config.area_estimate,
        "silicon": config.silicon,
        "library": config.library if config.uses_library else None,
        "silicon_area": None if config.tile is None else silicon.silicon_area(config, config.tile),
        "clock_pj": clock,
        "leakage_pj": leakage,
        "energy_pj": total,
        "baseline_energy_pj": baseline_total,
        "energy_efficiency": baseline_total / total if total else 1.0,
        "core_energy_pj": core,
        "baseline_core_energy_pj": baseline_core,
        "core_energy_efficiency": baseline_core / core if core else 1.0,
        "energy_breakdown_pj": energy,
    }
