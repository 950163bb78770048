"""The import contracts of pyproject.toml (import-linter): the layers, no circles, RTL without PyTorch.

import-linter finds a package's modules by walking its folder, and ``dashraker``'s subpackages live in the
top-level folders that setup.py maps (SPEC section 1); so the contracts run over a folder ``dashraker`` of
symbolic links to those folders, which Python finds first on ``PYTHONPATH``.
"""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _folders():
    """setup.py's ``FOLDERS``: subpackage -> folder."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    assignment = next(node for node in tree.body if isinstance(node, ast.Assign) and node.targets[0].id == "FOLDERS")
    return ast.literal_eval(assignment.value)


def _linked_tree(where):
    """A folder ``dashraker`` under ``where`` whose entries link to the package's files and subpackage folders."""
    package = where / "dashraker"
    package.mkdir()
    for entry in (ROOT / "dashraker").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in _folders().items():
        if name != "dashraker":
            (package / name.split(".")[-1]).symlink_to(ROOT / folder)
    return package


def _lint(tree):
    env = {**os.environ, "PYTHONPATH": str(tree.parent)}
    # run from the tree's parent, so that the checkout's own folder `dashraker` is not found first
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", str(ROOT / "pyproject.toml")], cwd=tree.parent, env=env,
                          capture_output=True, text=True, timeout=300)


def test_import_contracts_are_kept(tmp_path):
    result = _lint(_linked_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


def test_a_planted_circle_and_a_torch_import_break_the_contracts(tmp_path):
    package = _linked_tree(tmp_path)
    for name, plant in (("fpga", ("compare.py", "from dashraker.fpga import cli\n")),
                        ("hw", ("verilog.py", "import torch\n"))):
        (package / name).unlink()
        shutil.copytree(ROOT / _folders()[f"dashraker.{name}"], package / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
        file, line = plant
        source = package / name / file
        source.write_text(line + source.read_text())
    result = _lint(package)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Contracts: 1 kept, 2 broken." in result.stdout
    assert "No cycles are allowed in dashraker.fpga." in result.stdout
    assert "- .compare -> .cli (1 import)" in result.stdout
    assert "dashraker.hw.verilog -> torch" in result.stdout
