"""Where a trace's tasks run: in this process, on local worker processes made from it (which end with it, however
it ends) or on a Dask cluster. A task is ``run(trace, configs, task)``, a module-level function, returning rows."""

import concurrent.futures
import contextlib
import ctypes
import gc
import multiprocessing
import os
import signal
import sys
import threading
import time

import numba
from threadpoolctl import ThreadpoolController

from dashraker.processes import end_with_parent

__all__ = ["ClusterError", "WorkerLost", "in_process", "in_processes", "limit_threads", "on_dask", "on_local_workers"]

# Threads of every pool the models compute on (PyTorch intra-op, BLAS and OpenMP, Numba) in each
# mapping process: the processes are the parallelism; spinning threads slow small tensors down
# several times on a shared machine; and one thread never enters the OpenMP pool a forked worker
# inherits from its parent (GNU OpenMP's is not fork-safe).
THREADS = 1

CONNECT_TIMEOUT_S = 5  # a scheduler that does not answer in this time is unreachable
WORKERS_TIMEOUT_S = 30  # a cluster with no worker after this time is refused
RETRIES = 2  # a Dask task that raised runs again this many times (a lost worker's tasks are rescheduled anyway)


class ClusterError(Exception):
    """A Dask cluster that cannot map the trace (scheduler unreachable or lost, no worker, trace unreadable on one)."""


class WorkerLost(ChildProcessError):
    """A local worker process ended abruptly (a signal, the out-of-memory killer): the run stops, its outputs as they
    were; an ``OSError``, so that the command says it in one line as it does a full disk."""


WORKER_LOST = ("a worker process of this run was killed or ended abruptly (the out-of-memory killer does so with "
               "SIGKILL); the run stopped, its outputs left as they were: run it again, with fewer --jobs if memory "
               "ran short")


def limit_threads(count=THREADS):
    """Put PyTorch, Numba and every loaded BLAS/OpenMP library on ``count`` threads; returns a function restoring them.

    The one place the mapper's threads are set: the in-process run restores them at the end, workers keep them.
    PyTorch is set where it is loaded, else it loads on ``count`` threads (``OMP_NUM_THREADS``, which it reads then):
    the CPU cost models run without it, so a map starts without its import, seconds on a small trace. (Numba is
    imported at the top so that forked workers inherit it.)
    """
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch else None, numba.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    if torch:
        torch.set_num_threads(count)
    os.environ["OMP_NUM_THREADS"] = str(count)
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    libraries = ThreadpoolController().limit(limits=count)

    def restore():
        libraries.restore_original_limits()
        if before[0] is not None:
            torch.set_num_threads(before[0])
        numba.set_num_threads(before[1])
        if before[2] is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = before[2]

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


def _worker_task(run, trace_path, configs, task):
    """``run(trace, configs, task)`` in a worker process: threads, heap and trace set up once per process."""
    from dashraker.trace import open_trace

    if not _WORKER_TRACES:
        limit_threads()
        _keep_arrays_on_the_heap()
    if trace_path not in _WORKER_TRACES:
        _WORKER_TRACES[trace_path] = open_trace(trace_path)
    return run(_WORKER_TRACES[trace_path], configs, task)


def in_process(run, trace, configs, tasks, bar):
    """``run(trace, configs, task)`` for each of ``tasks`` in this process, on ``THREADS`` threads (its own count
    restored after); the rows of every task."""
    restore = limit_threads()
    try:
        results = []
        for task in tasks:
            results.extend(run(trace, configs, task))
            bar.update()
        return results
    finally:
        restore()


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
    if end_with_parent():
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


@contextlib.contextmanager
def _local_pool(jobs, start):
    """A pool of ``jobs`` worker processes that end with this one; on an error, SIGINT or SIGTERM none outlives it."""
    context = multiprocessing.get_context(start)
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_init,
                                                initargs=(os.getpid(),)) as pool:
        try:
            yield pool
        except concurrent.futures.process.BrokenProcessPool:  # the pool has ended the other workers
            _end_workers(pool)
            raise WorkerLost(WORKER_LOST) from None
        except BaseException:
            _end_workers(pool)
            raise


def on_local_workers(run, trace_path, configs, tasks, jobs, bar, start="fork"):
    """``run`` each of ``tasks`` on ``jobs`` processes forked from this one: its imports (and compiled kernels) come with them.

    ``start="spawn"`` starts fresh interpreters instead, for a GPU (CUDA cannot be used again in a forked child).
    """
    results = []
    with _local_pool(jobs, start) as pool:
        gc.freeze()  # the workers' garbage collections leave what they inherit untouched: fewer pages copied
        try:
            futures = [pool.submit(_worker_task, run, str(trace_path), configs, task) for task in tasks]  # forks them
        finally:
            gc.unfreeze()
        for future in concurrent.futures.as_completed(futures):
            results.extend(future.result())
            bar.update()
    return results


def in_processes(function, calls, jobs, bar):
    """``function(*call)`` for each of ``calls``, on ``jobs`` processes forked from this one; the results in the
    calls' order (the first error raised, the other calls stopped)."""
    with _local_pool(jobs, "fork") as pool:
        futures = [pool.submit(function, *call) for call in calls]
        for future in concurrent.futures.as_completed(futures):
            future.result()
            bar.update()
        return [future.result() for future in futures]


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


def on_dask(run, address, trace_path, configs, tasks, bar):
    """``run`` each of ``tasks`` on the workers of the Dask scheduler at ``address``; a lost worker's tasks run again elsewhere."""
    from distributed import KilledWorker, as_completed

    client = _connect(address)
    futures = {}
    try:
        _check_workers(client, trace_path)
        futures = {client.submit(_worker_task, run, trace_path, configs, task, pure=False, retries=RETRIES): task
                   for task in tasks}  # fmt: skip
        results = []
        # Results gathered by as_completed's own coroutine: this thread only waits on a condition, so a signal never
        # lands inside the client's sync() (whose cancel callback then logs a NameError: distributed 2026.8.0).
        for future, result in as_completed(futures, with_results=True, raise_errors=False, loop=client.loop):
            if future.status == "cancelled":  # the scheduler went away (or someone cancelled the tasks)
                raise ClusterError(f"scheduler {address}: the tasks were cancelled "
                                   f"({getattr(result, 'reason', result)})") from None
            if future.status == "error":
                error = result[1]
                if not isinstance(error, KilledWorker):
                    raise error.with_traceback(result[2])
                step, index, op, group, groups = futures[future]
                part = f" (group {group + 1} of {groups})" if groups > 1 else ""
                raise ClusterError(f"scheduler {address}: every worker that ran step {step}, layer {index}, "
                                   f"{op}{part} died; see the workers' logs") from None  # fmt: skip
            results.extend(result)
            bar.update()
        return results
    finally:  # done, failed, SIGINT or SIGTERM: nothing left running on the cluster
        client.cancel(list(futures))
        client.close()
