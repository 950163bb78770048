"""Properties of the TensorDash reference scheduler and golden model (SPEC section 3)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dashraker.designs import DESIGNS
from dashraker.models import interconnect, numerics
from dashraker.models import tensordash as td

# the registry's defaults: the models have none of their own
DEFAULTS = DESIGNS["tensordash"].params()
SCHEDULE = (interconnect.parse_pattern(DEFAULTS["pattern"]), DEFAULTS["lookahead"], DEFAULTS["scheduler"])
SUMS = (DEFAULTS["fmt"], DEFAULTS["accumulators"], DEFAULTS["dot"])

PATTERNS = [
    interconnect.T25_PATTERN,
    ((0, 0), (1, 0), (2, 0)),
    ((0, 0), (1, 0), (1, -1), (1, 1)),
    ((0, 0), (1, 0), (1, 2), (2, 0), (2, -3), (3, 0), (3, 1)),
]


def naive_schedule(nonzero, pattern, lookahead, groups):
    """SPEC section 3 step by step, one value at a time: selects per cycle [cycles][rows][lanes]."""
    rows, steps, lanes = nonzero.shape
    remaining = {(r, s, i) for r, s, i in zip(*np.nonzero(nonzero))}
    order = [(0, 0)] + sorted(o for o in pattern if o != (0, 0))
    head, selects = 0, []
    while head < steps:
        cycle = [[-1] * lanes for _ in range(rows)]
        for r in range(rows):
            for lane in (lane for group in groups for lane in group):
                for step, offset in order:
                    slot = (r, head + step, (lane + offset) % lanes)
                    if slot in remaining:
                        remaining.remove(slot)
                        cycle[r][lane] = pattern.index((step, offset))
                        break
        selects.append(cycle)
        head += 1
        for _ in range(lookahead):
            if any(s == head for _, s, _ in remaining):
                break
            head += 1
    assert not remaining
    return selects


@st.composite
def streams(draw, max_lanes=12):
    pattern = draw(st.sampled_from(PATTERNS))
    lookahead = interconnect.pattern_lookahead(pattern) + draw(st.integers(0, 1))
    lanes = draw(st.integers(max(4, 1 + 2 * max(abs(d) for _, d in pattern)), max_lanes))
    passes, rows, steps = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 12))
    density = draw(st.floats(0, 1))
    seed = draw(st.integers(0, 2**32 - 1))
    nonzero = np.random.default_rng(seed).random((passes, rows, steps, lanes)) < density
    return nonzero, pattern, lookahead


def test_spec_groups_for_t25():
    assert interconnect.lane_groups(16, interconnect.T25_PATTERN) == [
        [0, 5, 10], [1, 6, 11], [2, 7, 12], [3, 8, 13], [4, 9, 14], [15]]


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("lanes", [7, 8, 16, 32])
def test_groups_partition_lanes_with_disjoint_candidates(pattern, lanes):
    groups = interconnect.lane_groups(lanes, pattern)
    assert sorted(lane for group in groups for lane in group) == list(range(lanes))
    for group in groups:
        slots = [(s, (lane + d) % lanes) for lane in group for s, d in pattern]
        assert len(slots) == len(set(slots))


def test_priority_order_of_t25():
    assert [interconnect.T25_PATTERN[k] for k in interconnect.priority(interconnect.T25_PATTERN)] == [
        (0, 0), (1, -1), (1, 0), (1, 1), (1, 3), (2, -2), (2, 0), (2, 2)]


@pytest.mark.parametrize("text, expected", [
    ("T<2,5>", interconnect.T25_PATTERN),
    ("T<3,0>", ((0, 0), (1, 0), (2, 0), (3, 0))),
    ("(0,0),(1,0),(1,-1)", ((0, 0), (1, 0), (1, -1))),
    ("0,0; 1,+1", ((0, 0), (1, 1))),
    ([[0, 0], [2, -2]], ((0, 0), (2, -2))),
])
def test_parse_pattern(text, expected):
    assert interconnect.parse_pattern(text) == expected


@pytest.mark.parametrize("text, message", [
    ("T<2,4>", "unknown named pattern"),
    ("(1,0),(2,0)", "lacks the own slot"),
    ("(0,0),(1,x)", "cannot read offset"),
    ("(0,0),(0,1)", "step offsets must be >= 1"),
    ("(0,0),(1,1),(1,1)", "repeats an offset"),
    (3, "sequence of"),
    ([(0, 0, 1)], "pair of integers"),
])
def test_parse_pattern_errors(text, message):
    with pytest.raises(ValueError, match=message):
        interconnect.parse_pattern(text)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="beyond lookahead 1"):
        td.schedule(np.ones((1, 1, 4, 16), bool), interconnect.T25_PATTERN, 1, "greedy")
    with pytest.raises(ValueError, match="slot twice with 2 lanes"):
        interconnect.lane_groups(2, ((0, 0), (1, -1), (1, 1)))
    with pytest.raises(ValueError, match=r"\[passes, rows, steps, lanes\]"):
        td.cycles(np.ones((4, 16), bool), *SCHEDULE)


@settings(max_examples=150, deadline=None)
@given(streams())
def test_schedule_matches_step_by_step_spec(case):
    nonzero, pattern, lookahead = case
    sched = td.schedule(nonzero, pattern, lookahead, "greedy")
    for p in range(nonzero.shape[0]):
        expected = naive_schedule(nonzero[p], pattern, lookahead, sched.groups)
        assert sched.cycles[p] == len(expected)
        assert sched.select[p, :len(expected)].tolist() == expected
        assert (sched.select[p, len(expected):] == -1).all()


@settings(max_examples=200, deadline=None)
@given(streams(max_lanes=40))
def test_every_nonzero_issued_once_and_cycle_bounds(case):
    nonzero, pattern, lookahead = case
    passes, rows, steps, lanes = nonzero.shape
    sched = td.schedule(nonzero, pattern, lookahead, "greedy")
    step, lane = sched.source
    for p in range(passes):
        for r in range(rows):
            issued = [(s, i) for s, i in zip(step[p, :, r].ravel(), lane[p, :, r].ravel()) if s >= 0]
            assert len(issued) == len(set(issued))
            assert sorted(issued) == sorted(zip(*np.nonzero(nonzero[p, r])))
    assert (sched.cycles <= steps).all()
    assert (sched.cycles >= math.ceil(steps / (lookahead + 1))).all()
    # A value is issued while its step is in the window.
    heads = sched.head[:, :, None, None]
    assert ((step < 0) | ((step >= heads) & (step <= heads + lookahead))).all()
    np.testing.assert_array_equal(td.cycles(nonzero, pattern, lookahead, "greedy"), sched.cycles)


@settings(max_examples=60, deadline=None)
@given(streams(), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_outputs_pair_each_value_with_its_own_partner(case, cols, seed):
    # Small integers keep every sum exact, so any order must give the exact dot product.
    nonzero, pattern, lookahead = case
    passes, rows, steps, lanes = nonzero.shape
    gen = torch.Generator().manual_seed(seed)
    a = torch.randint(-8, 9, nonzero.shape, generator=gen).float() * torch.as_tensor(nonzero)
    b = torch.randint(-8, 9, (passes, cols, steps, lanes), generator=gen).float()
    sched = td.schedule(nonzero, pattern, lookahead, "greedy")
    got = td.tile_outputs(sched, a, b, *SUMS)
    expected = torch.einsum("prsl,pcsl->prc", a.double(), b.double()).float()
    assert torch.equal(got, expected)


def test_tile_outputs_follow_the_tree_and_accumulator_order():
    # 1 + 2**-24 rounding shows the order: the golden sums lanes by the tree, cycles in order.
    lanes = 4
    a = torch.tensor([[[[1.0, 2.0**-24, 2.0**-24, 0.0], [0.0, 0.0, 0.0, 2.0**-24]]]])
    b = torch.ones(1, 1, 2, lanes)
    nonzero = (a != 0).numpy()
    sched = td.schedule(nonzero, ((0, 0), (1, 0)), 1, "greedy")
    # Cycle 0: lane 3 promotes (1, 3); tree ((1 + e) + (e + e)) = 1 + 2e (exact in fp32: 1 + 2**-23).
    assert sched.cycles.tolist() == [1]
    got = td.tile_outputs(sched, a, b, "fp32", 1, "tree")
    assert got.item() == 1.0 + 2.0**-23


def test_dense_and_empty_extremes():
    dense = np.ones((2, 3, 10, 16), bool)
    assert td.cycles(dense, *SCHEDULE).tolist() == [10, 10]
    assert td.cycles(~dense, *SCHEDULE).tolist() == [4, 4]
    assert td.cycles(np.zeros((3, 2, 0, 16), bool), *SCHEDULE).tolist() == [0, 0, 0]


# bf16 bit patterns of the subnormal cases (issue 17): 0x807F and 0x0001 are subnormals, 0xFF80 is -Inf.
NEG_SUBNORMAL, TINY, NEG_INF, ONE = 0x807F, 0x0001, 0xFF80, 0x3F80


def _bf16_values(bits):
    return numerics.bf16_bits_to_fp32(torch.as_tensor(bits)).numpy()


def test_zero_for_scheduling_is_exponent_zero():
    bits = np.array([0x0000, 0x8000, TINY, NEG_SUBNORMAL, 0x0080, ONE, NEG_INF, 0x7FC0])
    assert td.nonzero(_bf16_values(bits)).tolist() == [False] * 4 + [True] * 4
    fp32 = numerics.fp32_from_bits(torch.tensor([1, 0x807FFFFF, 0x00800000, 0x80000000])).numpy()
    assert td.nonzero(fp32).tolist() == [False, False, True, False]


@pytest.mark.parametrize("lanes, pattern", [(4, "T<2,0>"), (16, "T<2,5>")])
def test_subnormal_against_inf_is_skipped_not_nan(lanes, pattern):
    """A scheduled subnormal is a zero: never multiplied, so no NaN from its -Inf partner (the baseline gives NaN)."""
    scheduled = np.zeros((1, 1, 1, lanes), np.int64)
    partner = np.zeros((1, 1, 1, lanes), np.int64)
    scheduled[..., 0], partner[..., 0] = NEG_SUBNORMAL, NEG_INF
    design = DESIGNS["tensordash"]
    outputs, cycles = design.golden(design.params(rows=1, cols=1, lanes=lanes, pattern=pattern), scheduled, partner)
    assert outputs.tolist() == [[[0x00000000]]] and cycles.tolist() == [1]
    baseline = DESIGNS["baseline"]
    outputs, _ = baseline.golden(baseline.params(rows=1, cols=1, lanes=lanes), scheduled, partner)
    assert outputs.tolist() == [[[numerics.CANONICAL_NAN_BITS]]]


def test_subnormal_steps_are_skipped():
    """Step 0 dense, step 1 only a subnormal, steps 2..7 zero, H = 2.

    By hand, with the subnormal a zero: cycle 1 issues step 0 and skips the empty steps 1, 2; cycle 2 consumes
    3, 4, 5; cycle 3 consumes 6, 7: 3 cycles. Were it non-zero, step 1 would cost a cycle of its own: cycle 1
    takes step 0, cycle 2 step 1 (skipping 2, 3), cycle 3 steps 4..6, cycle 4 step 7: 4 cycles.
    """
    bits = np.zeros((1, 1, 8, 16), np.int64)
    bits[:, :, 0], bits[0, 0, 1, 0] = ONE, TINY
    values = _bf16_values(bits)
    assert td.cycles(values, *SCHEDULE).tolist() == [3] and td.schedule(values, *SCHEDULE).cycles.tolist() == [3]
    assert td.cycles(values != 0, *SCHEDULE).tolist() == [4]  # the value-is-not-0.0 reading the issue found
    design = DESIGNS["tensordash"]
    params = design.params(rows=1, cols=1)
    outputs, cycles = design.golden(params, bits, np.full_like(bits, ONE))
    assert cycles.tolist() == [3] and outputs.tolist() == [[[0x41800000]]]  # 16 x 1.0
    assert design.cost.evaluate(params, values, None)["cycles"].tolist() == [3]
    assert design.cost.evaluate(params, values, None)["mul"].tolist() == [16]


@settings(max_examples=100, deadline=None)
@given(streams(max_lanes=20), st.integers(1, 5), st.integers(1, 2))
def test_threads_issue_every_nonzero_once_on_their_own_cycles(case, repeat, threads):
    nonzero, pattern, lookahead = case
    nonzero = np.concatenate([nonzero] * repeat)[: 2 * repeat + 1]  # 1 to 11 passes: odd and even counts
    sched = td.schedule(nonzero, pattern, lookahead, "greedy")
    issued = td.interleave(sched.cycles, threads)
    step, lane = sched.source
    for thread in range(threads):
        mine = issued[thread::threads]
        busy = mine[mine[:, 0] >= 0]
        # its passes in order, each decision once and in order, back to back: its idle cycles come only at the end
        expected = [(p, k) for p in range(thread, len(nonzero), threads) for k in range(sched.cycles[p])]
        assert [tuple(d) for d in busy] == expected and (mine[len(busy):, 0] == -1).all()
    for p in range(len(nonzero)):
        decisions = issued[issued[:, 0] == p, 1]
        for r in range(nonzero.shape[1]):
            sources = [(s, i) for s, i in zip(step[p, decisions, r].ravel(), lane[p, decisions, r].ravel()) if s >= 0]
            assert sorted(sources) == sorted(zip(*np.nonzero(nonzero[p, r])))
    assert len(issued) == td.stream_cycles(sched.cycles[:, None], threads)[0]
    assert len(issued) == 0 or (issued[-1] >= 0).all()  # the loop ends with the last decision
    if threads == 1:
        assert len(issued) == sched.cycles.sum()
    elif len(nonzero) == 2:  # a pair: thread 0's last decision on cycle 2 d_0 - 2, thread 1's on 2 d_1 - 1
        assert len(issued) == max(2 * sched.cycles[0] - 1, 2 * sched.cycles[1])


@pytest.mark.parametrize("decisions, threads, expected", [
    ([[3], [5]], 2, 10),  # a pair: thread 1's last decision on cycle 9, 2 d_1
    ([[5], [3]], 2, 9),  # thread 0's on cycle 8: 2 d_0 - 1
    ([[4], [4]], 2, 8),
    ([[4]], 2, 7),  # a lone pass: 2 d - 1, the other thread's cycles idle
    ([[2], [2], [3]], 2, 9),  # odd count: thread 0 runs 2 + 3 decisions, thread 1 2
    ([[2], [2], [3]], 1, 7),
    ([[0, 1], [0, 2]], 2, [0, 4]),  # two tiles' streams side by side; no decisions, no cycles
    (np.zeros((0, 3), int), 2, [0, 0, 0]),
])
def test_stream_cycles_by_hand(decisions, threads, expected):
    np.testing.assert_array_equal(td.stream_cycles(decisions, threads), np.atleast_1d(expected))
    for tile, cycles in enumerate(np.atleast_1d(expected)):
        assert len(td.interleave(np.asarray(decisions)[:, tile], threads)) == cycles


@pytest.mark.parametrize("threads", [0, True, 1.5])
def test_threads_refused(threads):
    with pytest.raises(ValueError, match="threads must be an integer >= 1"):
        td.stream_cycles([[1]], threads)


@pytest.mark.parametrize("decisions, threads, expected", [
    ([3, 1, 2], 1, [2, 3, 5]),  # back to back
    ([3, 5], 2, [4, 9]),  # a pair: 2 d_0 - 2 and 2 d_1 - 1
    ([5, 1, 1, 1], 2, [8, 1, 10, 3]),  # thread 1's short passes end while thread 0's long one runs
    ([1, 5, 1, 1, 1], 2, [0, 9, 2, 11, 4]),  # thread 0's passes end while thread 1's long one runs; its last alone
    ([4], 2, [6]),  # a lone pass: 2 d - 1 cycles
])
def test_pass_ends_by_hand(decisions, threads, expected):
    """Each pass ends on its last decision's cycle in ``interleave``; the stream lasts one cycle more than the last."""
    ends = td.pass_ends(decisions, threads)
    assert ends.tolist() == expected
    assert ends.max() + 1 == td.stream_cycles(np.asarray(decisions)[:, None], threads)[0]


def test_pass_ends_needs_a_decision_per_pass():
    with pytest.raises(ValueError, match="every pass takes at least one decision, not 0"):
        td.pass_ends([2, 0], 2)
