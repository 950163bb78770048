"""Cycles, hardware-action counts, traffic and energy of one layer operation on one design.

Per pass, the cycles come from the real values: the baseline spends the pass's dense
steps; TensorDash the reference scheduler's count (``models.tensordash.cycles``) over
the scheduled side's non-zero pattern, which depends on the row set only (so it is
computed once per row set and shared by its column sets); FPRaker the golden tile's
count (``models.fpraker.tile``) over both sides' bf16 values. Passes go to the tiles
round robin in pass order (row set by row set, column sets innermost); an operation
lasts as long as its busiest tile (tiles run independently, each with its own buffers).
"""

import numpy as np

from dashraker.mapping import memory
from dashraker.mapping.dataflow import operands, plan, problem_passes

__all__ = ["spread", "map_op", "energy_pj", "COMPONENTS", "MEMORY"]

# Hardware-action counts -> energy table entry; the report's components are these keys.
COMPONENTS = {
    "mul": None,  # mul_bf16 or mul_fp32, by operand format
    "add_fp32": "add_fp32",
    "add_int32": "add_int32",
    "mux_bits": "mux8_bit",
    "scheduler_lanes": "scheduler_lane",
    "term_encodes": "term_encode",
    "terms": "term_shift",
    "exponent_lanes": "exponent_lane",
    "block_ends": "block_normalize",
    "tile_sram_words": None,  # by tile buffer size
    "global_sram_words": None,  # by global buffer size
    "dram_words": "dram_64b",
}

# Components of the memory system; the others make up the core (PEs, schedulers, encoders).
MEMORY = ("tile_sram_words", "global_sram_words", "dram_words")

FPRAKER_MAX_VALUES = 1 << 22  # values per FPRaker batch: its golden model holds several int64 copies
TENSORDASH_MAX_VALUES = 1 << 23  # scheduled values per reference-scheduler call


