"""``trace record`` and ``trace export`` when things go wrong: nothing lost, nothing half-written, one line."""

import errno
import json
import re

import numpy as np
import pytest

from dashraker.cli import main
from dashraker.trace import open_trace, training

RECORD = ["trace", "record", "--model", "mlp", "--steps", "1", "--samples", "2", "--threads", "1", "--no-progress"]


def _one_line(capsys, message):
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert re.search(message, err), err


def _tree(path):
    return sorted((p.relative_to(path), p.read_bytes() if p.is_file() else None) for p in path.rglob("*"))


@pytest.fixture(scope="module")
def old_trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("old") / "trace"
    assert main([*RECORD, "--out", str(out)]) == 0
    return out


def test_force_replaces_only_a_trace(tmp_path, capsys):
    # issue 18: a folder holding any file named manifest.json was deleted, with everything beside it
    (tmp_path / "p" / "src").mkdir(parents=True)
    (tmp_path / "p" / "manifest.json").write_text('{"name": "x"}')
    assert main([*RECORD, "--out", str(tmp_path / "p"), "--force"]) == 2
    _one_line(capsys, r"trace folder .*p: exists, is not empty and is not replaceable; --force replaces only a trace")
    assert (tmp_path / "p" / "src").is_dir()


def test_an_interrupted_force_leaves_the_old_trace(old_trace, tmp_path, monkeypatch, capsys):
    out = tmp_path / "trace"
    out.mkdir()
    for path in old_trace.rglob("*"):
        target = out / path.relative_to(old_trace)
        target.mkdir(exist_ok=True) if path.is_dir() else target.write_bytes(path.read_bytes())
    before = _tree(out)

    def interrupted(net, dataset, total_steps, *, step_context, **kwargs):
        with step_context(1):  # step 1 is recorded, then the user presses Ctrl-C
            net(dataset.x[:4]).sum().backward()
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "train", interrupted)
    assert main([*RECORD, "--out", str(out), "--force"]) == 130
    _one_line(capsys, "interrupted")
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace"]  # no temporary sibling, no lock left


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_a_signal_at_the_swap_says_the_new_trace_is_in_place(old_trace, tmp_path, capsys, signal_at_swap, force):
    import shutil
    import signal

    out = tmp_path / "trace"
    if force:  # an earlier trace there, replaced
        shutil.copytree(old_trace, out)
        (out / "manifest.json").write_text((out / "manifest.json").read_text().replace('"losses"', '"old": 1, "losses"'))
    signal_at_swap(signal.SIGINT, out)
    assert main([*RECORD, "--out", str(out), *force]) == 130
    _one_line(capsys, rf"interrupted \(SIGINT\); {out} written whole before it$")
    assert open_trace(out).steps == [1] and '"old"' not in (out / "manifest.json").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace"]


@pytest.mark.parametrize("args, message", [
    (["--lr", "nan"], "learning rate must be a finite number > 0, not nan"),
    (["--lr", "-1"], "learning rate must be a finite number > 0, not -1"),
    (["--threads", "0"], "threads must be a positive integer, not 0"),
    (["--seq-len", "0"], "seq_len must be a positive integer, not 0"),
    (["--steps", "99999999999999999999"], r"step numbers in 1\.\.999,999"),
    (["--out", "/proc/dashraker-trace"], "cannot create files in /proc"),
])  # fmt: skip
def test_impossible_recordings_are_one_line(tmp_path, capsys, args, message):
    assert main([*RECORD, "--out", str(tmp_path / "t"), *args]) == 2
    _one_line(capsys, message)
    assert not (tmp_path / "t").exists()


def test_a_diverged_recording_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(training.F, "cross_entropy", lambda logits, y: logits.sum() * float("nan"))
    assert main([*RECORD, "--out", str(tmp_path / "t")]) == 2
    _one_line(capsys, r"training diverged: the loss is nan at step 1 .*no trace written")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys):
    def full(path, array):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr("dashraker.trace.recorder.save_npy", full)
    assert main([*RECORD, "--out", str(tmp_path / "t")]) == 2
    _one_line(capsys, r"step_000001/fcs\.0/input\.npy: No space left on device")
    assert list(tmp_path.iterdir()) == []


def test_labels_out_of_range_are_refused(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    y = np.arange(40) % 4
    y[7] = 999  # would silently train a 1000-class classifier
    np.save(tmp_path / "data" / "x.npy", np.ones((40, 8), np.float32))
    np.save(tmp_path / "data" / "y.npy", y)
    assert main([*RECORD, "--data", f"npy:{tmp_path / 'data'}", "--out", str(tmp_path / "t")]) == 2
    _one_line(capsys, r"label 999 at sample 7 is out of range: only 5 of the 1000 classes")


def test_export_is_whole_and_never_merges(old_trace, tmp_path, monkeypatch, capsys):
    out = tmp_path / "export"
    assert main(["trace", "export", "--no-progress", str(old_trace), str(out)]) == 0
    capsys.readouterr()
    first = _tree(out)
    # a second export into it is refused without --force, another network's even with it, and a foreign folder
    assert main(["trace", "export", "--no-progress", str(old_trace), str(out)]) == 2
    _one_line(capsys, "use --force to replace an export")
    for force in ([], ["--force"]):
        assert main(["trace", "export", "--no-progress", *force, "--net", "other", str(old_trace), str(out)]) == 2
        _one_line(capsys, r"holds the export of another network \(mlp\); export other into a folder of its own")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    assert main(["trace", "export", "--no-progress", "--force", str(old_trace), str(tmp_path / "mine")]) == 2
    _one_line(capsys, "--force replaces only an export")
    # a failure half-way leaves the earlier export exactly as it was
    trace = open_trace(old_trace)
    calls = []

    def failing(self, layer, step, tensor, check_finite=True):
        calls.append(tensor)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, "No space left on device", "somewhere")
        return trace.load_tensor(layer, step, tensor)

    monkeypatch.setattr(type(trace), "load_tensor", failing)
    assert main(["trace", "export", "--no-progress", "--force", str(old_trace), str(out)]) == 2
    _one_line(capsys, "No space left on device")
    assert _tree(out) == first
    monkeypatch.undo()
    (out / "mlp" / "weights" / "stale.npy").write_bytes(b"")
    assert main(["trace", "export", "--no-progress", "--force", str(old_trace), str(out)]) == 0
    assert [p.name for p in out.iterdir()] == ["mlp"] and not (out / "mlp" / "weights" / "stale.npy").exists()
    assert json.loads((old_trace / "manifest.json").read_text())["steps"] == [1]
