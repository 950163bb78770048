"""``dashraker cosim`` on a broken trace: one line naming the file, exit 2, before any RTL is built."""

import pytest

from dashraker.cli import main
from dashraker.trace import record


def test_broken_tensor_is_one_line_before_building(tmp_path, monkeypatch, capsys):
    trace = record("mlp", "digits", steps=[1], samples=1, out=tmp_path / "t", progress=False, threads=1)
    broken = trace / "step_000001" / "fcs.0" / "input.npy"
    broken.write_bytes(broken.read_bytes()[:100])  # truncated, as by a full disk
    monkeypatch.setattr("dashraker.sim.cosim.Cosim", lambda *a, **k: pytest.fail("built the RTL first"))
    assert main(["cosim", str(trace), "--layer", "fcs.0", "--op", "fwd", "--design", "baseline"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "fcs.0/input.npy: not a readable .npy file, corrupted or truncated" in err


def test_a_verilator_failure_says_why_and_leaves_no_work_folder(tmp_path):
    from dashraker.sim.cosim import CosimBuildError, compile_model

    def write(work):
        (work / "bad.v").write_text("module bad(input a; endmodule\n")
        return work / "bad.v"

    with pytest.raises(CosimBuildError, match=r"bad: Verilator failed on bad\.v:\n%Error: .*bad\.v:1:19: syntax error"):
        compile_model(write, "bad", tmp_path / "builds" / "bad", lambda text, work: text)
    assert list((tmp_path / "builds").iterdir()) == []  # the log is in the message, its folder gone
