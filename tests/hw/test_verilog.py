"""Generated Verilog is written by the CLI and passes Verilator's -Wall lint with the documented waivers."""

import re
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


def test_shared_verilog_elaborates_one_copy_of_each_repeated_component():
    """Four identical inverters in a chain: one module their four instances name, and the later copies never
    elaborated (the first copy twice: in the chain, and as the kept module); the logic is the whole design's."""
    from amaranth.hdl import Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from dashraker.hw.verilog import shared_verilog

    elaborated = []

    class Inverter(wiring.Component):
        a: In(4)
        y: Out(4)

        def elaborate(self, platform):
            elaborated.append(self)
            m = Module()
            m.d.comb += self.y.eq(~self.a)
            return m

    class Chain(wiring.Component):
        a: In(4)
        y: Out(4)

        def elaborate(self, platform):
            m = Module()
            value = self.a
            for i in range(4):
                m.submodules[f"inv{i}"] = inverter = Inverter()
                m.d.comb += inverter.a.eq(value)
                value = inverter.y
            m.d.comb += self.y.eq(value)
            return m

    text = shared_verilog(Chain(), "top")
    assert len(elaborated) == 2 and elaborated[0] is elaborated[1]
    assert sorted(re.findall(r"^module (\\\S+|\w+)", text, re.M)) == ["\\top.inv0", "top"]
    assert len(re.findall(r"^\s*\\top\.inv0\s+inv\d\s*\(", text, re.M)) == 4
