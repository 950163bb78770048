"""TensorDash row schedulers fused in one compiled loop: cycles and non-zero counts per pass.

Computes exactly ``dashraker.models.tensordash.cycles`` (read its docstring: lane groups,
priority order, the window of H+1 steps, skipping of all-zero steps) and, in the same
read of the operand, the non-zero values per pass the mapper counts as multiplications.

Rows are packed side by side into 64-bit words: ``64 // N`` rows' N-lane masks per word,
one N-bit field each (4 rows of 16 lanes: one word per step), so one shift-and-mask
rotates the lane masks of all of them at once (``_rotation``). Per cycle, the own slots
are taken first for every lane at once -- step 0 is a candidate of its own lane only, so
its owner always takes it and the window's first step ends empty -- then the lanes left
idle (``need``) try their group's candidates in priority order, group by group, stopping
as soon as no lane of the group still needs a value. The separable allocator (``scheduler``
``"separable<n>"``) replaces the groups by n request/grant rounds over the whole word: each idle
lane's request is the first candidate whose rotated step word has its bit (one mask per
candidate), then, candidate by candidate in priority order, a request is granted where its slot
is still non-zero and the slot cleared, so a later requester of the slot finds it empty and
loses. Lanes > 64 go to the reference. Window threads (SPEC section 3) do not enter here: each thread runs its
passes as alone, and the mapper lays these per-pass cycles on the threads (``models.threads.stream_cycles``).
Patterns are checked by the reference's own ``_check``, so both refuse the same arguments.
``dnnsim_summaries`` runs the same promotion (greedy) in the order of the TensorDash authors' simulator
(``mapping.dnnsim``): every step not jumped takes values, and its count walks the scheduled steps.
"""

import functools

import numba
import numpy as np

from dashraker.models.interconnect import allocator_iterations, check_pattern, lane_groups, priority

__all__ = ["cycles_and_nonzero", "dnnsim_summaries"]

_WORD = 64
_EXPONENT = 0x7F800000  # fp32 (and bf16 widened to fp32) exponent field: zero there is zero for scheduling


def _field_mask(bits, lanes, fields):
    """``bits`` (a mask of one N-bit field) repeated in each of ``fields`` fields of a word."""
    return sum(bits << (lanes * f) for f in range(fields))


def _rotation(offset, lanes, fields):
    """(right, low, left, high): a lane rotation by ``offset`` within every field, as ``_rotate`` applies it.

    Bit i of the rotated field is bit (i + offset) mod N: a right shift by o = offset mod N gives the field's
    low N - o bits and a left shift by N - o its high o bits. With o = 0 the left shift is by 0 and its mask
    empty, so no shift ever reaches the word width.
    """
    o = offset % lanes
    low = _field_mask((1 << (lanes - o)) - 1, lanes, fields)
    high = _field_mask(((1 << lanes) - 1) ^ ((1 << (lanes - o)) - 1), lanes, fields)
    return o, low, (lanes - o) % lanes, high


@functools.lru_cache(maxsize=64)
def _tables(lanes, rows, pattern):
    """The kernel's view of the pattern: rows per word; ``bounds`` (the candidates of step s, in priority order and
    own slot excluded, are ``bounds[s-1]`` to ``bounds[s]``); each candidate's rotation to its lanes and back
    ``[candidates, 8]``; the group masks; each word's mask of real rows. Kept per shape: a map asks for the same
    few thousands of times, and building them costs more than a small pass's scheduling."""
    fields = _WORD // lanes
    candidates = [pattern[k] for k in priority(pattern)][1:]
    bounds = np.searchsorted([step for step, _ in candidates], np.arange(max(s for s, _ in pattern) + 1), "right")
    bounds = bounds.astype(np.uint64)  # unsigned indices: no negative-index wrap-around in the inner loop
    rotations = np.array([[_rotation(signed, lanes, fields) for signed in (offset, -offset)]
                          for _, offset in candidates], np.uint64).reshape(-1, 8)
    groups = np.array([_field_mask(sum(1 << lane for lane in group), lanes, fields)
                       for group in lane_groups(lanes, pattern)], np.uint64)
    field = (1 << lanes) - 1
    valid = np.array([_field_mask(field, lanes, min(fields, rows - first)) for first in range(0, rows, fields)],
                     np.uint64)
    for table in (bounds, rotations, groups, valid):
        table.flags.writeable = False
    return fields, bounds, rotations, groups, valid


@numba.njit(nogil=True, cache=True)
def _rotate(words, right, low, left, high):
    """Bit i of each N-bit field of the result is bit (i + offset) mod N of that field of ``words`` (``_rotation``)."""
    return ((words >> right) & low) | ((words << left) & high)