def spread(pass_cycles, tiles):
    """Cycles of passes run round robin on ``tiles`` tiles: the busiest tile's total."""
    pass_cycles = np.asarray(pass_cycles, np.int64)
    padded = np.zeros(-(-pass_cycles.size // tiles) * tiles, np.int64)
    padded[: pass_cycles.size] = pass_cycles
    return int(padded.reshape(-1, tiles).sum(axis=0).max(initial=0))


def energy_pj(counts, config):
    """Energy per component (pJ) of hardware-action ``counts`` with the configuration's table."""
    table = config.energy
    unit = {
        "mul": table.entries[f"mul_{config.operand_format}"],
        "tile_sram_words": table.sram_pj(config.memory.tile_buffer_kib),
        "global_sram_words": table.sram_pj(config.memory.global_buffer_kib),
    }
    return {key: float(counts.get(key, 0)) * (unit.get(key) or table.entries[entry]) for key, entry in COMPONENTS.items()}


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


def _across_problems(problems, chunks, evaluate, limit):
    """Per-problem results of ``evaluate`` over ``chunks``, batching chunks of equal steps from many problems.

    ``chunks(index, problem)`` yields tuples of arrays whose first axis is passes (or row sets);
    ``evaluate(*arrays)`` returns a tuple of per-pass arrays. A layer with many small problems
    (groups, kernel offsets) thus costs the reference models a few large calls, not many small ones.
    """
    results = [[] for _ in problems]
    pending = []  # (problem index, chunk) of one step count

    def flush():
        if pending:
            outputs = evaluate(*(np.concatenate(parts) for parts in zip(*(chunk for _, chunk in pending))))
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
                    pending.append((index, chunk))
                    if sum(part.size for _, held in pending for part in held) >= limit:
                        flush()
        flush()
    return [tuple(np.concatenate(parts) for parts in zip(*result)) for result in results]


def _tensordash(problems, config):
    """Per row set: cycles (reference scheduler) and non-zero scheduled values, for each problem."""
    from dashraker.models import tensordash

    pattern = tensordash.DEFAULT_PATTERN if config.pattern is None else tensordash.parse_pattern(config.pattern)
    rows = config.rows

    def chunks(index, problem):
        sets = problem.rows.num_sets(rows)
        per_batch = max(1, TENSORDASH_MAX_VALUES // (rows * problem.steps * config.lanes))
        for first in range(0, sets, per_batch):
            yield (problem.rows.sets(rows, first, min(first + per_batch, sets)) != 0,)

    def evaluate(nonzero):
        return tensordash.cycles(nonzero, pattern, config.lookahead), np.count_nonzero(nonzero, axis=(1, 2, 3))

    return _across_problems(problems, chunks, evaluate, TENSORDASH_MAX_VALUES)


def _bf16_bits(values):
    """bf16 bit patterns of values the dataflow already converted to bf16: the upper half of their fp32 bits."""
    return (values.view(np.uint32) >> 16).astype(np.int64)


def _fpraker(problems, config):
    """Per pass: cycles and in-bound terms (golden tile) and non-zero term-serial values, for each problem."""
    from dashraker.models import fpraker

    def chunks(index, problem):
        for batch in problem_passes(index, problem, config.rows, config.cols, FPRAKER_MAX_VALUES):
            yield batch.scheduled, batch.other

    def evaluate(scheduled, other):
        result = fpraker.tile(_bf16_bits(scheduled), _bf16_bits(other), config.guard_bits, config.zero_block_cycles)
        return result.cycles.numpy(), result.terms.numpy(), np.count_nonzero(scheduled, axis=(1, 2, 3))

    return _across_problems(problems, chunks, evaluate, FPRAKER_MAX_VALUES)


def _design_counts(design, arrays, lanes, value_bits):
    """Counts that follow from the per-pass arrays of a design (see SPEC section 7 and the README)."""
    cycles, steps, rows, cols = arrays["cycles"], arrays["steps"], arrays["rows"], arrays["cols"]
    pe_cycles = int((cycles * rows * cols).sum()) * lanes
    if design == "baseline":
        return {"mul": pe_cycles, "add_fp32": pe_cycles}
    if design == "tensordash":
        row_lane_cycles = int((cycles * rows).sum()) * lanes
        return {
            "add_fp32": pe_cycles,
            "mux_bits": (row_lane_cycles + pe_cycles) * value_bits,
            "scheduler_lanes": row_lane_cycles,
        }
    blocks = int((steps * rows * cols).sum())
    return {"add_int32": pe_cycles, "exponent_lanes": blocks * lanes, "block_ends": blocks}


def map_op(config, layer, tensors, op, plans=None):
    """Map one operation of one layer on ``config``'s design and on the dense baseline of the same array.

    ``plans`` (a dict) caches the converted tensors and the operation's plans across operations and designs.
    Returns a dict of figures (see README, "Mapper").
    """
    plans = {} if plans is None else plans
    fmt = (config.operand_format, config.rounding)
    if fmt not in plans:
        plans[fmt] = operands(layer, tensors, *fmt)
    key = (op, config.lanes, *fmt)
    if key not in plans:
        plans[key] = plan(layer, tensors, op, config.lanes, *fmt, arrays=plans[fmt])
    op_plan = plans[key]
    design_passes, dense_passes = _Passes(), _Passes()
    counts = {name: 0 for name in COMPONENTS}
    if config.design == "tensordash":
        per_problem = _tensordash(op_plan.problems, config)
    elif config.design == "fpraker":
        per_problem = _fpraker(op_plan.problems, config)
    for index, problem in enumerate(op_plan.problems):
        row_sets, col_sets = problem.rows.num_sets(config.rows), problem.cols.num_sets(config.cols)
        row_set, col_set = np.divmod(np.arange(row_sets * col_sets), col_sets)
        rows, cols = problem.rows.used(config.rows, row_set), problem.cols.used(config.cols, col_set)
        if config.design == "tensordash":
            set_cycles, nonzero = per_problem[index]
            cycles = np.repeat(set_cycles, col_sets)
            counts["mul"] += int(nonzero.sum()) * problem.cols.count
        elif config.design == "fpraker":
            cycles, terms, nonzero = per_problem[index]
            counts["terms"] += int(terms.sum())
            counts["term_encodes"] += int(nonzero.sum())
        else:
            cycles = problem.steps
        design_passes.add(cycles, problem.steps, rows, cols, row_set, col_set)
        dense_passes.add(problem.steps, problem.steps, rows, cols, row_set, col_set)
    arrays, dense = design_passes.arrays(), dense_passes.arrays()
    value_bits = 16 if config.operand_format == "bf16" else 32
    counts.update(_design_counts(config.design, arrays, config.lanes, value_bits))
    traffic = memory.traffic(config, op_plan, arrays)
    baseline_counts = {**_design_counts("baseline", dense, config.lanes, value_bits), **traffic.counts}
    counts.update(traffic.counts)
    cycles, dense_cycles = spread(arrays["cycles"], config.tiles), spread(dense["cycles"], config.tiles)
    energy, baseline_energy = energy_pj(counts, config), energy_pj(baseline_counts, config)
    timing = memory.timing(config, cycles, traffic.dram_bytes)
    dense_timing = memory.timing(config, dense_cycles, traffic.dram_bytes)
    total, baseline_total = sum(energy.values()), sum(baseline_energy.values())
    core, baseline_core = (sum(v for k, v in e.items() if k not in MEMORY) for e in (energy, baseline_energy))
    return {
        "layer": layer.name,
        "op": op,
        "design": config.design,
        "scheduled": op_plan.scheduled,
        "partner": op_plan.partner,
        "zero_fraction_scheduled": op_plan.zero_fraction[op_plan.scheduled],
        "zero_fraction_partner": op_plan.zero_fraction[op_plan.partner],
        "problems": len(op_plan.problems),
        "passes": int(arrays["cycles"].size),
        "values_scheduled": int((arrays["steps"] * arrays["rows"]).sum()) * config.lanes,
        "dense_cycles": dense_cycles,
        "cycles": cycles,
        "speedup": dense_cycles / cycles if cycles else 1.0,
        **timing,
        "time_speedup": dense_timing["time_s"] / timing["time_s"] if timing["time_s"] else 1.0,
        "dram_bytes": traffic.dram_bytes,
        "energy_pj": total,
        "baseline_energy_pj": baseline_total,
        "energy_efficiency": baseline_total / total if total else 1.0,
        "core_energy_pj": core,
        "baseline_core_energy_pj": baseline_core,
        "core_energy_efficiency": baseline_core / core if core else 1.0,
        "energy_breakdown_pj": energy,
        "counts": counts,
    }
