"""Maps a whole trace: one task per (step, layer, operation), in this process, on local worker processes forked
from it or on a Dask cluster, with a progress bar."""

import concurrent.futures
import ctypes
import gc
import math
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import numba
import torch
from threadpoolctl import ThreadpoolController
from tqdm import tqdm

from dashraker.mapping.dataflow import OPS, check_dataflow, conv_geometry
from dashraker.mapping.engine import map_op

__all__ = ["ClusterError", "default_jobs", "layer_ops", "limit_threads", "map_layer", "map_trace", "totals"]


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


# Threads of every pool the models compute on (PyTorch intra-op, BLAS and OpenMP, Numba) in each
# mapping process: the processes are the parallelism; spinning threads slow small tensors down
# several times on a shared machine; and one thread never enters the OpenMP pool a forked worker
# inherits from its parent (GNU OpenMP's is not fork-safe).
THREADS = 1

# Work (``_work`` of the tasks times the configurations) that pays for one more local worker:
# about 1 CPU s of the cheapest design's mapping (baseline), against about 0.1 CPU s that a
# forked worker costs (measured on a ResNet-18 step).
WORK_PER_JOB = 10**10

CONNECT_TIMEOUT_S = 5  # a scheduler that does not answer in this time is unreachable
WORKERS_TIMEOUT_S = 30  # a cluster with no worker after this time is refused
RETRIES = 2  # a Dask task that raised runs again this many times (a lost worker's tasks are rescheduled anyway)


class ClusterError(Exception):
    """A Dask cluster that cannot map the trace (scheduler unreachable or lost, no worker, trace unreadable on one)."""


def limit_threads(count=THREADS):
    """Put PyTorch, Numba and every loaded BLAS/OpenMP library on ``count`` threads; returns a function restoring them.

    The one place the mapper's threads are set: the in-process run restores them at the end, workers keep them.
    (The imports are at the top so that forked workers inherit them.)
    """
    before = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(count)
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    libraries = ThreadpoolController().limit(limits=count)

    def restore():
        libraries.restore_original_limits()
        torch.set_num_threads(before[0])
        numba.set_num_threads(before[1])

    return restore


def _keep_arrays_on_the_heap():
    """glibc: arrays up to 32 MiB come from the heap, and freed memory stays there up to 256 MiB.

    Otherwise every array is an ``mmap`` whose pages the kernel zeroes on first touch, freed by
    ``munmap``: Dask's nanny sets ``MALLOC_TRIM_THRESHOLD_``, which turns glibc's adaptive
    threshold off, and its workers took 3x the CPU seconds (mostly system time) of this
    process. Measured on a ResNet-18 step: 0.8x the CPU of glibc's default, peak memory +3%.
    """
    libc = ctypes.CDLL(None)
    if hasattr(libc, "mallopt"):  # glibc and musl; a no-op where unsupported
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD


_WORKER_TRACES = {}  # per worker process (forked or Dask's): the traces it opened, by path


def _worker_task(trace_path, configs, task):
    """One (step, layer, operation) task in a worker process: threads, heap and trace set up once per process."""
    from dashraker.trace import open_trace

    if not _WORKER_TRACES:
        limit_threads()
        _keep_arrays_on_the_heap()
    if trace_path not in _WORKER_TRACES:
        _WORKER_TRACES[trace_path] = open_trace(trace_path)
    step, index, op = task
    return map_layer(_WORKER_TRACES[trace_path], configs, step, index, [op])


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


def _in_process(trace, configs, tasks, bar):
    """Map ``tasks`` in this process, on ``THREADS`` threads (its own count restored after)."""
    restore = limit_threads()
    try:
        results = []
        for step, index, op in tasks:
            results.extend(map_layer(trace, configs, step, index, [op]))
            bar.update()
        return results
    finally:
        restore()


PR_SET_PDEATHSIG = 1  # Linux prctl(2): the signal a process gets when the thread that made it ends


def _worker_init(parent):
    # Ctrl-C reaches the whole process group: the parent alone handles it and ends the workers,
    # with SIGTERM, which must end a worker rather than raise the parent's ``Terminated`` in it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _end_with_parent(parent)


def _end_with_parent(parent):
    """End this worker when its parent ``parent`` (a pid) dies, even by SIGKILL (an out-of-memory kill, a batch
    system's), which no handler of the parent sees: Linux delivers SIGKILL to it then (``PR_SET_PDEATHSIG``; the
    pool makes its workers from the parent's main thread, whose end is the parent's). Elsewhere a thread polls
    ``os.getppid()``, which changes when the parent is gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    if hasattr(libc, "prctl") and libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
        if os.getppid() != parent:  # it died before the request took effect
            os._exit(1)
        return

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _end_workers(pool):
    """Stop ``pool``'s workers now, running tasks included (``shutdown`` alone waits for them)."""
    processes = list((pool._processes or {}).values())  # no public way to reach them before Python 3.14
    for process in processes:
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.join()


