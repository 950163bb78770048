"""Every benchmark script still imports and builds its command line: ``--help`` of each, in one process; the
training study runs a few steps."""

import json
import runpy
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
# scripts run as programs; the others are modules that one of them loads (cosim_cocotb.py: cosim_speed.py's cocotb side)
SCRIPTS = sorted(path for path in BENCH.glob("*.py") if 'if __name__ == "__main__":' in path.read_text())


def test_every_script_is_found():
    assert len(SCRIPTS) >= 15
    assert {path.name for path in BENCH.glob("*.py")} - {path.name for path in SCRIPTS} == {"cosim_cocotb.py"}


@pytest.mark.parametrize("script", SCRIPTS, ids=[path.stem for path in SCRIPTS])
def test_help(script, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(script), "--help"])
    monkeypatch.syspath_prepend(str(BENCH))
    with pytest.raises(SystemExit) as ended:
        runpy.run_path(str(script), run_name="__main__")
    assert ended.value.code == 0
    printed = capsys.readouterr().out
    assert printed.startswith("usage: ") and "--help" in printed


def test_training_study_runs_every_arithmetic(tmp_path, monkeypatch, capsys):
    """Two steps of batch 2 with the references and every tile arithmetic: histories, plot and summary."""
    monkeypatch.syspath_prepend(str(BENCH))
    study = runpy.run_path(str(BENCH / "training_study.py"))
    assert study["main"]([str(tmp_path / "out"), "--steps", "2", "--batch", "2"]) == 0
    histories = json.loads((tmp_path / "out" / "training_study.json").read_text())
    assert list(histories) == ["fp32", "bf16", "term-serial", "tree", "fused"]
    assert all(len(history["loss"]) == 2 and history["seconds"] > 0 for history in histories.values())
    assert (tmp_path / "out" / "training_study.png").stat().st_size > 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[-7].split()[:2] == ["mode", "final"] and rows[-2].split()[0] == "fused"
