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

A pass is summarised (``summaries``: a compiled kernel that schedules and counts it as DNNsim
does) by its leading all-zero steps, the first step that holds a value after scheduling, the
count's cycles from that step with its counter at 0, and the counter it leaves (its trailing
all-zero steps after scheduling modulo H + 1); ``carried_cycles`` then walks the passes of one
layer and sample in DNNsim's order with the carried counter.
"""

import numba
import numpy as np

__all__ = ["Summary", "summaries", "zero_run", "carried_cycles", "problem_cycles", "call_of"]


class Summary:
    """Per pass (arrays [P]): ``steps``; ``leading`` all-zero steps before scheduling (``steps`` if the pass is all
    zero); ``first``, the first step that holds a value after scheduling; ``inner``, the count's cycles from
    ``first`` to the end, its counter at 0; ``tail``, the pass's trailing all-zero steps after scheduling modulo
    H + 1 (the counter it leaves); ``nonzero``, its non-zero values, those DNNsim schedules and multiplies."""

    def __init__(self, steps, leading, first, inner, tail, nonzero):
        self.steps, self.leading, self.first, self.inner, self.tail = steps, leading, first, inner, tail
        self.nonzero = nonzero


def summaries(operand, pattern, lookahead):
    """``Summary`` of the passes ``operand`` [P, R, S, N] (bool: non-zero scheduled values, or the values), from the
    compiled kernel ``models.kernels.tensordash.dnnsim_summaries``, which schedules and counts each pass as DNNsim
    does."""
    from dashraker.models.kernels.tensordash import dnnsim_summaries

    operand = np.asarray(operand)
    return Summary(np.full(len(operand), operand.shape[2], np.int64), *dnnsim_summaries(operand, pattern, lookahead))


@numba.njit(nogil=True, cache=True)
def zero_run(length, skip, lookahead):
    """(cycles, counter after) of ``length`` all-zero steps counted from the counter ``skip``: DNNsim's
    ``if (skip < H && zero_line) skip++; else {skip = 0; cycles++}``."""
    free = lookahead - skip  # zero steps jumped before the first that costs
    if length <= free:
        return 0, skip + length
    return 1 + (length - free - 1) // (lookahead + 1), (length - free - 1) % (lookahead + 1)


@numba.njit(nogil=True, cache=True)
def _carried(steps, leading, first, inner, tail, lookahead, order, skip, cycles):
    """``carried_cycles``' walk into ``cycles``; the counter left."""
    for i in range(order.size):
        p = order[i]
        if leading[p] >= steps[p]:  # all zero
            cycles[i], skip = zero_run(steps[p], skip, lookahead)
            continue
        cycles[i] = zero_run(first[p], skip, lookahead)[0] + inner[p]
        skip = tail[p]
    return skip


def carried_cycles(summary, lookahead, order=None, skip=0, with_skip=False):
    """DNNsim's cycles of the passes ``order`` (int64, in that order; default: every pass as given) with one skip
    counter, starting at ``skip``, carried from each pass to the next (and the counter left, ``with_skip``)."""
    order = np.arange(len(summary.steps)) if order is None else np.asarray(order, np.int64)
    cycles = np.zeros(len(order), np.int64)
    fields = (np.asarray(field, np.int64) for field in (summary.steps, summary.leading, summary.first, summary.inner,
                                                         summary.tail))
    skip = _carried(*fields, int(lookahead), order, int(skip), cycles)
    return (cycles, skip) if with_skip else cycles


def call_of(label):
    """The skip counter of DNNsim a problem of the ``dnnsim`` dataflow counts with: one per layer, operation, group
    and sample (its label up to the kernel offset: the weight gradient's offsets share one), and one per stride
    phase of a strided input gradient (``channel_first_dilated_convolution`` declares it per phase)."""
    return label.split(" offset")[0]


def problem_cycles(problem, rows, cols, pattern, lookahead, rows_outer, skip=0):
    """DNNsim's cost of a problem's passes: their cycles in the mapper's pass order (row sets outer), int64 [row sets
    x column sets], the skip counter left, and the multiplications (each non-zero scheduled value once per partner
    operand). DNNsim runs the passes windows (or activations) outer: row sets outer when the windows are the
    scheduled side (``rows_outer``), else column sets outer."""
    row_sets, col_sets = problem.rows.num_sets(rows), problem.cols.num_sets(cols)
    summary = summaries(problem.rows.sets(rows, 0, row_sets), pattern, lookahead)
    multiplications = int(summary.nonzero.sum()) * problem.cols.count
    if rows_outer:
        order = np.repeat(np.arange(row_sets), col_sets)  # pass (r, c) -> row set r, row-major
        cycles, skip = carried_cycles(summary, lookahead, order, skip, with_skip=True)
        return cycles, skip, multiplications
    order = np.tile(np.arange(row_sets), col_sets)  # DNNsim's order: column sets outer
    cycles, skip = carried_cycles(summary, lookahead, order, skip, with_skip=True)
    return cycles.reshape(col_sets, row_sets).T.ravel(), skip, multiplications
