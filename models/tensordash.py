"""TensorDash reference scheduler, cycle model and functional golden model (SPEC section 3).

The scheduled operand of a tile pass is a set of streams ``[rows, steps, lanes]``;
only which values are non-zero matters to the schedule. A value is zero for
scheduling when its exponent field is 0 -- zeros and subnormals alike (DAZ), the
RTL's test (``nonzero``); ``schedule`` and ``cycles`` apply it to value arrays
and take boolean arrays as they are. A skipped zero is never multiplied, so a
subnormal or zero scheduled value against an Inf partner contributes nothing,
where the baseline multiplies it and gives NaN (0 x Inf). Each row has a staging
window of steps ``t .. t+H`` and one scheduler. Every cycle each lane issues one
value: its own slot ``(t, lane)`` when non-zero, otherwise the first non-zero of its
interconnect candidates ``(t + ds, (lane + dl) mod N)``, visited in priority order;
a promoted value moves (its old slot becomes zero), so nothing is issued twice or
lost. Lanes are visited in groups whose candidate sets are disjoint (lanes of a
group decide in parallel), group after group. After the cycle, the window skips
the following steps that are now zero in every row, at most H of them: a cycle
consumes 1 to H+1 steps. Steps past the end of a stream are zero.

Priority and groups: ``models.interconnect``.

Schedulers (SPEC section 3 as amended 2026-11-27; ``scheduler`` argument): the group-by-group
order above is ``"greedy"``, the reference that reproduces the authors' simulator. Its loop
in hardware is as deep as the number of groups, so the models also hold a separable
request/grant allocator, ``"separable<n>"`` (n iterations in one cycle; the design registry
offers ``separable1`` and ``separable2``), whose depth does not grow with N. Each cycle:

1. every lane whose own slot ``(t, lane)`` is non-zero issues it (step t's slots are
   candidates of their own lane only, so the head step always ends empty);
2. iteration (n times): every lane still idle *requests* its first non-zero candidate
   in the priority order (no lookaside to other requests); every requested slot
   *grants* one requester, the one whose offset comes first in the priority order
   (for T<2,5> a step-1 slot prefers the lane right of it, offset (1,-1), then its own
   lane, then the lanes 1 and 3 left of it); a granted lane issues that value, the slot
   becomes zero; the losers stay idle and request again in the next iteration, from
   the slots still non-zero.

Both keep the invariants: every non-zero issued exactly once from its own (step, lane),
none lost, 1 to H+1 steps consumed per cycle. Neither is always faster than the other
(the allocator's losers may idle where greedy would have found them a value, and a
different choice changes which values are left for the next cycles). With a pattern
without lookaside (``T<h,0>``) every slot has one candidate lane and all schedulers agree.

Threads (SPEC section 3): ``models.threads`` lays a tile's passes on the window loop's threads.

``schedule`` records the schedule with boolean lane arrays; ``cycles`` computes the
same counts with the lanes packed into machine words, in torch on the CPU or a GPU (the
mapper's GPU path); the mapper's CPU path runs the fused kernel ``models.kernels.tensordash``,
checked against both.
"""

from dataclasses import dataclass

import numpy as np
import torch

from dashraker.models.baseline import accumulate, accumulate_addends, adder_tree, fused_steps
from dashraker.models.interconnect import allocator_iterations, check_pattern, lane_groups, priority
from dashraker.models.numerics import fp32_add, fp32_mul, quantize
from dashraker.models.threads import interleave, pass_ends, stream_cycles  # the threads' layout, kept torch-free

__all__ = [
    "nonzero",
    "Schedule",
    "schedule",
    "cycles",
    "tile_outputs",
    "interleave",
    "stream_cycles",
    "pass_ends",
]

