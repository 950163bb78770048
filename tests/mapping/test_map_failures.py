"""``dashraker map`` when things go wrong: outputs checked first, written whole, one writer, signals end workers."""

import errno
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from dashraker.cli import main
from dashraker.mapping.config import ConfigError, load_config
from dashraker.outputs import OutputFolder


def _one_line(capsys, message):
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert re.search(message, err), err


def _map(trace, out, *more):
    return main(["map", str(trace), "--design", "baseline", "--out", str(out), "--jobs", "1", "--no-progress", *more])


@pytest.mark.parametrize("out, message", [
    ("file", "--out .*file: is a file, not a folder"),
    ("", "--out: an empty name is not a folder"),
    ("/proc/dashraker-map", "cannot create files in /proc"),
    ("foreign", "exists, is not empty and is not replaceable"),
])  # fmt: skip
def test_out_is_checked_before_any_work(mobilenet_trace, tmp_path, monkeypatch, capsys, out, message):
    (tmp_path / "file").write_text("x")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "thesis.tex").write_text("x")
    monkeypatch.setattr("dashraker.mapping.runner.map_trace", lambda *a, **k: pytest.fail("mapped first"))
    assert _map(mobilenet_trace, tmp_path / out if out in ("file", "foreign") else out) == 2
    _one_line(capsys, message)


def test_design_and_step_lists(mobilenet_trace, tmp_path, capsys):
    assert main(["map", str(mobilenet_trace), "--design", "", "--out", str(tmp_path / "o")]) == 2
    _one_line(capsys, "--design: no design named")
    assert _map(mobilenet_trace, tmp_path / "o", "--step", "1,7") == 2  # a comma list, as record's --steps
    _one_line(capsys, "step 7 is not recorded")


def test_outputs_replaced_whole_or_not_at_all(mobilenet_trace, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    assert _map(mobilenet_trace, out) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def full(path, rows):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr("dashraker.mapping.report.plot_energy", full)  # after map.csv and map.json are written
    capsys.readouterr()
    assert _map(mobilenet_trace, out) == 2
    _one_line(capsys, "energy.png: No space left on device")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_second_run_on_one_out_is_refused(mobilenet_trace, tmp_path, capsys):
    with OutputFolder(tmp_path / "out", "--out"):
        assert _map(mobilenet_trace, tmp_path / "out") == 2
    _one_line(capsys, rf"in use by pid {os.getpid()} on .*; wait for it to finish")


def test_partial_config_merged_and_non_finite_refused(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("design: fpraker\nfpraker: {guard_bits: 2}\nmemory: {dram_gbps: 51.2}\n")
    config = load_config(path)
    default = load_config(None, "fpraker")
    assert (config.params["guard_bits"], config.memory.dram_gbps) == (2, 51.2)
    assert (config.tiles, config.params["lanes"], config.memory.global_buffer_kib) == \
        (default.tiles, default.params["lanes"], default.memory.global_buffer_kib)  # fmt: skip
    path.write_text("memory: {tile_buffer_kib: .nan}\n")
    with pytest.raises(ConfigError, match=r"mine\.yaml: field 'memory\.tile_buffer_kib': must be a number, not nan"):
        load_config(path)


def _children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as file:
        return [int(child) for child in file.read().split()]


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.usefixtures("sigint_delivered")
def test_a_signal_ends_the_workers_and_keeps_the_outputs(map_command, mobilenet_trace, tmp_path, signum, status):
    out = tmp_path / "out"
    out.mkdir()
    (out / "map.csv").write_text("earlier\n")
    command = [*map_command, str(mobilenet_trace), "--design", "fpraker",
               "--out", str(out), "--jobs", "2", "--no-progress"]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(workers := _children(run.pid)) < 2 and time.monotonic() < deadline:  # the 2 forked workers
        time.sleep(0.2)
    time.sleep(2)  # the workers are mapping
    run.send_signal(signum)
    _, err = run.communicate(timeout=60)
    assert run.returncode == status and len(err.splitlines()) == 1 and "outputs left as they were" in err, err
    time.sleep(0.5)
    assert [pid for pid in workers if _alive(pid)] == []
    assert [p.name for p in out.iterdir()] == ["map.csv"] and (out / "map.csv").read_text() == "earlier\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_sigkill_of_the_parent_ends_the_workers(map_command, mobilenet_trace, tmp_path):
    """A parent killed with SIGKILL (an out-of-memory kill, a batch system's) handles nothing: its workers end by
    themselves rather than idle under PID 1."""
    command = [*map_command, str(mobilenet_trace), "--design", "fpraker",
               "--out", str(tmp_path / "out"), "--jobs", "2", "--no-progress"]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(workers := _children(run.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(workers) == 2
    time.sleep(1)
    run.kill()
    run.wait(timeout=30)
    deadline = time.monotonic() + 10
    while [pid for pid in workers if _alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in workers if _alive(pid)] == []


def test_a_worker_whose_parent_is_already_gone_ends():
    """The parent may die before the worker asks to follow it: the worker sees another parent and ends."""
    code = "from dashraker.mapping.executors import _end_with_parent; _end_with_parent(-1); import time; time.sleep(60)"
    run = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert run.returncode == 1


def test_dataflow_preset_from_config_and_cli(mobilenet_trace, tmp_path, monkeypatch, capsys):
    path = tmp_path / "mine.yaml"
    path.write_text("dataflow: dnnsim\n")
    assert (load_config(None).dataflow, load_config(path).dataflow) == ("default", "dnnsim")
    path.write_text("dataflow: caffe\n")
    assert _map(mobilenet_trace, tmp_path / "o", "--config", str(path)) == 2
    _one_line(capsys, r"mine\.yaml: field 'dataflow': must be one of \['default', 'dnnsim'\], not 'caffe'")
    seen = []

    def record(trace, configs, *rest, **options):
        seen.extend(configs)
        raise ValueError("recorded")

    monkeypatch.setattr("dashraker.mapping.runner.map_trace", record)
    assert _map(mobilenet_trace, tmp_path / "p", "--dataflow", "dnnsim") == 2
    assert [c.dataflow for c in seen] == ["dnnsim"]


def test_area_cache_checked_before_mapping(mobilenet_trace, tmp_path, monkeypatch, capsys):
    (tmp_path / "cache").write_text("")
    monkeypatch.setattr("dashraker.mapping.runner.map_trace", lambda *a, **k: pytest.fail("mapped"))
    assert _map(mobilenet_trace, tmp_path / "o", "--compare", "iso-area", "--area-cache", str(tmp_path / "cache")) == 2
    _one_line(capsys, r"--area-cache .*cache: is a file, not a folder")
    assert not (tmp_path / "o").exists()
