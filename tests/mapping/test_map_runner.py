"""Where ``map_trace`` runs the tasks: in this process, on forked local workers, on a Dask cluster; same rows."""

import dataclasses
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import numba
import pytest
import torch
from threadpoolctl import threadpool_info

from dashraker.cli import main
from dashraker.mapping import executors, runner
from dashraker.mapping.config import load_config
from dashraker.mapping.executors import limit_threads
from dashraker.mapping.runner import default_jobs, map_trace

DESIGNS = ("baseline", "tensordash")


@pytest.fixture(scope="module")
def configs():
    return [load_config(None, design) for design in DESIGNS]


@pytest.fixture(scope="module")
def in_process_rows(mobilenet_trace, configs):
    return map_trace(mobilenet_trace, configs, jobs=1, progress=False)


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes, as ``dask worker`` would run them; each is restarted by its nanny when it dies."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=logging.CRITICAL) as cluster:  # fmt: skip
        with Client(cluster, set_as_default=False) as client:
            yield cluster, client


def _one_line(capsys, message):
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert re.search(message, err), err


def test_forked_workers_give_the_in_process_rows(mobilenet_trace, configs, in_process_rows):
    rows = map_trace(mobilenet_trace, configs, jobs=2, progress=False)
    assert [r["design"] for r in rows[:1]] == ["baseline"] and len({r["design"] for r in rows}) == 2
    assert rows == in_process_rows  # every figure, in the same order


