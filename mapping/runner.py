"""Maps a whole trace: one task per (step, layer, operation), run by one of ``executors`` (in this process, on local
worker processes or on a Dask cluster), with a progress bar."""

import math
import os
from pathlib import Path

from tqdm import tqdm

from dashraker.mapping import executors
from dashraker.mapping.dataflow import OPS, check_dataflow, conv_geometry
from dashraker.mapping.engine import map_op

__all__ = ["default_jobs", "layer_ops", "map_layer", "map_trace", "totals"]


def layer_ops(index, layer=None):
    """The operations mapped for the layer at ``index``: an input gradient where training computes one, as the trace
    records it (``input_needs_grad``), else (older traces) for every layer but the first (SPEC section 5)."""
    needs = index > 0 if getattr(layer, "input_needs_grad", None) is None else layer.input_needs_grad
    return [op for op in OPS if op != "bwd_input" or needs]


def map_layer(trace, configs, step, index, ops=None):
    """Operations ``ops`` (default: all of ``layer_ops``) of one layer at one step on every configuration.

    Returns a list of result rows (``map_op``'s figures plus ``step`` and ``layer_index``).
    """
    layer = trace.layers[index]
    tensors = trace.load(layer.name, step)
    plans, rows = {}, []
    for op in layer_ops(index, layer) if ops is None else ops:
        for config in configs:
            rows.append({"step": step, "layer_index": index, **map_op(config, layer, tensors, op, plans)})
    return rows


# Work (``_work`` of the tasks times the configurations) that pays for one more local worker:
# about 1 CPU s of the cheapest design's mapping (baseline), against about 0.1 CPU s that a
# forked worker costs (measured on a ResNet-18 step).
WORK_PER_JOB = 10**10


def _map_task(trace, configs, task):
    """One (step, layer, operation) task: its rows on every configuration."""
    step, index, op = task
    return map_layer(trace, configs, step, index, [op])


def _work(layer):
    """Rough size of a layer's mapping work (its multiply-accumulates), to start the largest first."""
    geo = conv_geometry(layer, layer.input_shape, layer.weight_shape)
    (n, c), (m, kh, kw) = geo.input[:2], geo.kernel
    return n * m * (c // geo.groups) * kh * kw * math.prod(geo.output())


def default_jobs(work, cpus):
    """Local worker processes for ``work`` (``_work`` of the tasks times the configurations) on ``cpus`` CPUs.

    One per ``WORK_PER_JOB``, at most one per CPU: below that a worker costs more than it saves.
    """
    return max(1, min(cpus, work // WORK_PER_JOB))


def map_trace(trace_path, configs, steps=None, jobs=None, progress=True, dask=None, skip_unsupported=False):
    """Map every layer of the trace's ``steps`` (default: all) on each configuration; rows in trace order.

    ``dask``: the address of a Dask scheduler (``tcp://host:port``) whose workers map the
    tasks, reading the trace at the same path (storage they share). Otherwise ``jobs`` local
    worker processes (default: ``default_jobs``; 1 when the configurations run their cost models on
    a GPU, which one process keeps busy); ``jobs=1`` maps in this process. A trace holding layers
    of a type this version does not take (``Trace.unsupported``) is refused unless ``skip_unsupported``, and a layer
    a configuration's dataflow cannot form (``dataflow.check_dataflow``) before any work.
    """
    from dashraker.trace import open_trace

    trace = open_trace(trace_path)
    if trace.unsupported and not skip_unsupported:
        layer = trace.unsupported[0]
        raise ValueError(f"{trace_path}: layer {layer.name!r}: {layer.reason}; "
                         "--skip-unsupported maps the other layers")
    for layer in trace.layers:
        for dataflow in dict.fromkeys(config.dataflow for config in configs):
            check_dataflow(layer, dataflow)
    steps = list(trace.steps if steps is None else steps)
    missing = sorted(set(steps) - set(trace.steps))
    if missing:
        raise ValueError(f"{trace_path}: step {missing[0]} is not recorded; recorded steps are {trace.steps}")
    tasks = sorted(
        ((step, index, op) for step in steps for index, layer in enumerate(trace.layers)
         for op in layer_ops(index, layer)),
        key=lambda task: -_work(trace.layers[task[1]]),
    )
    with tqdm(total=len(tasks), desc="map", unit="op", disable=not progress) as bar:
        if dask is not None:
            results = executors.on_dask(_map_task, dask, str(Path(trace_path).absolute()), configs, tasks, bar)
        else:
            gpu = any(config.device != "cpu" for config in configs)
            work = sum(_work(trace.layers[index]) for _, index, _ in tasks) * len(configs)
            jobs = min(jobs or (1 if gpu else default_jobs(work, len(os.sched_getaffinity(0)))), len(tasks))
            if jobs <= 1:
                results = executors.in_process(_map_task, trace, configs, tasks, bar)
            elif gpu:
                results = executors.on_local_workers(_map_task, trace_path, configs, tasks, jobs, bar, "spawn")
            else:  # the smallest task here first: the workers forked after it inherit the kernels it loaded
                results = executors.in_process(_map_task, trace, configs, tasks[-1:], bar)
                results += executors.on_local_workers(_map_task, trace_path, configs, tasks[:-1], jobs, bar)
    design_order = {config.design.name: k for k, config in enumerate(configs)}
    return sorted(results, key=lambda r: (design_order[r["design"]], r["step"], r["layer_index"], OPS.index(r["op"])))


def _sum(rows, fields):
    return {field: sum(row[field] for row in rows) for field in fields}


def totals(rows):
    """Sums per design and operation (key ``(design, op)``) and per design over all operations (``op`` "all")."""
    fields = ("dense_cycles", "cycles", "values_scheduled", "energy_pj", "baseline_energy_pj", "core_energy_pj",
              "baseline_core_energy_pj", "compute_s", "time_s", "dram_bytes")
    out = {}
    for design in dict.fromkeys(row["design"] for row in rows):
        for op in (*OPS, "all"):
            group = [r for r in rows if r["design"] == design and op in (r["op"], "all")]
            if not group:
                continue
            total = _sum(group, fields)
            total["speedup"] = total["dense_cycles"] / total["cycles"] if total["cycles"] else 1.0
            total["energy_efficiency"] = (
                total["baseline_energy_pj"] / total["energy_pj"] if total["energy_pj"] else 1.0
            )
            total["core_energy_efficiency"] = (
                total["baseline_core_energy_pj"] / total["core_energy_pj"] if total["core_energy_pj"] else 1.0
            )
            breakdown = {}
            for row in group:
                for component, value in row["energy_breakdown_pj"].items():
                    breakdown[component] = breakdown.get(component, 0.0) + value
            total["energy_breakdown_pj"] = breakdown
            cycle_parts = [row["cycle_breakdown"] for row in group if row.get("cycle_breakdown")]
            if cycle_parts:
                total["cycle_breakdown"] = {key: sum(part[key] for part in cycle_parts) for key in cycle_parts[0]}
            out[design, op] = total
    return out
