"""``dashraker trace record|check|export`` end to end on real data, and its one-line errors."""

import re
import socket

import pytest

from dashraker.cli import main
from dashraker.trace import open_trace


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test: nothing may be downloaded."""

    def refuse(*args, **kwargs):
        raise AssertionError("a network connection was attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_record_check_export(tmp_path, capsys, no_network, monkeypatch):
    monkeypatch.setattr("dashraker.progress.on_terminal", lambda: True)  # bars are drawn on a terminal only
    out = tmp_path / "trace"
    argv = ["trace", "record", "--model", "mlp", "--data", "digits", "--steps", "2,3", "--samples", "3"]
    assert main([*argv, "--batch-size", "8", "--threads", "1", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "loss=" in captured.err and "3/3" in captured.err  # the progress bar shows the loss
    trace = open_trace(out)
    assert trace.steps == [2, 3] and trace.manifest["data"] == "digits" and len(trace.manifest["losses"]) == 3
    assert [(layer.name, layer.input_shape) for layer in trace.layers] == [
        ("fcs.0", (3, 3072)),
        ("fcs.1", (3, 256)),
        ("fcs.2", (3, 128)),
    ]
    assert main(["trace", "check", str(out)]) == 0
    assert "ok, 3 layers x 2 steps, 18 tensors" in capsys.readouterr().out
    assert main(["trace", "export", "--format", "dnnsim", "--no-progress", str(out), str(tmp_path / "dnnsim")]) == 0
    assert (tmp_path / "dnnsim" / "mlp" / "outGrad" / "fc2-0-2-outGrad.npy").is_file()  # fcs.2 is the third layer
    # The folder now holds a trace: a second record needs --force.
    assert main([*argv, "--no-progress", "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    assert main([*argv, "--no-progress", "--force", "--threads", "1", "--out", str(out)]) == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "alexnet", "--steps", "1"], "unknown model 'alexnet'"),
        (["--model", "mlp", "--steps", "1,x"], "--steps takes step numbers"),
        (["--model", "mlp", "--steps", "0"], "steps must be a non-empty list"),
        (["--model", "mlp", "--steps", "1", "--samples", "99"], "need 1 <= samples <= batch_size"),
        (["--model", "transformer", "--steps", "1"], "model 'transformer' takes tokens data"),
        (["--model", "mlp", "--steps", "1", "--data", "pystdlib"], "model 'mlp' takes tensors data"),
        (["--model", "mlp", "--steps", "1", "--prune", "1.5"], r"prune sparsity must be in \[0, 1\)"),
    ],
)
def test_record_errors(tmp_path, capsys, args, message):
    assert main(["trace", "record", "--no-progress", "--out", str(tmp_path / "t"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dashraker trace: error:") and len(err.splitlines()) == 1
    assert re.search(message, err)


def test_check_not_a_trace(tmp_path, capsys):
    assert main(["trace", "check", str(tmp_path)]) == 2
    assert "manifest.json: missing file" in capsys.readouterr().err