def _on_local_workers(trace_path, configs, tasks, jobs, bar, start="fork"):
    """Map ``tasks`` on ``jobs`` processes forked from this one: its imports (and compiled kernels) come with them.

    ``start="spawn"`` starts fresh interpreters instead, for a GPU (CUDA cannot be used again in a forked child).
    """
    context = multiprocessing.get_context(start)
    results = []
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_init,
                                                initargs=(os.getpid(),)) as pool:
        try:
            gc.freeze()  # the workers' garbage collections leave what they inherit untouched: fewer pages copied
            try:
                futures = [pool.submit(_worker_task, str(trace_path), configs, task) for task in tasks]  # forks them
            finally:
                gc.unfreeze()
            for future in concurrent.futures.as_completed(futures):
                results.extend(future.result())
                bar.update()
        except BaseException:  # a failed task, SIGINT or SIGTERM: no worker outlives the run
            _end_workers(pool)
            raise
    return results


def _connect(address):
    """A Dask client of the scheduler at ``address``, or a ClusterError within ``CONNECT_TIMEOUT_S``."""
    from distributed import Client

    try:
        return Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except BaseException as error:  # unreachable, malformed, or SIGINT/SIGTERM while connecting
        _close_half_made(error.__traceback__, Client)
        if isinstance(error, (OSError, ValueError)):
            raise ClusterError(f"scheduler {address}: {error}") from None
        raise


def _close_half_made(traceback, cls):
    """Close the ``cls`` whose constructor raised ``traceback``: left to the exit, it waits 10 s, prints a traceback."""
    while traceback is not None:
        made = traceback.tb_frame.f_locals.get("self")
        if isinstance(made, cls):
            made.close()
            return
        traceback = traceback.tb_next


def _trace_error(path):
    """On a worker: why the trace at ``path`` cannot be opened there, or None."""
    from dashraker.trace import TraceError, open_trace

    try:
        open_trace(path)
    except (TraceError, OSError) as error:
        return str(error)
    return None


def _check_workers(client, trace_path):
    """Every worker opens the trace (on storage they share), or a ClusterError names the first that cannot."""
    try:
        client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
    except TimeoutError:
        raise ClusterError(f"scheduler {client.scheduler.address}: no worker joined in {WORKERS_TIMEOUT_S} s") from None
    for worker, error in sorted(client.run(_trace_error, trace_path, on_error="return").items()):
        if error is not None:
            raise ClusterError(f"worker {worker} cannot open the trace {trace_path}: {error}")


def _on_dask(address, trace_path, configs, tasks, bar):
    """Map ``tasks`` on the workers of the Dask scheduler at ``address``; a lost worker's tasks run again elsewhere."""
    from distributed import KilledWorker, as_completed
    from distributed.client import FutureCancelledError

    client = _connect(address)
    futures = {}
    try:
        _check_workers(client, trace_path)
        futures = {client.submit(_worker_task, trace_path, configs, task, pure=False, retries=RETRIES): task
                   for task in tasks}  # fmt: skip
        results = []
        for future in as_completed(futures, loop=client.loop):
            try:
                results.extend(future.result())
            except KilledWorker:
                step, index, op = futures[future]
                raise ClusterError(f"scheduler {address}: every worker that ran step {step}, layer {index}, "
                                   f"{op} died; see the workers' logs") from None  # fmt: skip
            except FutureCancelledError as error:  # the scheduler went away (or someone cancelled the tasks)
                raise ClusterError(f"scheduler {address}: the tasks were cancelled ({error.reason})") from None
            bar.update()
        return results
    finally:  # done, failed, SIGINT or SIGTERM: nothing left running on the cluster
        client.cancel(list(futures))
        client.close()


def map_trace(trace_path, configs, steps=None, jobs=None, progress=True, scheduler=None, skip_unsupported=False):
    """Map every layer of the trace's ``steps`` (default: all) on each configuration; rows in trace order.

    ``scheduler``: the address of a Dask scheduler (``tcp://host:port``) whose workers map the
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
        if scheduler is not None:
            results = _on_dask(scheduler, str(Path(trace_path).absolute()), configs, tasks, bar)
        else:
            gpu = any(config.device != "cpu" for config in configs)
            work = sum(_work(trace.layers[index]) for _, index, _ in tasks) * len(configs)
            jobs = min(jobs or (1 if gpu else default_jobs(work, len(os.sched_getaffinity(0)))), len(tasks))
            if jobs <= 1:
                results = _in_process(trace, configs, tasks, bar)
            elif gpu:
                results = _on_local_workers(trace_path, configs, tasks, jobs, bar, "spawn")
            else:  # the smallest task here first: the workers forked after it inherit the kernels it loaded
                results = _in_process(trace, configs, tasks[-1:], bar)
                results += _on_local_workers(trace_path, configs, tasks[:-1], jobs, bar)
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
            cycle_parts = [row["cycle_breakdown"] for row in group if row.get("cycle_breakdown")]
            if cycle_parts:
                total["cycle_breakdown"] = {key: sum(part[key] for part in cycle_parts) for key in cycle_parts[0]}
            out[design, op] = total
    return out
