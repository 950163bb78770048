"""The FPRaker tile on both simulators: outputs and cycle counts bit-exact against the golden model."""

from pathlib import Path

import pytest

from dashraker.cli import main
from dashraker.designs import DESIGNS
from dashraker.sim.runner import configuration_cases, run_tile
from dashraker.sim.toolchain import lint

COCOTB_MODULE = Path(__file__).with_name("cocotb_fpraker_tile.py")
DESIGN = DESIGNS["fpraker"]

CONFIGS = {
    "fpr_2x2x8_g3": dict(rows=2, cols=2, lanes=8, guard_bits=3, zero_block_cycles=1),
    "fpr_1x2x4_g0": dict(rows=1, cols=2, lanes=4, guard_bits=0, zero_block_cycles=1),
    "fpr_1x1x2_g3": dict(rows=1, cols=1, lanes=2, guard_bits=3, zero_block_cycles=1),
    "fpr_3x2x8_g6": dict(rows=3, cols=2, lanes=8, guard_bits=6, zero_block_cycles=1),
}
# the quick suite runs each simulator once, on a small configuration
QUICK = {("fpr_1x2x4_g0", "icarus"), ("fpr_1x1x2_g3", "verilator")}


@pytest.mark.early
@pytest.mark.parametrize("name, sim_name", configuration_cases(CONFIGS, QUICK))
def test_fpraker_tile(name, sim_name, build_cache):
    run_tile(DESIGN, DESIGN.params(**CONFIGS[name]), toplevel=name, test_module=COCOTB_MODULE,
             build_dir=build_cache / name, simulator=sim_name, seed=7, passes=10)


def test_cli_writes_lint_clean_verilog(tmp_path):
    output = tmp_path / "fpraker.v"
    assert main(["verilog", "fpraker", "--rows", "2", "--cols", "1", "--lanes", "4", "--guard-bits", "2",
                 "--zero-block-cycles", "1", "-o", str(output)]) == 0
    assert "module dashraker_fpraker" in output.read_text()
    lint(output)


@pytest.mark.parametrize("args, message", [
    (["--dtype", "fp32"], "fpraker --dtype must be bf16, not 'fp32'"),
    (["--guard-bits", "8"], "fpraker --guard-bits must be an integer in 0..7, not 8"),
    (["--lanes", "0"], "fpraker --lanes must be an integer >= 1, not 0"),
])
def test_cli_rejects_bad_parameters(args, message, tmp_path, capsys):
    assert main(["verilog", "fpraker", *args, "-o", str(tmp_path / "x.v")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.v").exists()
