"""TensorDash's window threads: one window loop serving T pass streams, cycle by cycle (C-slow).

SPEC section 3 as amended 2026-12-06 (``threads`` argument; the design registry offers 1 and 2):
with T threads one window loop serves T independent pass streams, cycle by cycle (C-slow).
Pass i of a tile's stream goes to thread i mod T; thread t decides on the cycles c = t mod T,
each of its passes exactly as ``models.tensordash`` schedules it, from its own window (so a pass
takes the same decisions as alone), its passes one after the other; a thread with no decision left idles its cycles.
``interleave`` lays the decisions out cycle by cycle, ``stream_cycles`` gives the loop's length in
closed form: the mapper's per-pass cycles (the fused kernel's) are each thread's decisions as they are.
``pass_ends`` gives the cycle of each pass's last decision, the order in which a tile's results leave.

Torch-free, so that the mapper's CPU path lays its per-pass cycles on the threads without
loading the golden models.
"""

import collections

import numpy as np

__all__ = ["interleave", "stream_cycles", "pass_ends"]


def _check_threads(threads):
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, not {threads!r}")


def interleave(decisions, threads):
    """Which pass decides on each cycle of one tile's window loop serving ``threads`` threads (module doc).

    ``decisions[i]`` is pass i's decisions (its cycles alone, ``schedule(...).cycles``), in stream order.
    Returns int64 ``[cycles, 2]``: (pass, its decision index) decided on each cycle, (-1, -1) when the cycle's
    thread has none left; the loop ends with the last decision.
    """
    _check_threads(threads)
    queues = [collections.deque((p, k) for p in range(t, len(decisions), threads) for k in range(int(decisions[p])))
              for t in range(threads)]
    issued = []
    while any(queues):
        queue = queues[len(issued) % threads]
        issued.append(queue.popleft() if queue else (-1, -1))
    return np.array(issued, np.int64).reshape(-1, 2)


def stream_cycles(decisions, threads):
    """``len(interleave(...))`` of each tile's stream, int64 ``[tiles]``: ``decisions`` int ``[passes, tiles]``.

    Thread t's D_t decisions (its passes' sum) end on cycle T (D_t - 1) + t (T = ``threads``): with 2 threads a
    stream costs max(2 D_0 - 1, 2 D_1) cycles, a lone pass of d decisions 2 d - 1.
    """
    _check_threads(threads)
    decisions = np.asarray(decisions, np.int64)
    ends = [np.where(total > 0, threads * total - threads + t + 1, 0)
            for t, total in enumerate(decisions[t::threads].sum(axis=0) for t in range(threads))]
    return np.max(ends, axis=0)


def pass_ends(decisions, threads):
    """The cycle of each pass's last decision in ``interleave``'s layout, int64 ``[passes]`` (every pass takes at
    least one decision): a tile's results leave in this order, each pass's result a fixed latency after its end.

    With one thread the passes end back to back, pass i on cycle ``decisions[:i + 1].sum() - 1``.
    """
    decisions = np.asarray(decisions, np.int64)
    if (decisions < 1).any():
        raise ValueError(f"every pass takes at least one decision, not {decisions.min()}")
    laid = interleave(decisions, threads)
    owner, index = laid[:, 0], laid[:, 1]
    ended = (owner >= 0) & (index == decisions[np.maximum(owner, 0)] - 1)
    ends = np.empty(len(decisions), np.int64)
    ends[owner[ended]] = np.flatnonzero(ended)
    return ends
