"""``dashraker verilog`` and ``fpga`` refuse what cannot be done before the long work, in one line."""

import subprocess
import sys

import pytest

from dashraker.cli import main


def _one_line(capsys, text):
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and text in err, err


def test_verilog_to_a_folder_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "build").mkdir()
    assert main(["verilog", "baseline", "--lanes", "1", "-o", "build"]) == 2
    _one_line(capsys, "--out build: is a folder; give a file name")
    assert [p.name for p in tmp_path.rglob("*")] == ["build"]


@pytest.mark.parametrize("command", [["verilog", "baseline", "-o", "x.v"], ["fpga", "baseline", "--out", "f"]])
def test_size_guard_before_elaboration(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("dashraker.designs.descriptor.Design.tile", lambda *a: pytest.fail("elaborated"))
    assert main([*command, "--lanes", "1024"]) == 2
    _one_line(capsys, "1,024 lanes, estimated 3 CPU minutes to generate (limit 512 lanes); pass --force-size")
    assert list(tmp_path.iterdir()) == []


def test_fpga_refuses_a_design_too_big_for_the_part_before_synthesis(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("dashraker.designs.descriptor.Design.tile", lambda *a: pytest.fail("elaborated"))
    assert main(["fpga", "baseline", "--lanes", "8", "--device", "ice40-hx1k", "--out", str(tmp_path / "f")]) == 2
    _one_line(capsys, "8 lanes need at least 4,000 LUTs (500 per lane) and ice40-hx1k has 1,280; refused before synthesis")


def test_help_imports_no_heavy_package():
    # issue 18: `dashraker --help` took 3.6-4.9 s because building the parser imported torch
    code = ("import sys; from dashraker.cli import build_parser; build_parser(); "
            "print(sorted({'torch', 'matplotlib', 'sklearn', 'cocotb', 'pyverilator'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