@dataclass(frozen=True)
class Schedule:
    """The schedule of a batch of tile passes.

    ``head[p, c]`` is the window's first step in cycle ``c`` of pass ``p`` and
    ``select[p, c, r, i]`` the pattern index lane ``i`` of row ``r`` issues then (-1:
    idle); both are -1 for cycles past ``cycles[p]``.
    """

    pattern: tuple
    lookahead: int
    groups: list
    cycles: np.ndarray
    head: np.ndarray
    select: np.ndarray

    @property
    def lanes(self):
        return self.select.shape[-1]

    @property
    def source(self):
        """(step, lane) of the value each lane issues, int64 ``[passes, cycles, rows, lanes]``; -1 when idle."""
        offsets = np.array(self.pattern, dtype=np.int64)
        idle = self.select < 0
        chosen = offsets[np.where(idle, 0, self.select)]
        step = self.head[:, :, None, None] + chosen[..., 0]
        lane = (np.arange(self.lanes) + chosen[..., 1]) % self.lanes
        return np.where(idle, -1, step), np.where(idle, -1, lane)


def nonzero(values):
    """Which values are non-zero for scheduling: exponent field non-zero (zeros and subnormals are zeros, DAZ).

    ``values`` are fp32 values (NumPy or CPU torch) exactly as the operand format holds them;
    bf16 shares fp32's exponent field, so one test serves both formats.
    """
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    return (bits & np.uint32(0x7F800000)) != 0


def _streams(operand):
    """Boolean ``[passes, rows, steps, lanes]`` streams: booleans as given, values through ``nonzero``."""
    operand = np.asarray(operand)
    if operand.ndim != 4:
        raise ValueError(f"operand must be a [passes, rows, steps, lanes] array, not shape {operand.shape}")
    return operand if operand.dtype == bool else nonzero(operand)


def _skip(occupied):
    """Steps consumed this cycle: 1 + the leading run of steps 1..H empty in every row (occupied: [A, H])."""
    xp = torch if isinstance(occupied, torch.Tensor) else np
    return 1 + xp.cumprod(~occupied, 1).sum(1)


def _run(window_state, lookahead, passes, steps, step_cycle):
    """Shared cycle loop: gathers each active pass's window, lets ``step_cycle`` schedule it, advances.

    ``window_state`` is a NumPy array or a torch tensor (on any device); the counts come back alike.
    """
    xp, on = (torch, {"device": window_state.device}) if isinstance(window_state, torch.Tensor) else (np, {})
    head = xp.zeros(passes, dtype=xp.int64, **on)
    count = xp.zeros(passes, dtype=xp.int64, **on)
    span = xp.arange(lookahead + 1, **on)
    active = xp.arange(passes if steps else 0, **on)
    while len(active):
        rows = head[active, None] + span
        window = window_state[active[:, None], rows]
        occupied = step_cycle(active, count[active], head[active], window)
        window_state[active[:, None], rows] = window
        head[active] += _skip(occupied)
        count[active] += 1
        active = active[head[active] < steps]
    return count


def schedule(operand, pattern, lookahead, scheduler):
    """Schedule tile passes: ``operand`` ``[passes, rows, steps, lanes]`` (bool, or values) -> ``Schedule``.

    ``scheduler`` is ``"greedy"`` or ``"separable<n>"`` (module doc)."""
    flags = _streams(operand)
    passes, rows, steps, lanes = flags.shape
    pattern = check_pattern(lanes, pattern, lookahead)
    iterations = allocator_iterations(scheduler)
    groups = lane_groups(lanes, pattern)
    order = priority(pattern)
    state = np.zeros((passes, steps + lookahead + 1, rows, lanes), dtype=bool)
    state[:, :steps] = flags.transpose(0, 2, 1, 3)
    select = np.full((passes, steps, rows, lanes), -1, dtype=np.int8)
    head = np.full((passes, steps), -1, dtype=np.int64)
    lane = np.arange(lanes)

    def allocate(window, chosen):
        """The separable allocator (module doc) on ``window`` [A, H+1, rows, lanes], in place."""
        own = window[:, 0]
        chosen[own] = order[0]
        idle = ~own
        own[:] = False
        for _ in range(iterations):
            # Request: every idle lane asks for its first non-zero candidate.
            request = np.full(idle.shape, -1, dtype=np.int8)
            for k in order[1:]:
                step, offset = pattern[k]
                asks = idle & (request < 0) & window[:, step][..., (lane + offset) % lanes]
                request[asks] = k
            # Grant: a slot goes to its requester whose offset comes first; a granted slot becomes zero, so
            # the later requesters of it see it empty and lose.
            for k in order[1:]:
                step, offset = pattern[k]
                source = window[:, step]
                granted = (request == k) & source[..., (lane + offset) % lanes]
                source[..., (lane + offset) % lanes] &= ~granted
                chosen[granted] = k
                idle &= ~granted

    def step_cycle(active, cycle, first, window):
        chosen = np.full(window.shape[:1] + window.shape[2:], -1, dtype=np.int8)
        for group in groups if iterations == 0 else ():
            group = np.array(group)
            need = np.ones(window.shape[:1] + (rows, group.size), dtype=bool)
            for k in order:
                step, offset = pattern[k]
                source = window[:, step]
                take = need & source[..., (group + offset) % lanes]
                source[..., (group + offset) % lanes] &= ~take
                chosen[..., group] = np.where(take, k, chosen[..., group])
                need &= ~take
        if iterations:
            allocate(window, chosen)
        select[active, cycle] = chosen
        head[active, cycle] = first
        return window[:, 1:].any(axis=(2, 3))

    count = _run(state, lookahead, passes, steps, step_cycle)
    width = int(count.max(initial=0))
    return Schedule(pattern, lookahead, groups, count, head[:, :width], select[:, :width])


