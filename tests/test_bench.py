"""Every benchmark script still imports and builds its command line: ``--help`` of each, in one process."""

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