def test_default_jobs_pay_for_themselves(mobilenet_trace, configs, monkeypatch):
    assert default_jobs(runner.WORK_PER_JOB - 1, cpus=16) == 1  # less than a worker's worth: this process
    assert default_jobs(5 * runner.WORK_PER_JOB // 2, cpus=16) == 2
    assert default_jobs(100 * runner.WORK_PER_JOB, cpus=16) == 16
    assert default_jobs(100 * runner.WORK_PER_JOB, cpus=1) == 1

    # a small trace (MobileNet at 28x28, one sample) maps in this process; a large one on workers, one per CPU
    forked = []
    monkeypatch.setattr(executors, "on_local_workers",
                        lambda run, path, configs, tasks, jobs, bar, start="fork": forked.append((jobs, start)) or [])
    assert len(map_trace(mobilenet_trace, configs[:1], progress=False)) == 41 and forked == []
    monkeypatch.setattr(runner, "WORK_PER_JOB", 1)
    map_trace(mobilenet_trace, configs[:1], progress=False)
    assert forked == [(min(len(os.sched_getaffinity(0)), 41), "fork")]  # 41 tasks: at most one worker each
    # (the smallest task ran here first: the forked workers inherit what it loaded)

    # cost models on a GPU: one process by default; workers asked for are spawned (CUDA breaks in a forked child)
    on_gpu = [dataclasses.replace(configs[0], device="cuda")]
    in_process = []
    monkeypatch.setattr(executors, "in_process",
                        lambda run, trace, configs, tasks, bar: in_process.append(len(tasks)) or [])
    map_trace(mobilenet_trace, on_gpu, progress=False)
    map_trace(mobilenet_trace, on_gpu, jobs=2, progress=False)
    assert in_process == [41] and forked[1:] == [(2, "spawn")]


def test_one_setting_for_every_thread_pool():
    original = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(2)
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    try:
        before = torch.get_num_threads(), numba.get_num_threads(), [lib["num_threads"] for lib in threadpool_info()]
        restore = limit_threads(1)
        assert (torch.get_num_threads(), numba.get_num_threads()) == (1, 1)
        assert {lib["num_threads"] for lib in threadpool_info()} == {1}  # BLAS and both OpenMP runtimes
        restore()
        assert (torch.get_num_threads(), numba.get_num_threads(), [lib["num_threads"] for lib in threadpool_info()]) \
            == before  # fmt: skip
    finally:
        torch.set_num_threads(original[0])
        numba.set_num_threads(original[1])

def test_pytorch_loaded_later_takes_the_limit():
    """A map on the CPU runs without PyTorch; where a cost model loads it after ``limit_threads`` (the GPU path), it
    starts on the limit's threads, and the restore leaves the environment as it found it."""
    script = ("import os, sys; from dashraker.mapping.executors import limit_threads; restore = limit_threads(1); "
              "assert 'torch' not in sys.modules; import torch; print(torch.get_num_threads()); restore(); "
              "print(os.environ.get('OMP_NUM_THREADS'))")
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    printed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert printed.stdout.split() == ["1", "None"]


def test_a_cpu_map_starts_without_pytorch(small_trace, tmp_path):
    """``map --no-plots`` of TensorDash under both dataflows and of the baseline: PyTorch is never imported (seconds
    of start-up; the fused CPU kernels run without it), and only the CSV and JSON reports are written. (The tiles'
    synthesis is left out, as the fixture ``map_command`` does.)"""
    script = ("import sys; import dashraker.mapping.silicon as silicon; "
              "silicon.resolve_all = lambda configs, *args, **kwargs: list(configs); "
              "from dashraker.cli import main; code = main(['map', *sys.argv[1:]]); "
              "assert 'torch' not in sys.modules, 'PyTorch was imported'; sys.exit(code)")
    for dataflow in ("default", "dnnsim"):
        out = tmp_path / dataflow
        subprocess.run([sys.executable, "-c", script, str(small_trace), "--design", "baseline,tensordash", "--dataflow",
                        dataflow, "--jobs", "1", "--no-plots", "--no-progress", "--out", str(out)], check=True)
        assert sorted(path.name for path in out.iterdir()) == ["map.csv", "map.json"]


def test_dask_cluster_gives_the_in_process_rows(mobilenet_trace, configs, in_process_rows, cluster):
    rows = map_trace(mobilenet_trace, configs, progress=False, dask=cluster[0].scheduler_address)
    assert rows == in_process_rows


def _start(trace, configs, address):
    """``map_trace`` on the cluster at ``address`` in a thread; the thread, and a dict that gets its rows or error."""
    outcome = {}

    def run():
        try:
            outcome["rows"] = map_trace(trace, configs, progress=False, dask=address)
        except Exception as error:  # noqa: BLE001 (the test asserts on it)
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def _some_task_done(dask_scheduler):
    return any(task.state == "memory" for task in dask_scheduler.tasks.values())


def _map_killing_a_worker(trace, configs, cluster, client):
    """Map on the cluster, killing a worker mid-run (some tasks done, some running on it); the rows or the error."""
    client.wait_for_workers(2)
    thread, outcome = _start(trace, configs, cluster.scheduler_address)
    killed = None
    while thread.is_alive() and killed is None:
        busy = [worker for worker, keys in client.processing().items() if keys]
        done = client.run_on_scheduler(_some_task_done)
        if busy and done:
            killed = busy[0]
            os.kill(client.run(os.getpid, workers=[killed])[killed], signal.SIGKILL)
        time.sleep(0.02)
    thread.join(timeout=60)
    assert killed is not None, "the run ended before a worker could be killed"
    return outcome


def test_a_lost_worker_loses_no_row(mobilenet_trace, configs, in_process_rows, cluster):
    outcome = _map_killing_a_worker(mobilenet_trace, configs, *cluster)
    assert outcome.get("rows") == in_process_rows, outcome  # the killed worker's tasks ran again elsewhere, once


def test_tasks_whose_workers_all_died_are_one_line(mobilenet_trace, configs, cluster):
    def allowed_failures(count):
        return cluster[1].run_on_scheduler(lambda dask_scheduler: setattr(dask_scheduler, "allowed_failures", count))

    allowed_failures(0)  # the first lost worker is one too many
    try:
        outcome = _map_killing_a_worker(mobilenet_trace, configs, *cluster)
    finally:
        allowed_failures(3)
    assert isinstance(outcome.get("error"), executors.ClusterError), outcome
    message = r"scheduler tcp://\S+: every worker that ran step 1, layer \d+, \w+ died; see the workers' logs"
    assert re.fullmatch(message, str(outcome["error"]))


def test_a_lost_scheduler_is_one_line(mobilenet_trace, configs, monkeypatch):
    from distributed import LocalCluster

    # the worker is a thread of this process: its settings and trace cache stay out of the other tests
    monkeypatch.setattr(executors, "_WORKER_TRACES", {})
    for setting in ("limit_threads", "_keep_arrays_on_the_heap"):
        monkeypatch.setattr(executors, setting, lambda: None)
    cluster = LocalCluster(n_workers=1, processes=False, dashboard_address=":0", silence_logs=logging.CRITICAL)
    thread, outcome = _start(mobilenet_trace, configs, cluster.scheduler_address)
    while thread.is_alive() and not _some_task_done(cluster.scheduler):
        time.sleep(0.02)
    cluster.close()
    thread.join(timeout=60)
    assert isinstance(outcome.get("error"), executors.ClusterError), outcome
    assert re.fullmatch(r"scheduler \S+: the tasks were cancelled \(scheduler-connection-lost\)", str(outcome["error"]))


def test_a_cluster_without_workers_is_one_line(mobilenet_trace, configs, monkeypatch):
    from distributed import LocalCluster

    monkeypatch.setattr(executors, "WORKERS_TIMEOUT_S", 1)
    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0", silence_logs=logging.CRITICAL) as cluster:
        with pytest.raises(executors.ClusterError, match=r"^scheduler \S+: no worker joined in 1 s$"):
            map_trace(mobilenet_trace, configs, progress=False, dask=cluster.scheduler_address)


def test_bad_scheduler_address_is_one_line_quickly(mobilenet_trace, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 1)
    for address, message in [("tcp://127.0.0.1:1", r"scheduler tcp://127.0.0.1:1: Timed out .* after 1 s"),
                             ("localhost", "scheduler localhost: missing port number"),
                             ("udp://localhost:8786", "unknown address scheme 'udp'")]:  # fmt: skip
        start = time.monotonic()
        assert main(["map", str(mobilenet_trace), "--out", str(tmp_path / "o"), "--no-progress",
                     "--dask", address]) == 2  # fmt: skip
        assert time.monotonic() - start < 10
        _one_line(capsys, message)
    assert main(["map", str(mobilenet_trace), "--out", str(tmp_path / "o"), "--dask", "tcp://h:1",
                 "--jobs", "2"]) == 2  # fmt: skip
    _one_line(capsys, "--jobs and --dask exclude each other")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.usefixtures("sigint_delivered")
def test_a_signal_while_connecting_exits_at_once(map_command, mobilenet_trace, tmp_path, signum, status):
    """The half-made client goes with the signal: kept, it would stall the exit 10 s and print a traceback."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts the connection, never answers Dask's handshake
        command = [*map_command, str(mobilenet_trace), "--out", str(tmp_path / "o"),
                   "--no-progress", "--dask", f"tcp://127.0.0.1:{silent.getsockname()[1]}"]  # fmt: skip
        run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        silent.settimeout(60)
        connection, _ = silent.accept()  # the client is connecting now
        run.send_signal(signum)
        start = time.monotonic()
        _, err = run.communicate(timeout=60)
        connection.close()
    assert run.returncode == status and len(err.splitlines()) == 1 and "outputs left as they were" in err, err
    assert time.monotonic() - start < 4


def test_a_worker_that_cannot_open_the_trace_is_one_line(mobilenet_trace, tmp_path, cluster, capsys):
    # /proc/self/fd/N is the trace folder in this process only: the workers' fd N is something else
    fd = os.open(mobilenet_trace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        here = f"/proc/self/fd/{fd}"
        assert main(["map", here, "--out", str(tmp_path / "o"), "--no-progress", "--design", "baseline",
                     "--dask", cluster[0].scheduler_address]) == 2  # fmt: skip
    finally:
        os.close(fd)
    _one_line(capsys, rf"worker tcp://\S+ cannot open the trace {here}: ")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.usefixtures("sigint_delivered")
def test_a_signal_cancels_the_dask_tasks(map_command, mobilenet_trace, tmp_path, cluster, signum, status):
    cluster, client = cluster
    command = [*map_command, str(mobilenet_trace), "--design", "fpraker",
               "--out", str(tmp_path / "o"), "--no-progress", "--dask", cluster.scheduler_address]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not any(client.processing().values()):
        assert time.monotonic() < deadline and run.poll() is None, "no task started"
        time.sleep(0.1)
    run.send_signal(signum)
    _, err = run.communicate(timeout=60)
    assert run.returncode == status and len(err.splitlines()) == 1 and "outputs left as they were" in err, err
    tasks = lambda dask_scheduler: len(dask_scheduler.tasks)  # noqa: E731
    deadline = time.monotonic() + 10
    while client.run_on_scheduler(tasks) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.run_on_scheduler(tasks) == 0  # cancelled: nothing left to run on the cluster
    assert not (tmp_path / "o").exists()
