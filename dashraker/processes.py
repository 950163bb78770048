"""Processes that end with the thread that made them: a worker's tools, and the workers themselves.

A worker killed at once (SIGTERM left at its default, SIGKILL, an out-of-memory kill) runs no handler and
no ``finally``, so nothing it made can be ended by its code: Linux's ``PR_SET_PDEATHSIG`` asks the kernel
to send a signal to a process when the thread that made it ends. A tool that starts tools of its own (``make``
and its compilers) runs in a process group of its own, ended whole (``run_group``).
"""

import contextlib
import ctypes
import os
import signal
import subprocess
import time

__all__ = ["end_with_parent", "ends_with_parent", "run_group"]

# The leader of a ``run_group`` group: runs the command and, on SIGTERM (the parent's end, through PDEATHSIG, or
# ``_end_group``), sends SIGTERM to the whole group, the compilers that make started included.
_LEADER = 'trap "trap - TERM; kill -TERM 0" TERM; "$@" & wait $!'
GROUP_END_S = 10  # how long the members of an ended group are waited for

PR_SET_PDEATHSIG = 1  # Linux prctl(2): the signal a process gets when the thread that made it ends


def _prctl():
    """The C library's ``prctl``, or None where there is none (not Linux; no C library to load, as on Windows)."""
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
    except (OSError, TypeError):
        return None


# Resolved once, here: a child between fork and exec (``ends_with_parent``) only calls it, loading nothing.
_PRCTL = _prctl()


def end_with_parent(signal_number=signal.SIGKILL):
    """Ask for ``signal_number`` when the thread that made this process ends; False where the system has no
    ``prctl`` (the caller then watches its parent itself)."""
    return _PRCTL is not None and _PRCTL(PR_SET_PDEATHSIG, int(signal_number), 0, 0, 0) == 0


def ends_with_parent():
    """For ``subprocess.Popen(preexec_fn=...)``: the tool gets SIGTERM when the thread that started it ends, as
    when its worker is killed."""
    end_with_parent(signal.SIGTERM)


def _end_group(leader):
    """SIGTERM to the process group of ``leader``, then wait until no member is left (at most ``GROUP_END_S``)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(leader.pid, signal.SIGTERM)
    leader.wait()
    deadline = time.monotonic() + GROUP_END_S
    while time.monotonic() < deadline:
        try:
            os.killpg(leader.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


def run_group(command, **kwargs):
    """``subprocess.run(command, **kwargs)`` in a process group of its own that ends whole: on an exception here
    (SIGINT, SIGTERM) and when this thread ends however it ends (``kill -9`` included), every process the command
    started ends too, and none is left under PID 1."""
    if kwargs.pop("capture_output", False):
        kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    leader = subprocess.Popen(["sh", "-c", _LEADER, "sh", *map(str, command)], start_new_session=True,
                              preexec_fn=ends_with_parent, **kwargs)
    try:
        out, err = leader.communicate()
    except BaseException:
        _end_group(leader)
        raise
    return subprocess.CompletedProcess(leader.args, leader.returncode, out, err)
