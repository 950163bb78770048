"""No function over 80 lines outside the tests (the charter): a longer one is cut into named stages."""

import ast
import os
from pathlib import Path

import dashraker

ROOT = Path(__file__).resolve().parents[1]
LONGEST = 80  # lines, from ``def`` to the last line of the body


def _sources():
    """The package's files (its subpackages through the links in dashraker/) and the scripts beside it."""
    folders = [Path(dashraker.__file__).parent, ROOT / "bench", ROOT / "scripts", ROOT / "examples",
               ROOT / "docs" / "_ext"]
    for folder in folders:
        for where, _, files in os.walk(folder, followlinks=True):
            yield from (Path(where) / name for name in files if name.endswith(".py"))


def test_no_function_is_over_80_lines():
    long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > LONGEST:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    assert not long, "functions over 80 lines:\n" + "\n".join(long)
    assert len(list(_sources())) > 100  # the walk reaches the subpackages