@numba.njit(nogil=True, cache=True)
def _popcount(word):
    """Set bits of a 64-bit word (the SWAR sum LLVM turns into one popcnt)."""
    word -= (word >> np.uint64(1)) & np.uint64(0x5555555555555555)
    word = (word & np.uint64(0x3333333333333333)) + ((word >> np.uint64(2)) & np.uint64(0x3333333333333333))
    word = (word + (word >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (word * np.uint64(0x0101010101010101)) >> np.uint64(56)


@numba.njit(nogil=True, cache=True)
def _load(bits, test, p, fields, words, state):
    """Pack pass ``p`` of ``bits`` [P, R, S, N] (non-zero where ``bits & test``) into ``state`` (zeroed first), one
    word per ``fields`` rows and step; its non-zero values."""
    _, rows, length, lanes = bits.shape
    state[:] = 0
    count = np.uint64(0)
    for r in range(rows):
        word, shift = r // fields, np.uint64(lanes * (r % fields))
        for t in range(length):
            mask = np.uint64(0)
            for i in range(lanes):
                mask |= np.uint64((bits[p, r, t, i] & test) != 0) << np.uint64(i)
            count += _popcount(mask)
            state[t * words + word] |= mask << shift
    return count


@numba.njit(nogil=True, cache=True)
def _occupied(state, step, words):
    """Whether step ``step`` of ``state`` holds a value in any row."""
    occupied = np.uint64(0)
    for w in range(words):
        occupied |= state[step * words + w]
    return occupied != 0


@numba.njit(nogil=True, cache=True)
def _promote(state, base, words, w, idle, iterations, bounds, rotations, groups, requests):
    """Fill the ``idle`` lanes of word ``w`` of the step at ``state[base]`` from the window's later steps (their
    values cleared where taken); the lanes left idle. ``iterations`` 0 schedules group by group (greedy), n > 0 by n
    rounds of the separable allocator (``requests``: its scratch, one word per candidate)."""
    for _ in range(iterations):
        pending = idle
        for step in range(1, bounds.size):
            source = state[base + step * words + w]
            for k in range(bounds[step - 1], bounds[step]):
                requests[k] = pending & _rotate(source, rotations[k, 0], rotations[k, 1], rotations[k, 2],
                                                rotations[k, 3])
                pending &= ~requests[k]
        for step in range(1, bounds.size):
            slot = base + step * words + w
            for k in range(bounds[step - 1], bounds[step]):
                granted = state[slot] & _rotate(requests[k], rotations[k, 4], rotations[k, 5], rotations[k, 6],
                                                rotations[k, 7])
                state[slot] &= ~granted
                idle &= ~_rotate(granted, rotations[k, 0], rotations[k, 1], rotations[k, 2], rotations[k, 3])
    for g in range(groups.size if iterations == 0 else 0):
        need = idle & groups[g]
        for step in range(1, bounds.size):
            if need == 0:
                break
            slot = base + step * words + w
            # The group's lanes share no candidate slot, so its takes never hide a value from
            # it: every candidate reads the step as the group found it, the takes clear at the end.
            source, taken = state[slot], np.uint64(0)
            for k in range(bounds[step - 1], bounds[step]):
                take = need & _rotate(source, rotations[k, 0], rotations[k, 1], rotations[k, 2], rotations[k, 3])
                taken |= _rotate(take, rotations[k, 4], rotations[k, 5], rotations[k, 6], rotations[k, 7])
                need &= ~take
            state[slot] = source & ~taken
        idle = (idle & ~groups[g]) | need
    return idle


@numba.njit(nogil=True, cache=True)
def _kernel(bits, test, lookahead, iterations, fields, bounds, rotations, groups, valid, cycles, nonzero):
    """Per pass p of ``bits`` [P, R, S, N] (non-zero where ``bits & test``): ``cycles[p]`` and ``nonzero[p]``;
    ``iterations`` 0 schedules group by group (greedy), n > 0 by n rounds of the separable allocator."""
    passes, _, length, _ = bits.shape
    words = valid.size
    state = np.zeros((length + lookahead + 1) * words, np.uint64)
    requests = np.zeros(rotations.shape[0], np.uint64)
    for p in range(passes):
        nonzero[p] = _load(bits, test, p, fields, words, state)
        head, cycle = 0, 0
        while head < length:
            base = head * words
            for w in range(words):
                idle = valid[w] & ~state[base + w]
                state[base + w] = 0
                if idle != 0:
                    _promote(state, base, words, w, idle, iterations, bounds, rotations, groups, requests)
            advance = 1
            while advance <= lookahead and not _occupied(state, head + advance, words):
                advance += 1
            head += advance
            cycle += 1
        cycles[p] = cycle


@numba.njit(nogil=True, cache=True)
def _dnnsim_kernel(bits, test, lookahead, fields, bounds, rotations, groups, valid, leading, first, inner, tail,
                   nonzero):
    """Per pass p of ``bits`` as DNNsim's ``TensorDash.cpp`` schedules and counts it (``dnnsim_summaries``)."""
    passes, _, length, _ = bits.shape
    words = valid.size
    state = np.zeros((length + lookahead + 1) * words, np.uint64)
    requests = np.zeros(rotations.shape[0], np.uint64)
    for p in range(passes):
        nonzero[p] = _load(bits, test, p, fields, words, state)
        leading[p] = length
        for t in range(length):
            if _occupied(state, t, words):
                leading[p] = t
                break
        first[p], inner[p], tail[p] = length, 0, 0
        jumped = 0
        for t in range(length):
            filled = _occupied(state, t, words)
            if jumped < lookahead and not filled:
                jumped += 1  # the scheduler's own counter: the step stays empty, nothing promoted into it
            else:
                jumped = 0
                base = t * words
                for w in range(words):
                    idle = valid[w] & ~state[base + w]
                    if idle != 0 and _promote(state, base, words, w, idle, 0, bounds, rotations, groups,
                                              requests) != idle:
                        filled = True
            if first[p] == length:  # the count from the first filled step on, its counter starting at 0
                if filled:
                    first[p], inner[p] = t, 1
            elif tail[p] < lookahead and not filled:
                tail[p] += 1
            else:
                tail[p], inner[p] = 0, inner[p] + 1


def _bits(operand, pattern, lookahead):
    """The kernels' view of ``operand`` [passes, rows, steps, lanes] (bool, or values as ``reference.nonzero`` reads
    them): (bits, test) with non-zero values where ``bits & test``, and the checked pattern."""
    operand = np.asarray(operand)
    if operand.ndim != 4:
        raise ValueError(f"operand must be a [passes, rows, steps, lanes] array, not shape {operand.shape}")
    pattern = check_pattern(operand.shape[3], pattern, lookahead)
    if operand.dtype == bool:
        return np.ascontiguousarray(operand).view(np.uint8), np.uint8(1), pattern
    return np.ascontiguousarray(operand, np.float32).view(np.uint32), np.uint32(_EXPONENT), pattern


def cycles_and_nonzero(operand, pattern, lookahead, scheduler):
    """Per pass of ``operand`` [passes, rows, steps, lanes] (bool, or values as ``reference.nonzero`` reads them):
    ``(cycles, nonzero)``, int64 ``[passes]``: ``reference.cycles(...)`` and the non-zero values."""
    iterations = allocator_iterations(scheduler)
    bits, test, pattern = _bits(operand, pattern, lookahead)
    passes, rows, _, lanes = bits.shape
    if lanes > _WORD:
        from dashraker.models import tensordash as reference  # PyTorch's, loaded only here

        flags = (bits & test) != 0
        return reference.cycles(flags, pattern, lookahead, scheduler=scheduler), np.count_nonzero(flags, axis=(1, 2, 3))
    cycles, nonzero = np.zeros(passes, np.int64), np.zeros(passes, np.int64)
    _kernel(bits, test, lookahead, iterations, *_tables(lanes, rows, pattern), cycles, nonzero)
    return cycles, nonzero


def dnnsim_summaries(operand, pattern, lookahead):
    """Per pass of ``operand`` (as ``cycles_and_nonzero`` takes it), as DNNsim's ``TensorDash.cpp`` (training
    version) schedules and counts it, the greedy scheduler's order: int64 ``[passes]`` arrays ``(leading, first,
    inner, tail, nonzero)``, ``dashraker.mapping.dnnsim.Summary``'s fields (``nonzero``: the values scheduled).
    Its scheduler walks every step with its own skip counter from 0: up to H all-zero steps in a row are jumped,
    nothing promoted into them; every other step takes values from the next H steps as SPEC section 3's window
    does. Its count then walks the scheduled steps with a second counter, which ``first`` (the first step holding a
    value), ``inner`` (the cycles from it with the counter at 0) and ``tail`` (the counter left) summarise."""
    bits, test, pattern = _bits(operand, pattern, lookahead)
    passes, rows, _, lanes = bits.shape
    if lanes > _WORD:
        raise ValueError(f"DNNsim's count takes at most {_WORD} lanes, not {lanes}")
    summary = tuple(np.zeros(passes, np.int64) for _ in range(5))
    _dnnsim_kernel(bits, test, lookahead, *_tables(lanes, rows, pattern), *summary)
    return summary
