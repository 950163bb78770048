"""Maps 5 ResNet-18 training steps in this process, on 2 forked workers and on a 2-worker Dask LocalCluster; same rows?

    .venv/bin/python bench/map_dask.py [--trace DIR] [--designs baseline,tensordash,fpraker]

Without ``--trace`` it records one (``build/bench/resnet18-5steps``, reused when present):
ResNet-18 on the digits data (32x32) at batch 16, optimizer steps 1 to 5, all 16 samples.
Every design is mapped in one call per way, and the rows of each way must equal those of
``jobs=1``. Printed per way: wall and CPU seconds of the mapping call (this process, its
workers and, for Dask, the worker processes, measured on them), and for Dask also with
the cluster's start and stop (its worker processes start fresh and import everything).
"""

import argparse
import logging
import resource
import time
from pathlib import Path

from map_resnet18 import _cpu_s

from dashraker.mapping.config import load_config
from dashraker.mapping.runner import map_trace

STEPS = [1, 2, 3, 4, 5]


def _self_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _trace(path):
    from dashraker.trace import record

    if path is None:
        path = Path("build/bench/resnet18-5steps")
        if not (path / "manifest.json").is_file():
            print(f"recording 5 ResNet-18 steps (batch 16) into {path} ...", flush=True)
            record("resnet18", "digits", steps=STEPS, samples=16, out=path, batch_size=16, progress=False)
    return Path(path)


def _local(trace, configs, jobs):
    """Rows, wall s and CPU s (this process and its joined workers) of ``map_trace`` with ``jobs``."""
    start, cpu = time.perf_counter(), _cpu_s()
    rows = map_trace(trace, configs, jobs=jobs, progress=False)
    return rows, time.perf_counter() - start, _cpu_s() - cpu


def _dask(trace, configs):
    """Rows, wall s and CPU s of ``map_trace`` on a 2-worker LocalCluster; both times with its start and stop."""
    from distributed import Client, LocalCluster

    start, cpu = time.perf_counter(), _cpu_s()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                           silence_logs=logging.ERROR)
    with cluster, Client(cluster, set_as_default=False) as client:
        workers = client.run(_self_cpu_s)
        map_start, map_cpu = time.perf_counter(), _self_cpu_s()
        rows = map_trace(trace, configs, progress=False, dask=cluster.scheduler_address)
        map_wall, map_cpu = time.perf_counter() - map_start, _self_cpu_s() - map_cpu
        map_cpu += sum(client.run(_self_cpu_s)[worker] - before for worker, before in workers.items())
    return rows, map_wall, map_cpu, time.perf_counter() - start, _cpu_s() - cpu  # the workers are joined now


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", help="ResNet-18 trace folder (default: record one into build/bench/resnet18-5steps)")
    parser.add_argument("--designs", default="baseline,tensordash,fpraker")
    args = parser.parse_args()
    trace = _trace(args.trace)
    configs = [load_config(None, design) for design in args.designs.split(",")]
    print(f"{args.designs} on {trace}")
    print(f"{'way':<34} {'wall s':>8} {'CPU s':>8}  rows")
    reference, wall, cpu = _local(trace, configs, 1)
    print(f"{'jobs=1 (this process)':<34} {wall:>8.1f} {cpu:>8.1f}  {len(reference)}", flush=True)
    differ = []
    for way, (rows, *times) in [("jobs=2 (forked workers)", _local(trace, configs, 2)),
                                ("Dask LocalCluster, 2 workers", _dask(trace, configs))]:  # fmt: skip
        print(f"{way:<34} {times[0]:>8.1f} {times[1]:>8.1f}  {'same' if rows == reference else 'DIFFER'}")
        if times[2:]:
            print(f"{'  with cluster start and stop':<34} {times[2]:>8.1f} {times[3]:>8.1f}", flush=True)
        differ += [way] if rows != reference else []
    if differ:
        raise SystemExit(f"rows differ from jobs=1: {', '.join(differ)}")

if __name__ == "__main__":
    main()
