"""What a long run says while it works: progress bars on a terminal only, and a stage line per long phase always.

Every progress bar of the package is made here: a bar redraws itself with carriage returns, which a log
file (``make demo > log``, a batch system's output) keeps as hundreds of lines, so a bar is drawn only
when standard error is a terminal. A stage line (``stage``) says what a phase of more than a few
seconds does and how long it should take, also with ``--no-progress`` and in a log (SPEC section 9).
"""

import sys

__all__ = ["bar", "on_terminal", "stage", "duration", "STAGE_SECONDS"]

STAGE_SECONDS = 5.0  # a phase estimated at least this long prints a stage line


def on_terminal():
    """Whether standard error is a terminal (where a bar's carriage returns redraw it in place)."""
    return sys.stderr.isatty()


def bar(*args, disable=False, **kwargs):
    """A ``tqdm`` progress bar (its arguments), disabled where ``disable`` or standard error is not a terminal."""
    from tqdm import tqdm

    return tqdm(*args, disable=disable or not on_terminal(), **kwargs)


def duration(seconds):
    """``seconds`` in words: "40 s", "3.5 min", "1.2 h"."""
    if seconds < 90:
        return f"{seconds:,.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds / 3600:,.1f} h"


def stage(text, seconds=None):
    """Print ``text`` as a stage line on standard error, with the phase's estimate ``seconds`` where given; nothing
    for a phase estimated shorter than ``STAGE_SECONDS``."""
    if seconds is not None and seconds < STAGE_SECONDS:
        return
    estimate = "" if seconds is None else f" (about {duration(seconds)})"
    print(f"{text}{estimate}", file=sys.stderr, flush=True)
