"""The TensorDash scheduler of one PE row: picks, for every lane, the value it issues this cycle (SPEC section 3)."""

from amaranth.hdl import Const, Module, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.models.interconnect import lane_groups, parse_pattern, pattern_lookahead, priority

__all__ = ["Scheduler", "select_layout", "check_parameters"]


def select_layout(pattern):
    """One lane's select: ``valid`` (the lane issues a value) and ``index`` into the pattern."""
    return data.StructLayout({"index": range(len(parse_pattern(pattern))), "valid": 1})


def check_parameters(lanes, lookahead, pattern):
    """Validate (N, H, pattern) at once, with errors quoting the offending value; returns the parsed pattern."""
    if not isinstance(lanes, int) or lanes < 1:
        raise ValueError(f"TensorDash lanes must be a positive integer, not {lanes!r}")
    if not isinstance(lookahead, int) or lookahead < 0:
        raise ValueError(f"TensorDash lookahead must be a non-negative integer, not {lookahead!r}")
    pattern = parse_pattern(pattern)
    if pattern_lookahead(pattern) > lookahead:
        raise ValueError(f"pattern {pattern!r} reaches step offset {pattern_lookahead(pattern)}, "
                         f"beyond lookahead {lookahead}")
    lane_groups(lanes, pattern)  # rejects offsets that coincide modulo N
    return pattern


class Scheduler(wiring.Component):
    """Combinational scheduler of one row over a window of H+1 steps.

    Lanes are resolved group by group (``models.interconnect.lane_groups``); the lanes
    of a group share no candidate slot, so they decide in parallel and the chain is
    as deep as the number of groups (6 for N=16, T<2,5>), not N. A lane takes its own
    slot if non-zero, else the first non-zero candidate in ``priority`` order; the
    taken slot is cleared in ``remaining`` for the groups after it.

    Parameters
    ----------
    lanes : int
        Lanes N.
    lookahead : int
        Lookahead H: the window holds steps t .. t+H.
    pattern : str or sequence of (step_offset, lane_offset)
        Interconnect pattern (``models.interconnect.parse_pattern``).

    Ports
    -----
    window : In(ArrayLayout(unsigned(lanes), lookahead + 1))
        Non-zero flags of the window's steps, bit i = lane i.
    select : Out(ArrayLayout(select_layout(pattern), lanes))
        What each lane issues this cycle.
    remaining : Out(ArrayLayout(unsigned(lanes), lookahead + 1))
        The window's flags once the issued values are taken (step 0 is always empty).
    """

    def __init__(self, lanes, lookahead, pattern):
        self.pattern = check_parameters(lanes, lookahead, pattern)
        self.lanes, self.lookahead = lanes, lookahead
        self.groups = lane_groups(lanes, self.pattern)
        flags = data.ArrayLayout(unsigned(lanes), lookahead + 1)
        super().__init__({
            "window": In(flags),
            "select": Out(data.ArrayLayout(select_layout(self.pattern), lanes)),
            "remaining": Out(flags),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        state = {(step, lane): self.window[step][lane]
                 for step in range(self.lookahead + 1) for lane in range(lanes)}
        for number, group in enumerate(self.groups):
            cleared = {}
            for lane in group:
                select = self.select[lane]
                earlier = Const(0, 1)  # some higher-priority candidate holds a value
                for k in priority(self.pattern):
                    step, offset = self.pattern[k]
                    slot = (step, (lane + offset) % lanes)
                    with m.If(state[slot] & ~earlier):
                        m.d.comb += [select.valid.eq(1), select.index.eq(k)]
                    # The slot keeps its value unless this lane took it.
                    cleared[slot] = state[slot] & earlier
                    earlier = earlier | state[slot]
            for (step, lane), value in cleared.items():
                after = Signal(name=f"group{number}_step{step}_lane{lane}")
                m.d.comb += after.eq(value)
                state[step, lane] = after
        for step in range(self.lookahead + 1):
            for lane in range(lanes):
                m.d.comb += self.remaining[step][lane].eq(state[step, lane])
        return m