def _rotate(words, offset, lanes):
    """Bit i of the result is bit (i + offset) mod N of ``words`` (N-bit lane masks in int64, N < 64)."""
    offset %= lanes
    if offset == 0:
        return words
    return ((words >> offset) | (words << (lanes - offset))) & ((1 << lanes) - 1)


def cycles(operand, pattern, lookahead, scheduler, device="cpu"):
    """Cycle count per pass (int64 ``[passes]``), as ``schedule(...).cycles``, with lanes packed in words.

    The words are torch tensors on ``device`` (a torch device: a GPU runs all passes' row
    schedulers side by side); the counts come back as a NumPy array.
    """
    flags = _streams(operand)
    passes, rows, steps, lanes = flags.shape
    pattern = check_pattern(lanes, pattern, lookahead)
    iterations = allocator_iterations(scheduler)
    if lanes >= 64:
        return schedule(flags, pattern, lookahead, scheduler).cycles
    groups = lane_groups(lanes, pattern)
    order = [pattern[k] for k in priority(pattern)]
    packed = np.packbits(flags, axis=-1, bitorder="little")
    packed = np.pad(packed, [(0, 0)] * 3 + [(0, 8 - packed.shape[-1])]).view(np.int64)[..., 0]
    state = torch.zeros((passes, steps + lookahead + 1, rows), dtype=torch.int64, device=device)
    state[:, :steps] = torch.from_numpy(packed.transpose(0, 2, 1).copy()).to(device)
    masks = [sum(1 << lane for lane in group) for group in groups]

    def allocate(window):
        """The separable allocator (module doc) on the words ``window`` [A, H+1, rows], in place."""
        idle = ~window[:, 0] & ((1 << lanes) - 1)
        window[:, 0] = 0
        for _ in range(iterations):
            requests, pending = [], idle
            for step, offset in order[1:]:
                requests.append(pending & _rotate(window[:, step], offset, lanes))
                pending = pending & ~requests[-1]
            for (step, offset), request in zip(order[1:], requests):
                granted = _rotate(request, -offset, lanes) & window[:, step]
                window[:, step] &= ~granted
                idle = idle & ~_rotate(granted, offset, lanes)

    def step_cycle(active, cycle, first, window):
        if iterations:
            allocate(window)
        for mask in masks if iterations == 0 else ():
            need = torch.full(window.shape[:1] + (rows,), mask, dtype=torch.int64, device=device)
            for step, offset in order:
                take = need & _rotate(window[:, step], offset, lanes)
                window[:, step] &= ~_rotate(take, -offset, lanes)
                need = need & ~take
        return (window[:, 1:] != 0).any(2)

    return _run(state, lookahead, passes, steps, step_cycle).cpu().numpy()


