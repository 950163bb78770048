"""Tools that start tools of their own (``make`` and its compilers) end whole: on a signal, and when their parent is
killed at once; a build's temporary left by a killed builder is removed by the next build."""

import os
import signal
import subprocess
import sys
import time

import pytest

from dashraker.sim.cosim import _remove_stale_builds
from process_checks import alive

# A parent running a tool through ``run_group`` whose own child (as make's compiler) writes its pid and sleeps.
PARENT = """
import signal, sys
from dashraker.cli import _terminate
from dashraker.processes import run_group
signal.signal(signal.SIGTERM, _terminate)
run_group(["sh", "-c", f"sleep 60 & echo $! > {sys.argv[1]}; wait"])
"""


def _grandchild(tmp_path, parent):
    path = tmp_path / "pid"
    deadline = time.monotonic() + 30
    while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
        assert parent.poll() is None, parent.communicate()
        time.sleep(0.05)
    return int(path.read_text())


def _gone(pid, seconds=10):
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_the_tools_of_a_tool_end_with_it(tmp_path, signum):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "pid")], stderr=subprocess.PIPE)
    grandchild = _grandchild(tmp_path, parent)
    parent.send_signal(signum)  # SIGTERM: its handler ends the group; SIGKILL: the group's leader sees it go
    parent.communicate(timeout=30)
    assert _gone(grandchild), f"{grandchild} outlived its tool's parent"


def test_a_group_runs_as_subprocess_run():
    from dashraker.processes import run_group

    done = run_group(["sh", "-c", "echo out; echo err >&2; exit 3"], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def test_a_killed_builders_work_folder_is_removed_by_the_next_build(tmp_path):
    stale, live, other = (tmp_path / name for name in (".tile.4194305.abcd1234", f".tile.{os.getpid()}.abcd1234",
                                                        "tile"))  # 4194305: past Linux's largest pid
    for folder in (stale, live, other):
        folder.mkdir()
    _remove_stale_builds(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])
