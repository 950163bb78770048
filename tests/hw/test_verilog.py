"""Generated Verilog is written by the CLI and passes Verilator's -Wall lint with the documented waivers."""

import subprocess
import sys

import pytest

from dashraker.sim.toolchain import LintError, lint


@pytest.mark.parametrize("args", [
    ["baseline", "--lanes", "4", "--rows", "2", "--cols", "1", "--dtype", "bf16"],
    ["baseline", "--lanes", "2", "--dtype", "fp32"],
], ids=["baseline-bf16", "baseline-fp32"])
def test_cli_writes_lint_clean_verilog(args, tmp_path):
    output = tmp_path / "design.v"
    done = subprocess.run([sys.executable, "-m", "dashraker", "verilog", *args, "-o", str(output)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "module dashraker_baseline" in output.read_text()
    lint(output)


def test_lint_reports_real_problems(tmp_path):
    broken = tmp_path / "broken.v"
    broken.write_text("module broken(input a, output y);\n  assign y = b;\nendmodule\n")
    with pytest.raises(LintError, match="broken.v"):
        lint(broken)