def tile_outputs(sched, scheduled, partner, fmt, accumulators, dot):
    """PE outputs of tile passes run on a schedule, in the project's fp32 arithmetic.

    ``scheduled`` ``[passes, rows, steps, lanes]`` and ``partner`` ``[passes, cols,
    steps, lanes]`` are fp32 values (quantized to ``fmt`` first). Each cycle, lane i of
    PE (r, c) multiplies the scheduled value it issues by the partner value at the
    same original (step, lane); the N products (+0.0 for idle lanes) go through the
    fp32 adder tree and the sum of the pass's t-th scheduled cycle is added to the
    PE's partial accumulator t mod ``accumulators`` (each from +0.0); the partials
    are summed by the same tree at the end of the pass (``baseline.accumulate``).
    With ``accumulators`` 0 the pass's sums go to the fixed-point accumulator
    (``baseline.fixed_point_accumulate``), where the +0.0 of a cycle past the pass's
    end adds nothing. With ``dot="fused"`` (``accumulators`` 0) each cycle's N products are the fused dot
    product (``baseline.fused_steps``; an idle lane's +0.0 contributes nothing), added into the fixed-point
    accumulator with the other cycles' (``baseline.accumulate_addends``). Returns fp32 ``[passes, rows, cols]``.
    """
    if dot == "fused" and accumulators != 0:
        raise ValueError(f"the fused dot product adds into the fixed-point accumulator (0), not {accumulators}")
    a = quantize(torch.as_tensor(scheduled, dtype=torch.float32), fmt)
    b = quantize(torch.as_tensor(partner, dtype=torch.float32), fmt)
    passes, rows, steps, lanes = a.shape
    if b.shape[0] != passes or b.shape[2:] != (steps, lanes):
        raise ValueError(f"partner shape {tuple(b.shape)} does not match scheduled shape {tuple(a.shape)}")
    if sched.select.shape[0] != passes or sched.select.shape[2:] != (rows, lanes):
        raise ValueError(f"schedule for shape {sched.select.shape} does not match scheduled shape {tuple(a.shape)}")
    step, lane = (torch.as_tensor(v) for v in sched.source)
    # Padding step/lane index `steps`/0 holds +0.0 for idle lanes.
    a = torch.nn.functional.pad(a, (0, 0, 0, 1))
    b = torch.nn.functional.pad(b, (0, 0, 0, 1))
    idle = step < 0
    step = torch.where(idle, steps, step)
    lane = torch.where(idle, 0, lane)
    pass_index = torch.arange(passes)[:, None, None]
    row_index = torch.arange(rows)[None, :, None]
    # per cycle: the tree sums [passes, rows, cols] (+0.0 past a pass's end) and whether each pass still runs
    sums, running = [], []
    for cycle in range(step.shape[1]):
        s, i = step[:, cycle], lane[:, cycle]  # [passes, rows, lanes]
        a_issued = a[pass_index, row_index, s, i]  # [passes, rows, lanes]
        b_issued = b[pass_index[..., None], torch.arange(b.shape[1])[None, None, :, None], s[:, :, None], i[:, :, None]]
        running.append(torch.as_tensor(cycle < sched.cycles)[:, None, None])
        if dot == "fused":
            addends = fused_steps(a_issued[:, :, None].expand_as(b_issued), b_issued, fmt)
            sums.append([torch.where(running[-1], part, torch.zeros_like(part)) for part in addends])
            continue
        products = fp32_mul(a_issued[:, :, None], b_issued)  # [passes, rows, cols, lanes]
        sums.append(torch.where(running[-1], adder_tree(products), 0.0))
    if dot == "fused":
        if not sums:
            zeros = torch.zeros(passes, rows, b.shape[1], 0, dtype=torch.int64)
            return accumulate_addends([zeros] * 3 + [zeros.bool()] * 3)
        return accumulate_addends([torch.stack(parts, dim=-1) for parts in zip(*sums)])
    if accumulators == 0:
        return accumulate(torch.stack(sums, dim=-1) if sums else torch.zeros(passes, rows, b.shape[1], 0), 0)
    partials = torch.zeros(passes, rows, b.shape[1], accumulators)
    for cycle, (step_sum, runs) in enumerate(zip(sums, running)):
        partial = partials[..., cycle % accumulators]
        partials[..., cycle % accumulators] = torch.where(runs, fp32_add(partial, step_sum), partial)
    return adder_tree(partials)
