"""Processes that end with the thread that made them: a worker's tools, and the workers themselves.

A worker killed at once (SIGTERM left at its default, SIGKILL, an out-of-memory kill) runs no handler and
no ``finally``, so nothing it made can be ended by its code: Linux's ``PR_SET_PDEATHSIG`` asks the kernel
to send a signal to a process when the thread that made it ends.
"""

import ctypes
import signal

__all__ = ["end_with_parent", "ends_with_parent"]

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
