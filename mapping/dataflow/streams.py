"""Operand streams and what the plan API hands out: problems, operation plans and batches of passes.

A stream is ``steps`` x ``lanes`` values. Streams are gathered on demand, one ``np.take`` of index arrays per batch
(never a Python loop per value), so only a batch of passes is in memory at a time.
"""

import dataclasses
import functools

import numpy as np

__all__ = ["Streams", "Problem", "OpPlan", "PassBatch", "pad_lanes", "array_streams", "window_streams", "slicer"]


class Streams:
    """``count`` operand streams of ``steps`` x ``lanes`` values; ``take(start, stop)`` gathers some."""

    def __init__(self, count, steps, lanes, take):
        self.count, self.steps, self.lanes, self._take = count, steps, lanes, take

    def take(self, start, stop):
        """Streams ``start`` to ``stop`` as a float32 array [stop - start, steps, lanes]."""
        return self._take(start, stop)

    def num_sets(self, size):
        return -(-self.count // size)

    def used(self, size, sets):
        """How many real streams the sets of ``size`` numbered ``sets`` hold (the last may be partial)."""
        return np.minimum(size, self.count - np.asarray(sets) * size)

    def sets(self, size, first, last):
        """Stream sets ``first`` to ``last`` as [last - first, size, steps, lanes], missing streams zero.

        Only a partial last set is copied to be padded; otherwise the array is ``take``'s (read-only if a view).
        """
        start, stop = first * size, min(last * size, self.count)
        taken = self.take(start, stop)
        missing = (last - first) * size - (stop - start)
        if missing:
            taken = np.concatenate([taken, np.zeros((missing, self.steps, self.lanes), np.float32)])
        return taken.reshape(last - first, size, self.steps, self.lanes)


@dataclasses.dataclass
class Problem:
    """One independent part of an operation: ``rows`` (scheduled) and ``cols`` streams of equal steps."""

    label: str
    rows: Streams
    cols: Streams

    @property
    def steps(self):
        return self.rows.steps


@dataclasses.dataclass
class OpPlan:
    """An operation of a layer: its problems, which tensor is scheduled, and the tensor sizes it moves."""

    op: str
    scheduled: str  # "A" (activations), "W" (weights) or "G" (output gradients)
    partner: str
    zero_fraction: dict  # tensor name -> fraction of zeros in the operand format
    elements: dict  # tensor name -> element count, operands and the result ("out")
    problems: list


@dataclasses.dataclass
class PassBatch:
    """Consecutive passes of one problem: ``scheduled`` [P, R, S, N] and ``partner`` [P, C, S, N] values.

    Both are gathered on first use from the stream sets the batch reads, ``scheduled_sets[row_pick]`` and
    ``partner_sets[col_pick]`` (a pass repeats its row set for every column set), so that a GPU can be sent
    the sets alone and gather the passes itself.
    """

    problem: int
    label: str
    scheduled_sets: np.ndarray
    partner_sets: np.ndarray
    row_pick: np.ndarray
    col_pick: np.ndarray
    row_set: np.ndarray
    col_set: np.ndarray
    rows_used: np.ndarray
    cols_used: np.ndarray

    @functools.cached_property
    def scheduled(self):
        return self.scheduled_sets[self.row_pick]

    @functools.cached_property
    def partner(self):
        return self.partner_sets[self.col_pick]


def pad_lanes(x, lanes):
    """Zero-pad the last axis to a multiple of ``lanes``."""
    pad = -x.shape[-1] % lanes
    return np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)]) if pad else x


def array_streams(array, lanes):
    """Streams stored whole: ``array`` [count, ..., values] with values padded and split into lanes."""
    array = pad_lanes(array, lanes)
    array = np.ascontiguousarray(array.reshape(array.shape[0], -1, lanes))
    return Streams(array.shape[0], array.shape[1], lanes, slicer(array))


def window_streams(source, rows_index, cols_index, lanes, h_inner=False):
    """A stream per (sample, position): ``source`` [n, X+1, Y+1, channels] (index X / Y is a zero slot).

    ``rows_index`` [positions_x, taps_x] and ``cols_index`` [positions_y, taps_y] give the source
    coordinates of each window tap; steps walk the channel chunks, then the y taps, then the x taps.
    ``h_inner`` (dnnsim) walks x innermost instead, for both the positions and the taps.
    """
    source = pad_lanes(source, lanes)
    n, size_x, size_y, channels = source.shape
    px, tx = rows_index.shape
    py, ty = cols_index.shape
    steps = tx * ty * channels // lanes
    pixels = source.reshape(-1, channels)  # one row of channels per (sample, x, y)

    def take(start, stop):
        sample, position = np.divmod(np.arange(start, stop), px * py)
        y, x = np.divmod(position, px) if h_inner else np.divmod(position, py)[::-1]
        rows = (sample[:, None] * size_x + rows_index[x]) * size_y
        index = rows[:, :, None] + cols_index[y][:, None, :]  # [streams, x taps, y taps]
        index = index.swapaxes(1, 2) if h_inner else index
        return np.take(pixels, index.ravel(), axis=0).reshape(stop - start, steps, lanes)

    return Streams(n * px * py, steps, lanes, take)



def slicer(array):
    """``take`` of streams stored whole: views, read-only since the plan's arrays are shared by every design."""
    array = array.view()
    array.flags.writeable = False
    return lambda start, stop: array[start:stop]
