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


def test_lookahead_has_an_upper_bound_and_the_size_guard_counts_the_window(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("dashraker.designs.descriptor.Design.tile", lambda *a: pytest.fail("elaborated"))
    assert main(["verilog", "tensordash", "--lookahead", "10", "-o", "x.v"]) == 2
    _one_line(capsys, "tensordash --lookahead must be an integer in 0..7, not 10")
    # 4x4 PEs of 16 lanes (256 lanes, under the limit) with a window of 8 steps count as 256 * 8 / 3 lanes
    assert main(["verilog", "tensordash", "--rows", "4", "--cols", "4", "--lookahead", "7", "-o", "x.v"]) == 2
    _one_line(capsys, "tensordash: a 4x4 tile of 16-lane PEs with a window of 8 steps (lookahead 7) counts as 683 "
                      "lanes, estimated 2 CPU minutes to generate (limit 512 lanes)")
    assert list(tmp_path.iterdir()) == []


def test_cosim_has_the_size_guard_before_building(tmp_path, monkeypatch, capsys):
    """A tile of 1,024-lane PEs ran 487 s before an Amaranth assertion: refused at once, exit 2."""
    from dashraker.trace import record

    trace = record("mlp", "digits", [1], 1, tmp_path / "t", batch_size=4, progress=False, threads=1)
    monkeypatch.setattr("dashraker.sim.cosim.Cosim.__init__", lambda *a, **k: pytest.fail("built"))
    assert main(["cosim", str(trace), "--layer", "fcs.0", "--op", "fwd", "--design", "fpraker", "--lanes", "1024",
                 "--no-progress"]) == 2
    _one_line(capsys, "fpraker: a 1x1 tile of 1024-lane PEs counts as 1,024 lanes, estimated 3 CPU minutes to "
                      "generate (limit 512 lanes); pass --force-size to go ahead")


def test_a_module_name_verilog_cannot_parse_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("dashraker.designs.descriptor.Design.tile", lambda *a: pytest.fail("elaborated"))
    assert main(["verilog", "baseline", "--lanes", "2", "--name", "1bad name", "-o", "x.v"]) == 2
    _one_line(capsys, "--name '1bad name': a Verilog module name is a letter or _ then letters, digits, _ or $")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag, message", [("--json", "--json sub: is a folder; give a file name"),
                                           ("--out", "--out f: is a file, not a folder")])
def test_area_outputs_are_checked_before_synthesis(tmp_path, monkeypatch, capsys, flag, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "f").write_text("")
    monkeypatch.setattr("dashraker.fpga.area.design_area", lambda *a: pytest.fail("synthesised"))
    assert main(["area", "baseline", "--lanes", "2", flag, "sub" if flag == "--json" else "f"]) == 2
    _one_line(capsys, message)
