"""The console command: every subcommand has --help, and user errors are one clear line."""

import subprocess
import sys

import pytest

from dashraker.cli import COMMANDS, build_parser


def _dashraker(*args):
    return subprocess.run([sys.executable, "-m", "dashraker", *args], capture_output=True, text=True)


def _subcommand_paths(parser, prefix=()):
    """Every (sub)command path of the argument parser, e.g. ('verilog', 'baseline')."""
    for action in parser._actions:
        for name, sub in getattr(action, "choices", None).items() if hasattr(action, "_name_parser_map") else ():
            yield (*prefix, name)
            yield from _subcommand_paths(sub, (*prefix, name))


def test_every_command_is_registered():
    paths = list(_subcommand_paths(build_parser()))
    assert set(COMMANDS) <= {path[0] for path in paths}


@pytest.mark.parametrize("path", [(), *_subcommand_paths(build_parser())], ids=lambda path: " ".join(path) or "top")
def test_help(path):
    done = _dashraker(*path, "--help")
    assert done.returncode == 0, done.stderr
    assert "usage: dashraker" in done.stdout


def test_bad_generator_parameter_is_one_clear_line(tmp_path):
    done = _dashraker("verilog", "baseline", "--lanes", "0", "-o", str(tmp_path / "x.v"))
    assert done.returncode == 2
    assert "baseline --lanes must be an integer >= 1, not 0" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "x.v").exists()
