"""``dashraker map`` when things go wrong: outputs checked first, written whole, one writer, signals end workers."""

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from dashraker.cli import main
from dashraker.mapping.config import ConfigError, load_config
from dashraker.mapping.runner import _map_task as REAL_TASK
from dashraker.outputs import OutputFolder
from process_checks import alive


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


def test_a_tile_past_the_size_guard_is_refused_before_its_synthesis(mobilenet_trace, tmp_path, monkeypatch, capsys):
    config = tmp_path / "big.yaml"
    config.write_text("rows: 4\ncols: 16\nlanes: 16\n")  # 1,024 lanes, as `dashraker verilog` refuses
    monkeypatch.setattr("dashraker.mapping.cli.with_silicon", lambda *a, **k: pytest.fail("synthesised first"))
    area = ["--area-cache", str(tmp_path / "area")]
    assert _map(mobilenet_trace, tmp_path / "o", "--config", str(config), *area) == 2
    _one_line(capsys, "baseline: a 4x16 tile of 16-lane PEs counts as 1,024 lanes.*pass --force-size to go ahead")
    assert not (tmp_path / "o").exists()
    for passes in (["--force-size"], []):  # asked for, or a tile whose figures are cached: on to its silicon
        with monkeypatch.context() as patched, pytest.raises(pytest.fail.Exception, match="synthesised first"):
            if not passes:
                patched.setattr("dashraker.mapping.silicon.unmeasured", lambda *a, **k: [])
            _map(mobilenet_trace, tmp_path / "o", "--config", str(config), *area, *passes)


@pytest.mark.parametrize("section", ["fpraker: {guard_bits: 9}", "tensordash: {scheduler: fastest}",
                                     "tensordash: {lookahead: 9}"])
def test_a_section_of_a_design_not_mapped_is_checked_too(mobilenet_trace, tmp_path, monkeypatch, capsys, section):
    config = tmp_path / "c.yaml"
    config.write_text(section + "\n")
    monkeypatch.setattr("dashraker.mapping.runner.map_trace", lambda *a, **k: pytest.fail("mapped first"))
    assert _map(mobilenet_trace, tmp_path / "o", "--config", str(config)) == 2  # --design baseline
    _one_line(capsys, rf"c\.yaml: field '{section.split(':')[0]}\.\w+': must be")


@pytest.mark.parametrize("flag", ["--out", "--area-cache"])
def test_an_empty_name_is_not_the_current_folder(mobilenet_trace, tmp_path, capsys, flag):
    args = ["map", str(mobilenet_trace), "--out", str(tmp_path / "o"), flag, ""]
    with pytest.raises(SystemExit) if flag != "--out" else contextlib.nullcontext() as exit_status:
        status = main(args)  # --out: ours; --area-cache: an argument error, as argparse gives every one
    err = capsys.readouterr().err
    assert f"{flag}: an empty name is not" in err and " . " not in err and ".:" not in err, err
    assert (status if flag == "--out" else exit_status.value.code) == 2


def test_an_unrecorded_module_is_said_before_the_work_and_in_the_report(small_trace, tmp_path, capsys):
    trace = tmp_path / "trace"
    shutil.copytree(small_trace, trace)
    manifest = json.loads((trace / "manifest.json").read_text())
    manifest["unrecorded_layers"] = [{"name": "rnn", "type": "LSTM"}]
    (trace / "manifest.json").write_text(json.dumps(manifest))
    assert _map(trace, tmp_path / "out") == 0
    err = capsys.readouterr().err
    assert f"warning: {trace}: 1 module(s) with parameters are not recorded" in err and "rnn (LSTM)" in err, err
    report = json.loads((tmp_path / "out" / "map.json").read_text())
    assert report["unrecorded_layers"] == [{"name": "rnn", "type": "LSTM"}]


def test_an_area_cache_nothing_can_be_written_in_is_refused_before_the_work(mobilenet_trace, tmp_path, monkeypatch,
                                                                             capsys):
    monkeypatch.setattr("dashraker.mapping.cli.with_silicon", lambda *a, **k: pytest.fail("synthesised first"))
    assert _map(mobilenet_trace, tmp_path / "o", "--area-cache", "/proc/dashraker-area") == 2  # compare: lanes
    _one_line(capsys, "--area-cache /proc/dashraker-area: cannot create files in /proc")


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


@pytest.mark.parametrize("signum, status, said", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_a_signal_at_the_swap_says_the_new_reports_are_in_place(mobilenet_trace, tmp_path, capsys, signal_at_swap,
                                                                 signum, status, said):
    out = tmp_path / "out"
    out.mkdir()
    (out / "map.csv").write_text("earlier\n")
    signal_at_swap(signum, out)
    assert _map(mobilenet_trace, out) == status
    _one_line(capsys, rf"^dashraker map: error: {said} \(SIG\w+\); {out} written whole before it$")
    assert sorted(p.name for p in out.iterdir()) == ["energy.png", "energy.svg", "map.csv", "map.json", "speedup.png",
                                                     "speedup.svg"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_lost_worker_is_one_line(mobilenet_trace, tmp_path, monkeypatch, capsys):
    """A worker killed at once (SIGKILL, as the out-of-memory killer does): one line, exit 2, nothing written."""
    monkeypatch.setattr("dashraker.mapping.runner._map_task", killed_at_once)  # forked workers inherit it
    assert _map(mobilenet_trace, tmp_path / "out", "--jobs", "2") == 2
    _one_line(capsys, r"error: a worker process of this run was killed or ended abruptly .* outputs left as they were")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


PARENT = os.getpid()


def killed_at_once(*args):
    """A task that kills its worker at once; in this process (the first, smallest task) it maps as ever."""
    if os.getpid() != PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return REAL_TASK(*args)


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
    assert [pid for pid in workers if alive(pid)] == []
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
    while [pid for pid in workers if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in workers if alive(pid)] == []


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
