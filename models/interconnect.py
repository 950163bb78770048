"""TensorDash's interconnect: the sources of each lane's operand mux, their priority and the lane groups (SPEC section 3).

A pattern is the offsets ``(step_offset, lane_offset)`` a lane's multiplier may read,
lanes taken modulo N. The generators (``hw/tensordash``) and the reference models
(``models/tensordash``, the kernels) read the pattern from here, so elaborating RTL
does not import PyTorch.

Priority: the own slot ``(0, 0)`` first, then the other offsets sorted by step
offset, then by lane offset as written (signed) -- for T<2,5>:
(1,-1), (1,0), (1,+1), (1,+3), (2,-2), (2,0), (2,+2).

Groups (``lane_groups``): two lanes conflict when one slot is a candidate of both,
i.e. ``l1 + d1 == l2 + d2 (mod N)`` for two offsets ``(s, d1)``, ``(s, d2)`` of the
same step offset. Lanes are taken in increasing order and each joins the first
group holding no lane it conflicts with, or opens a new group (greedy first fit);
groups are visited in the order they were opened. For N=16 and T<2,5> this gives
{0,5,10}, {1,6,11}, {2,7,12}, {3,8,13}, {4,9,14}, {15}.
"""

import re

import numpy as np

__all__ = ["T25_PATTERN", "parse_pattern", "pattern_lookahead", "priority", "check_pattern", "lane_groups",
           "allocator_iterations"]

# The paper's T<2,5>: the own lane two steps ahead, and lanes -1, +1, +3 (one step ahead) and -2, +2 (two)
T25_PATTERN = ((0, 0), (1, 0), (2, 0), (1, -1), (1, 1), (1, 3), (2, -2), (2, 2))

_NAMED = re.compile(r"T<(\d+),(\d+)>")
_PAIR = re.compile(r"\(?\s*(-?\+?\d+)\s*,\s*([-+]?\d+)\s*\)?")


def parse_pattern(pattern):
    """The offsets ``((step_offset, lane_offset), ...)`` of an interconnect pattern.

    Accepts ``"T<2,5>"`` (the paper's, ``T25_PATTERN``), ``"T<h,0>"`` (lookahead only: own
    lane at steps 0..h), a text list ``"(0,0),(1,0),(1,-1)"`` (or ``"0,0;1,0;1,-1"``)
    or a sequence of pairs. The pattern must hold ``(0, 0)``, have no other offset
    at step 0, no negative step and no repeated offset.
    """
    if isinstance(pattern, str):
        text = pattern.strip()
        named = _NAMED.fullmatch(text.replace(" ", ""))
        if named:
            depth, side = int(named[1]), int(named[2])
            if (depth, side) == (2, 5):
                return T25_PATTERN
            if side == 0:
                return tuple((step, 0) for step in range(depth + 1))
            raise ValueError(f"unknown named pattern {pattern!r}; named ones are 'T<2,5>' and 'T<h,0>'")
        pairs = [piece for piece in re.split(r"\)\s*,\s*\(|;", text) if piece.strip()]
        offsets = []
        for piece in pairs:
            match = _PAIR.fullmatch(piece.strip())
            if not match:
                raise ValueError(f"pattern {pattern!r}: cannot read offset {piece.strip()!r}; "
                                 "expected 'step,lane' pairs like '(0,0),(1,-1)'")
            offsets.append((int(match[1]), int(match[2])))
    else:
        try:
            offsets = [tuple(pair) for pair in pattern]
        except TypeError:
            raise ValueError(f"pattern must be a string or a sequence of (step, lane) pairs, not {pattern!r}") from None
        for pair in offsets:
            if len(pair) != 2 or not all(isinstance(v, (int, np.integer)) for v in pair):
                raise ValueError(f"pattern offset {pair!r} is not a (step_offset, lane_offset) pair of integers")
        offsets = [(int(s), int(d)) for s, d in offsets]
    if (0, 0) not in offsets:
        raise ValueError(f"pattern {offsets!r} lacks the own slot (0, 0)")
    if len(set(offsets)) != len(offsets):
        raise ValueError(f"pattern {offsets!r} repeats an offset")
    for step, lane in offsets:
        if step < 0 or (step == 0 and lane != 0):
            raise ValueError(f"pattern offset {(step, lane)!r}: step offsets must be >= 1 except the own slot (0, 0)")
    return tuple(offsets)


def pattern_lookahead(pattern):
    """The largest step offset of a pattern: the smallest lookahead H that can host it."""
    return max(step for step, _ in parse_pattern(pattern))


def priority(pattern):
    """Pattern indices in the order a lane tries them: (0, 0), then by (step offset, lane offset)."""
    pattern = parse_pattern(pattern)
    return sorted(range(len(pattern)), key=lambda k: (pattern[k] != (0, 0), pattern[k]))


def check_pattern(lanes, pattern, lookahead=None):
    """The parsed pattern, checked against N lanes (no slot named twice) and, if given, the lookahead H."""
    pattern = parse_pattern(pattern)
    if not isinstance(lanes, (int, np.integer)) or lanes < 1:
        raise ValueError(f"lanes must be a positive integer, not {lanes!r}")
    slots = {(step, lane % lanes) for step, lane in pattern}
    if len(slots) != len(pattern):
        raise ValueError(f"pattern {pattern!r} names one slot twice with {lanes} lanes (offsets equal modulo N)")
    if lookahead is not None:
        if not isinstance(lookahead, (int, np.integer)) or lookahead < 0:
            raise ValueError(f"lookahead must be a non-negative integer, not {lookahead!r}")
        if pattern_lookahead(pattern) > lookahead:
            raise ValueError(f"pattern {pattern!r} reaches step offset {pattern_lookahead(pattern)}, "
                             f"beyond lookahead {lookahead}")
    return pattern


def lane_groups(lanes, pattern):
    """Lanes grouped so that no two lanes of a group share a candidate slot (greedy first fit, see module doc)."""
    pattern = check_pattern(lanes, pattern)
    candidates = [{(step, (lane + offset) % lanes) for step, offset in pattern} for lane in range(lanes)]
    groups = []
    for lane in range(lanes):
        for group in groups:
            if all(candidates[lane].isdisjoint(candidates[other]) for other in group):
                group.append(lane)
                break
        else:
            groups.append([lane])
    return groups


def allocator_iterations(scheduler):
    """Request/grant iterations per cycle of ``scheduler``: 0 for ``"greedy"``, n for ``"separable<n>"``."""
    match = re.fullmatch(r"separable([1-9])", scheduler) if isinstance(scheduler, str) else None
    if scheduler == "greedy":
        return 0
    if match is None:
        raise ValueError(f"unknown scheduler {scheduler!r}; schedulers are 'greedy' and 'separable<n>' (n = 1..9)")
    return int(match[1])
