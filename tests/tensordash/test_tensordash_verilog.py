"""``dashraker verilog tensordash`` writes lint-clean Verilog and names bad parameters."""

import subprocess
import sys

import pytest

from dashraker.sim.toolchain import lint


def _generate(args, output):
    return subprocess.run([sys.executable, "-m", "dashraker", "verilog", "tensordash", *args, "-o", str(output)],
                          capture_output=True, text=True)


@pytest.mark.parametrize("args", [
    ["--lanes", "8", "--rows", "2", "--cols", "1", "--dtype", "bf16"],
    ["--lanes", "4", "--lookahead", "1", "--pattern", "(0,0),(1,0),(1,1)", "--dtype", "fp32"],
    ["--lanes", "8", "--scheduler", "separable2"],
    pytest.param(["--lanes", "8", "--rows", "2", "--threads", "2"], marks=pytest.mark.slow),
], ids=["t25-bf16", "h1-fp32", "separable2", "threads2"])
def test_cli_writes_lint_clean_verilog(args, tmp_path):
    output = tmp_path / "tensordash.v"
    done = _generate(args, output)
    assert done.returncode == 0, done.stderr
    assert "module dashraker_tensordash" in output.read_text()
    lint(output)


@pytest.mark.parametrize("args, message", [
    (["--pattern", "T<2,4>"], "unknown named pattern 'T<2,4>'"),
    (["--lanes", "2"], "names one slot twice with 2 lanes"),
    (["--lookahead", "1"], "beyond lookahead 1"),
    (["--scheduler", "fast"], "scheduler must be one of greedy, separable1, separable2, not 'fast'"),
])
def test_cli_names_bad_parameters(args, message, tmp_path):
    done = _generate(args, tmp_path / "x.v")
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x.v").exists()
