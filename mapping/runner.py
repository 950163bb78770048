"""Maps a whole trace: one task per (step, layer, operation), spread over local processes, with a progress bar."""

import concurrent.futures
import math
import multiprocessing
import os
import signal

from tqdm import tqdm

from dashraker.mapping.dataflow import OPS, conv_geometry
from dashraker.mapping.engine import map_op

__all__ = ["layer_ops", "map_layer", "map_trace", "totals"]


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


_WORKER_TRACE = {}


def _worker_init():
    # One PyTorch thread per process: the processes are the parallelism, and spinning
    # OpenMP threads slow small tensors down many times on a busy machine.
    import torch

    torch.set_num_threads(1)


def _pool_worker_init():
    # Ctrl-C reaches the whole process group: the parent alone handles it and ends the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_init()


def _end_workers(pool):
    """Stop ``pool``'s workers now, running tasks included (``shutdown`` alone waits for them)."""
    processes = list((pool._processes or {}).values())  # no public way to reach them before Python 3.14
    for process in processes:
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.join()


def _task(trace_path, configs, step, index, op):
    from dashraker.trace import open_trace

    if trace_path not in _WORKER_TRACE:
        _WORKER_TRACE[trace_path] = open_trace(trace_path)
    return map_layer(_WORKER_TRACE[trace_path], configs, step, index, [op])


def _work(layer):
    """Rough size of a layer's mapping work (its multiply-accumulates), to start the largest first."""
    geo = conv_geometry(layer, layer.input_shape, layer.weight_shape)
    (n, c), (m, kh, kw) = geo.input[:2], geo.kernel
    return n * m * (c // geo.groups) * kh * kw * math.prod(geo.output())


def map_trace(trace_path, configs, steps=None, jobs=None, progress=True):
    """Map every layer of the trace's ``steps`` (default: all) on each configuration; rows in trace order.

    ``jobs`` worker processes (default: the CPU count); ``jobs=1`` maps in this process.
    """
    from dashraker.trace import open_trace

    trace = open_trace(trace_path)
    steps = list(trace.steps if steps is None else steps)
    missing = sorted(set(steps) - set(trace.steps))
    if missing:
        raise ValueError(f"{trace_path}: step {missing[0]} is not recorded; recorded steps are {trace.steps}")
    tasks = sorted(
        ((step, index, op) for step in steps for index, layer in enumerate(trace.layers)
         for op in layer_ops(index, layer)),
        key=lambda task: -_work(trace.layers[task[1]]),
    )
    jobs = min(jobs or os.cpu_count() or 1, len(tasks))
    bar = tqdm(total=len(tasks), desc="map", unit="op", disable=not progress)
    results = []
    if jobs <= 1:
        import torch

        threads = torch.get_num_threads()
        _worker_init()
        try:
            for step, index, op in tasks:
                results.extend(map_layer(trace, configs, step, index, [op]))
                bar.update()
        finally:
            torch.set_num_threads(threads)
    else:
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_pool_worker_init) as pool:
            try:
                futures = [pool.submit(_task, str(trace_path), configs, *task) for task in tasks]
                for future in concurrent.futures.as_completed(futures):
                    results.extend(future.result())
                    bar.update()
            except BaseException:  # a failed task, SIGINT or SIGTERM: no worker outlives the run
                _end_workers(pool)
                raise
    bar.close()
    design_order = {config.design.name: k for k, config in enumerate(configs)}
    return sorted(results, key=lambda r: (design_order[r["design"]], r["step"], r["layer_index"], OPS.index(r["op"])))


def _sum(rows, fields):
    return {field: sum(row[field] for row in rows) for field in fields}


def totals(rows):
    """Sums per design and operation (key ``(design, op)``) and per design over all operations (``op`` "all")."""
    fields = ("dense_cycles", "cycles", "values_scheduled", "energy_pj", "baseline_energy_pj", "core_energy_pj",
              "baseline_core_energy_pj", "time_s", "dram_bytes")
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
            out[design, op] = total
    return out
