"""Maps a whole trace: one task per (step, layer, operation), run by one of ``executors`` (in this process, on local
worker processes or on a Dask cluster), with a progress bar."""

import dataclasses
import math
import os
from pathlib import Path

from dashraker.progress import bar as progress_bar
from dashraker.progress import stage

from dashraker.mapping import executors
from dashraker.mapping.dataflow import OPS, check_dataflow, conv_geometry
from dashraker.mapping.engine import evaluation_key, map_op

__all__ = ["default_jobs", "estimate_seconds", "layer_macs", "layer_ops", "group_samples", "map_layer", "check_mappable",
           "configs_work", "map_each", "map_trace", "totals", "trace_work"]


def layer_ops(index, layer=None):
    """The operations mapped for the layer at ``index``: an input gradient where training computes one, as the trace
    records it (``input_needs_grad``), else (older traces) for every layer but the first (SPEC section 5)."""
    needs = index > 0 if getattr(layer, "input_needs_grad", None) is None else layer.input_needs_grad
    return [op for op in OPS if op != "bwd_input" or needs]


def group_samples(layer, tensors, group, groups):
    """The ``group``-th of ``groups`` near-equal runs of consecutive samples of a layer's recorded batch: the layer
    with its shapes of that many samples, its tensors sliced, and the share of the weights' DRAM traffic it is charged
    (the weights are read once per step, not once per group: ``1 / groups``; a ``matmul`` layer's second operand is
    per sample, sliced with the rest). ``groups`` above the samples recorded is a ``ValueError``."""
    samples = layer.input_shape[0]
    if not 1 <= groups <= samples:
        raise ValueError(f"layer {layer.name!r}: {samples} sample(s) recorded, too few for {groups} groups")
    first, last = (group * samples) // groups, ((group + 1) * samples) // groups
    per_sample = layer.type == "matmul"
    sliced = tensors._replace(input=tensors.input[first:last], output_grad=tensors.output_grad[first:last],
                              weight=tensors.weight[first:last] if per_sample else tensors.weight,
                              input_grad=None if tensors.input_grad is None else tensors.input_grad[first:last])
    count = last - first
    shapes = {key: (count, *getattr(layer, key)[1:]) for key in ("input_shape", "output_grad_shape")}
    if per_sample:
        shapes["weight_shape"] = (count, *layer.weight_shape[1:])
    return dataclasses.replace(layer, **shapes), sliced, 1.0 if per_sample else 1 / groups


def map_layer(trace, configs, step, index, ops=None, group=0, groups=1):
    """Operations ``ops`` (default: all of ``layer_ops``) of one layer at one step on every configuration, of the
    whole recorded batch or (``groups`` > 1) of its ``group``-th group of samples (``group_samples``).

    Returns a list of result rows (``map_op``'s figures plus ``step``, ``layer_index``, ``group`` and its
    ``samples``).
    """
    layer = trace.layers[index]
    tensors, share = trace.load(layer.name, step), 1.0
    if groups > 1:
        layer, tensors, share = group_samples(layer, tensors, group, groups)
    plans, rows = {}, []
    for op in layer_ops(index, layer) if ops is None else ops:
        for config in configs:
            rows.append({"step": step, "layer_index": index, "group": group, "samples": layer.input_shape[0],
                         **map_op(config, layer, tensors, op, plans, weight_share=share)})
    return rows


# Work (``layer_macs`` of the tasks times the configurations) that pays for one more local worker:
# about 1 CPU s of the cheapest design's mapping (baseline), against about 0.1 CPU s that a
# forked worker costs (measured on a ResNet-18 step).
WORK_PER_JOB = 10**10
# CPU seconds per unit of work (``layer_macs``) and configuration, the three designs' average, for the stage line's
# estimate: 55 CPU s for 7 points of the three designs on a ResNet-18 digits step (1.66e9 each; docs/results/sweep.md).
SECONDS_PER_WORK = 1.6e-9


def _map_task(trace, configs, task):
    """One (step, layer, operation, group of samples, groups) task: its rows on every configuration, each with the
    configuration's index in ``configs``."""
    step, index, op, group, groups = task
    return list(enumerate(map_layer(trace, configs, step, index, [op], group, groups)))


