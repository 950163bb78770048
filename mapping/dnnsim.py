"""TensorDash cycles as DNNsim counts them: a leading all-zero step jumped without a cycle, the skip counter carried.

DNNsim (``core/src/TensorDash.cpp`` of its training version) differs from SPEC section 3's
window in two ways that change cycle counts (issue 38):

- Its scheduler (``non_overlapping_schedule``) walks a pass's steps with a skip counter that
  starts at 0: up to H all-zero steps are jumped over without a cycle and without promoting
  anything into them, so a pass whose first step is all zero (the all-padding first step of a
  weight-gradient tap) starts at a later step; SPEC section 3's window issues step 0 and
  promotes the next steps' values into it.
- Its cycle count walks the scheduled steps again with a second skip counter (an all-zero step
  costs nothing while fewer than H were jumped in a row), declared once per layer and sample and
  carried from pass to pass: a pass's leading all-zero steps may cost a cycle after a pass that
  ended with jumped steps, or none after one that did not.

From the first step that holds a value after scheduling, DNNsim schedules and counts as SPEC
section 3's window does, so a pass is summarised (``summaries``) by its leading all-zero steps,
the first step DNNsim fills, the window's cycles from that step, and its trailing all-zero
steps modulo H + 1; ``carried_cycles`` then walks the passes of one layer and sample in
DNNsim's order with the carried counter. The window's cycles come from ``count``, SPEC section
3's cycle model (the fused kernel by default).
"""

import numpy as np

__all__ = ["Summary", "summaries", "zero_run", "carried_cycles", "problem_cycles", "call_of"]


class Summary:
    """Per pass (arrays [P]): ``steps``; ``leading`` all-zero steps before scheduling (``steps`` if the pass is all
    zero); ``first``, the step DNNsim's scheduler fills first; ``inner``, the window's cycles from ``first`` to the
    end; ``tail``, the pass's trailing all-zero steps after scheduling modulo H + 1 (the counter it leaves)."""

    def __init__(self, steps, leading, first, inner, tail):
        self.steps, self.leading, self.first, self.inner, self.tail = steps, leading, first, inner, tail


def _window_cycles(values, pattern, lookahead):
    from dashraker.models.kernels.tensordash import cycles_and_nonzero

    return np.asarray(cycles_and_nonzero(values, pattern, lookahead, "greedy")[0], np.int64)  # DNNsim's order


def summaries(flags, pattern, lookahead, count=_window_cycles):
    """``Summary`` of passes ``flags`` (bool [P, R, S, N]: non-zero scheduled values).

    ``count(values [P, R, S', N] float32, pattern, lookahead)`` is SPEC section 3's cycle count per pass. The
    first filled step: DNNsim jumps min(leading, H) steps; a jumped-to step that is still all zero takes the
    values of the next H steps, or, if they are zero too, stays empty and the next H steps are jumped again.
    """
    flags = np.asarray(flags, bool)
    passes, rows, steps, lanes = flags.shape
    h = lookahead
    busy = flags.any(axis=(1, 3))  # [P, S]
    leading = np.where(busy.any(1), busy.argmax(1), steps)
    later = h + np.maximum(0, -(-(leading - 2 * h) // (h + 1))) * (h + 1)
    first = np.minimum(np.where(leading <= h, leading, later), steps)
    # each pass's steps from ``first`` on, then zeros: the window's cycles over them and p more zero steps tell the
    # trailing zero steps modulo H + 1 (the count rises by one when they reach a multiple of H + 1)
    index = np.arange(steps)[None, :] + first[:, None]
    shifted = np.take_along_axis(flags, np.minimum(index, steps - 1)[:, None, :, None], axis=2)
    shifted &= (index < steps)[:, None, :, None]
    values = shifted.astype(np.float32)
    counts = [count(np.pad(values, ((0, 0), (0, 0), (0, p), (0, 0))), pattern, h) for p in range(h + 1)]
    turns = sum((c > counts[0]).astype(np.int64) for c in counts[1:])  # (trailing + first) mod (H + 1)
    tail = (turns - first) % (h + 1)
    inner = counts[0] - (tail + first) // (h + 1)
    return Summary(np.full(passes, steps), leading, first, inner, tail)


def zero_run(length, skip, lookahead):
    """(cycles, counter after) of ``length`` all-zero steps counted from the counter ``skip``: DNNsim's
    ``if (skip < H && zero_line) skip++; else {skip = 0; cycles++}``."""
    free = lookahead - skip  # zero steps jumped before the first that costs
    if length <= free:
        return 0, skip + length
    return 1 + (length - free - 1) // (lookahead + 1), (length - free - 1) % (lookahead + 1)


def carried_cycles(summary, lookahead, order=None, skip=0, with_skip=False):
    """DNNsim's cycles of the passes ``order`` (int64, in that order; default: every pass as given) with one skip
    counter, starting at ``skip``, carried from each pass to the next (and the counter left, ``with_skip``)."""
    order = range(len(summary.steps)) if order is None else order
    cycles = np.zeros(len(order), np.int64)
    for i, p in enumerate(order):
        if summary.leading[p] >= summary.steps[p]:  # all zero
            cycles[i], skip = zero_run(int(summary.steps[p]), skip, lookahead)
            continue
        jumped, _ = zero_run(int(summary.first[p]), skip, lookahead)
        cycles[i] = jumped + summary.inner[p]
        skip = int(summary.tail[p])
    return (cycles, skip) if with_skip else cycles


def call_of(label):
    """The skip counter of DNNsim a problem of the ``dnnsim`` dataflow counts with: one per layer, operation, group
    and sample (its label up to the kernel offset: the weight gradient's offsets share one), and one per stride
    phase of a strided input gradient (``channel_first_dilated_convolution`` declares it per phase)."""
    return label.split(" offset")[0]


def problem_cycles(problem, rows, cols, pattern, lookahead, rows_outer, skip=0):
    """DNNsim's cycles of a problem's passes in the mapper's pass order (row sets outer), int64 [row sets x column
    sets], and the skip counter left. DNNsim runs them windows (or activations) outer: row sets outer when the
    windows are the scheduled side (``rows_outer``), else column sets outer."""
    from dashraker.models.tensordash import nonzero

    row_sets, col_sets = problem.rows.num_sets(rows), problem.cols.num_sets(cols)
    summary = summaries(nonzero(problem.rows.sets(rows, 0, row_sets)), pattern, lookahead)
    if rows_outer:
        order = np.repeat(np.arange(row_sets), col_sets)  # pass (r, c) -> row set r, row-major
        cycles, skip = carried_cycles(summary, lookahead, order, skip, with_skip=True)
        return cycles, skip
    order = np.tile(np.arange(row_sets), col_sets)  # DNNsim's order: column sets outer
    cycles, skip = carried_cycles(summary, lookahead, order, skip, with_skip=True)
    return cycles.reshape(col_sets, row_sets).T.ravel(), skip
