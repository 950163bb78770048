"""The import contracts of pyproject.toml (import-linter): the layers, no circles, RTL without PyTorch.

They run as ``make lint-imports`` and a plain ``lint-imports`` run them, from the repository root: import-linter walks
the folder ``dashraker``, whose subpackages are links to the top-level folders (SPEC section 1). The planted breaks
run over a copy of that folder whose links point at the checkout, beside one broken subpackage.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _linked_tree(where):
    """A folder ``dashraker`` under ``where`` whose entries link to the package's files and subpackage folders."""
    package = where / "dashraker"
    package.mkdir()
    for entry in (ROOT / "dashraker").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry.resolve())
    return package


def _lint(cwd):
    """``lint-imports`` as ``make lint-imports`` runs it: from ``cwd``, which Python searches first."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", str(ROOT / "pyproject.toml")], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_import_contracts_are_kept():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


def test_a_planted_circle_and_a_torch_import_break_the_contracts(tmp_path):
    package = _linked_tree(tmp_path)
    for name, plant in (("fpga", ("compare.py", "from dashraker.fpga import cli\n")),
                        ("hw", ("verilog.py", "import torch\n"))):
        (package / name).unlink()
        shutil.copytree(ROOT / "dashraker" / name, package / name, ignore=shutil.ignore_patterns("__pycache__"))
        file, line = plant
        source = package / name / file
        source.write_text(line + source.read_text())
    result = _lint(package.parent)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Contracts: 1 kept, 2 broken." in result.stdout
    assert "No cycles are allowed in dashraker.fpga." in result.stdout
    assert "- .compare -> .cli (1 import)" in result.stdout
    assert "dashraker.hw.verilog -> torch" in result.stdout