def layer_macs(layer):
    """The multiply-accumulates of one training operation of ``layer`` on its recorded samples (each operation has
    as many): the size of its mapping work, to start the largest first."""
    geo = conv_geometry(layer, layer.input_shape, layer.weight_shape)
    (n, c), (m, kh, kw) = geo.input[:2], geo.kernel
    return n * m * (c // geo.groups) * kh * kw * math.prod(geo.output())


def estimate_seconds(work, jobs=1):
    """Wall seconds a mapping of ``work`` (``trace_work`` times the configurations) takes on ``jobs`` processes, about:
    ``SECONDS_PER_WORK`` CPU seconds per unit (an average of the designs; the dense baseline maps faster, the
    term-serial FPRaker slower)."""
    return work * SECONDS_PER_WORK / max(jobs, 1)


def configs_work(work, configs):
    """The mapping work of ``work`` (``trace_work``) on ``configs``: one unit per evaluation they do not share
    (``engine.evaluation_key``); what they do not share beyond it is cheap next to it."""
    return work * len({evaluation_key(config) for config in configs})


def trace_work(trace, steps=None):
    """The mapping work of ``steps`` (default: all) of an open ``trace``: ``layer_macs`` of each (step, layer, operation)."""
    steps = trace.steps if steps is None else steps
    return len(steps) * sum(layer_macs(layer) * len(layer_ops(index, layer)) for index, layer in enumerate(trace.layers))


def default_jobs(work, cpus):
    """Local worker processes for ``work`` (``layer_macs`` of the tasks times the configurations) on ``cpus`` CPUs.

    One per ``WORK_PER_JOB``, at most one per CPU: below that a worker costs more than it saves.
    """
    return max(1, min(cpus, work // WORK_PER_JOB))


def check_mappable(trace, configs, steps=None, skip_unsupported=False):
    """Raise ``ValueError`` where ``map_trace`` would refuse the open ``trace``: a layer of a type this version does not
    take (unless ``skip_unsupported``), a layer a configuration's dataflow cannot form, a step not recorded."""
    if trace.unsupported and not skip_unsupported:
        layer = trace.unsupported[0]
        raise ValueError(f"{trace.path}: layer {layer.name!r}: {layer.reason}; "
                         "--skip-unsupported maps the other layers")
    for layer in trace.layers:
        for dataflow in dict.fromkeys(config.dataflow for config in configs):
            check_dataflow(layer, dataflow)
    missing = sorted(set(steps or ()) - set(trace.steps))
    if missing:
        raise ValueError(f"{trace.path}: step {missing[0]} is not recorded; recorded steps are {trace.steps}")


def map_trace(trace_path, configs, steps=None, jobs=None, progress=True, dask=None, skip_unsupported=False,
              groups=1):
    """``map_each``'s rows, one configuration's after another's."""
    return [row for rows in map_each(trace_path, configs, steps, jobs, progress, dask, skip_unsupported, groups)
            for row in rows]


def map_each(trace_path, configs, steps=None, jobs=None, progress=True, dask=None, skip_unsupported=False,
             groups=1):
    """Map every layer of the trace's ``steps`` (default: all) on each configuration; per configuration (in the
    order of ``configs``, which may hold a design more than once, as a sweep's points do), its rows in trace order.
    The configurations share each task's loaded tensors, plans and, where only what comes after the passes differs
    (tiles, clock, memory, silicon), the cost model's evaluation (``engine.map_op``).

    ``groups`` > 1 maps each step's recorded samples as that many batches of consecutive samples
    (``group_samples``; rows carry their ``group``), for ``mapping.intervals`` to resample.

    ``dask``: the address of a Dask scheduler (``tcp://host:port``) whose workers map the
    tasks, reading the trace at the same path (storage they share). Otherwise ``jobs`` local
    worker processes (default: ``default_jobs``; 1 when the configurations run their cost models on
    a GPU, which one process keeps busy); ``jobs=1`` maps in this process. A trace holding layers
    of a type this version does not take (``Trace.unsupported``) is refused unless ``skip_unsupported``, and a layer
    a configuration's dataflow cannot form (``dataflow.check_dataflow``) before any work.
    """
    from dashraker.trace import open_trace

    trace = open_trace(trace_path)
    check_mappable(trace, configs, steps, skip_unsupported)
    steps = list(trace.steps if steps is None else steps)
    if groups > 1:
        fewest = min(layer.input_shape[0] for layer in trace.layers)
        if groups > fewest:
            raise ValueError(f"{trace_path}: {fewest} sample(s) recorded per step, too few for {groups} groups")
    tasks = sorted(
        ((step, index, op, group, groups) for step in steps for index, layer in enumerate(trace.layers)
         for op in layer_ops(index, layer) for group in range(groups)),
        key=lambda task: -layer_macs(trace.layers[task[1]]),
    )
    gpu = any(config.device != "cpu" for config in configs)
    work = configs_work(sum(layer_macs(trace.layers[task[1]]) for task in tasks) // groups, configs)
    if dask is None:
        jobs = min(jobs or (1 if gpu else default_jobs(work, len(os.sched_getaffinity(0)))), len(tasks))
    where = f"on the cluster {dask}" if dask is not None else f"on {jobs} process{'es' * (jobs > 1)}"
    stage(f"map {Path(trace_path).name}: {len(tasks)} operations x {len(configs)} configuration"
          f"{'s' * (len(configs) > 1)} ({', '.join(dict.fromkeys(c.design.name for c in configs))}) {where}",
          estimate_seconds(work, 1 if dask is not None else jobs))
    with progress_bar(total=len(tasks), desc="map", unit="op", disable=not progress) as bar:
        if dask is not None:
            results = executors.on_dask(_map_task, dask, str(Path(trace_path).absolute()), configs, tasks, bar)
        elif jobs <= 1:
            results = executors.in_process(_map_task, trace, configs, tasks, bar)
        elif gpu:
            results = executors.on_local_workers(_map_task, trace_path, configs, tasks, jobs, bar, "spawn")
        else:  # the smallest task here first: the workers forked after it inherit the kernels it loaded
            results = executors.in_process(_map_task, trace, configs, tasks[-1:], bar)
            results += executors.on_local_workers(_map_task, trace_path, configs, tasks[:-1], jobs, bar)
    each = [[] for _ in configs]
    for k, row in results:
        each[k].append(row)
    return [sorted(rows, key=lambda r: (r["step"], r["layer_index"], OPS.index(r["op"]), r["group"])) for rows in each]


def _sum(rows, fields):
    return {field: sum(row[field] for row in rows) for field in fields}


def totals(rows):
    """Sums per design and operation (key ``(design, op)``) and per design over all operations (``op`` "all"): cycles
    (``speedup``), run times (``time_speedup``: the dense baseline's time over the design's, DRAM included), energy
    (``energy_efficiency``), and the operations (``memory_bound_ops`` of ``ops``) and time
    (``memory_bound_time_s``) that DRAM bounds (SPEC section 9)."""
    fields = ("dense_cycles", "cycles", "values_scheduled", "energy_pj", "baseline_energy_pj", "core_energy_pj",
              "baseline_core_energy_pj", "compute_s", "dram_s", "time_s", "dense_time_s", "dram_bytes")
    out = {}
    for design in dict.fromkeys(row["design"] for row in rows):
        for op in (*OPS, "all"):
            group = [r for r in rows if r["design"] == design and op in (r["op"], "all")]
            if not group:
                continue
            total = _sum(group, fields)
            total["speedup"] = total["dense_cycles"] / total["cycles"] if total["cycles"] else 1.0
            total["time_speedup"] = total["dense_time_s"] / total["time_s"] if total["time_s"] else 1.0
            total["energy_efficiency"] = (
                total["baseline_energy_pj"] / total["energy_pj"] if total["energy_pj"] else 1.0
            )
            total["core_energy_efficiency"] = (
                total["baseline_core_energy_pj"] / total["core_energy_pj"] if total["core_energy_pj"] else 1.0
            )
            total["ops"] = len(group)
            total["memory_bound_ops"] = sum(1 for r in group if r["memory_bound"])
            total["memory_bound_time_s"] = sum(r["time_s"] for r in group if r["memory_bound"])
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
