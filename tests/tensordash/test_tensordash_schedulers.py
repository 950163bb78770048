"""The TensorDash scheduler variants (SPEC section 3, amended 2026-11-27): the separable allocator's reference
model against a value-by-value reading of its definition, its invariants, the packed and fused models, the
registry parameter and the dnnsim preset."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dashraker.designs import DESIGNS
from dashraker.designs.tensordash import SCHEDULERS
from dashraker.mapping.config import ConfigError, load_config
from dashraker.models import interconnect
from dashraker.models import tensordash as td
from dashraker.models.kernels.tensordash import cycles_and_nonzero

from test_tensordash_model import PATTERNS, SCHEDULE, streams

T25 = interconnect.parse_pattern("T<2,5>")

ALLOCATORS = [name for name in SCHEDULERS if name != "greedy"]


def naive_allocator(nonzero, pattern, lookahead, iterations):
    """The separable allocator value by value, one row and one request at a time: selects [cycles][rows][lanes]."""
    rows, steps, lanes = nonzero.shape
    remaining = {(r, s, i) for r, s, i in zip(*np.nonzero(nonzero))}
    candidates = sorted(o for o in pattern if o != (0, 0))
    head, selects = 0, []
    while head < steps:
        cycle = [[-1] * lanes for _ in range(rows)]
        for r in range(rows):
            idle = []
            for lane in range(lanes):
                if (r, head, lane) in remaining:
                    remaining.remove((r, head, lane))
                    cycle[r][lane] = pattern.index((0, 0))
                else:
                    idle.append(lane)
            for _ in range(iterations):
                asked = {}  # slot -> [(rank of the offset, lane, offset)]
                for lane in idle:
                    for rank, (step, offset) in enumerate(candidates):
                        slot = (r, head + step, (lane + offset) % lanes)
                        if slot in remaining:
                            asked.setdefault(slot, []).append((rank, lane, (step, offset)))
                            break
                for slot, requests in asked.items():
                    _, lane, offset = min(requests)
                    remaining.remove(slot)
                    cycle[r][lane] = pattern.index(offset)
                    idle.remove(lane)
        selects.append(cycle)
        head += 1
        for _ in range(lookahead):
            if any(s == head for _, s, _ in remaining):
                break
            head += 1
    assert not remaining
    return selects


def test_scheduler_names():
    assert [interconnect.allocator_iterations(name) for name in SCHEDULERS] == [0, 1, 2]
    with pytest.raises(ValueError, match="unknown scheduler 'fast'"):
        td.schedule(np.ones((1, 1, 2, 8), bool), *SCHEDULE[:2], "fast")


@settings(max_examples=150, deadline=None)
@given(streams(), st.sampled_from(ALLOCATORS))
def test_allocator_matches_its_definition(case, scheduler):
    nonzero, pattern, lookahead = case
    sched = td.schedule(nonzero, pattern, lookahead, scheduler)
    for p in range(nonzero.shape[0]):
        expected = naive_allocator(nonzero[p], pattern, lookahead, interconnect.allocator_iterations(scheduler))
        assert sched.cycles[p] == len(expected)
        assert sched.select[p, :len(expected)].tolist() == expected
        assert (sched.select[p, len(expected):] == -1).all()


@settings(max_examples=150, deadline=None)
@given(streams(max_lanes=40), st.sampled_from(SCHEDULERS))
def test_every_nonzero_issued_once_from_its_own_slot(case, scheduler):
    nonzero, pattern, lookahead = case
    passes, rows, steps, lanes = nonzero.shape
    sched = td.schedule(nonzero, pattern, lookahead, scheduler)
    step, lane = sched.source
    for p in range(passes):
        for r in range(rows):
            issued = [(s, i) for s, i in zip(step[p, :, r].ravel(), lane[p, :, r].ravel()) if s >= 0]
            assert len(issued) == len(set(issued))
            assert sorted(issued) == sorted(zip(*np.nonzero(nonzero[p, r])))
    heads = sched.head[:, :, None, None]
    assert ((step < 0) | ((step >= heads) & (step <= heads + lookahead))).all()
    # Cycle bounds: 1..H+1 steps a cycle; at most N values of a row a cycle.
    busiest = nonzero.sum(axis=(2, 3)).max(axis=1)
    assert (sched.cycles <= steps).all()
    assert (sched.cycles >= math.ceil(steps / (lookahead + 1))).all()
    assert (sched.cycles >= -(-busiest // lanes)).all()
    consumed = np.diff(np.concatenate([sched.head, np.full((passes, 1), -1)], axis=1), axis=1)
    assert (np.where(sched.head[:, 1:] >= 0, consumed[:, :-1], 1) >= 1).all()
    assert (np.where(sched.head[:, 1:] >= 0, consumed[:, :-1], 1) <= lookahead + 1).all()
    np.testing.assert_array_equal(td.cycles(nonzero, pattern, lookahead, scheduler), sched.cycles)
    np.testing.assert_array_equal(cycles_and_nonzero(nonzero, pattern, lookahead, scheduler)[0], sched.cycles)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(1, 12), st.floats(0, 1), st.integers(0, 2**32 - 1), st.sampled_from(ALLOCATORS))
def test_without_lookaside_every_scheduler_is_greedy(depth, lanes, density, seed, scheduler):
    """With T<h,0> each slot is a candidate of one lane only: no request ever loses, so the schedules agree."""
    pattern = interconnect.parse_pattern(f"T<{depth},0>")
    nonzero = np.random.default_rng(seed).random((2, 2, 9, lanes)) < density
    np.testing.assert_array_equal(td.schedule(nonzero, pattern, depth, scheduler).select,
                                  td.schedule(nonzero, pattern, depth, "greedy").select)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_dense_and_empty_extremes(scheduler):
    dense = np.ones((2, 3, 10, 16), bool)
    assert td.cycles(dense, *SCHEDULE[:2], scheduler).tolist() == [10, 10]
    assert td.schedule(~dense, *SCHEDULE[:2], scheduler).cycles.tolist() == [4, 4]
    assert cycles_and_nonzero(np.zeros((3, 2, 0, 16), bool), *SCHEDULE[:2], scheduler)[0].tolist() == [0, 0, 0]


def test_allocator_loses_where_greedy_finds_a_value():
    """By hand, N = 8, T<2,5>: step 0 holds lanes 2..7, step 1 slots 1 and 4. Idle lanes 0 and 1 both request
    slot 1 (lane 0 by (1,+1), its (1,-1) and (1,0) slots 7 and 0 being zero; lane 1 by (1,0)); slot 1 grants lane
    1, (1,0) coming before (1,+1). Lane 0 reaches nothing else, and slot 4 (lane 1's (1,+3)) stays: a second
    cycle, in either number of rounds. Greedy visits lane 0 first, which takes slot 1; lane 1 then takes slot 4:
    one cycle. With slot 4 moved to slot 3 (lane 0's (1,+3); lane 1 reaches 0, 1, 2, 4), greedy's lane 0 takes
    slot 1 and no idle lane reaches slot 3: two cycles; the allocator's second round gives slot 3 to its loser,
    lane 0: one cycle. Neither scheduler is always the faster."""
    nonzero = np.zeros((1, 1, 2, 8), bool)
    nonzero[0, 0, 0, 2:] = True
    nonzero[0, 0, 1, [1, 4]] = True
    assert [td.schedule(nonzero, T25, 2, name).cycles[0] for name in SCHEDULERS] == [1, 2, 2]
    nonzero[0, 0, 1, [3, 4]] = True, False
    assert [td.schedule(nonzero, T25, 2, name).cycles[0] for name in SCHEDULERS] == [2, 2, 1]


@pytest.mark.parametrize("scheduler", ALLOCATORS)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_kernel_matches_reference_every_density(pattern, scheduler):
    rng = np.random.default_rng([PATTERNS.index(pattern), len(scheduler)])
    lookahead = interconnect.pattern_lookahead(pattern)
    for lanes in (8, 13, 16, 32, 64):
        rows, steps = int(rng.integers(1, 9)), int(rng.integers(1, 40))
        density = np.repeat(np.linspace(0, 1, 11), 2)[:, None, None, None]
        flags = rng.random((density.size, rows, steps, lanes)) < density
        cycles, nonzero = cycles_and_nonzero(flags, pattern, lookahead, scheduler)
        np.testing.assert_array_equal(cycles, td.schedule(flags, pattern, lookahead, scheduler).cycles)
        np.testing.assert_array_equal(nonzero, flags.sum(axis=(1, 2, 3)))


def test_registry_parameter_and_dnnsim_preset(tmp_path):
    design = DESIGNS["tensordash"]
    assert design.parameter("scheduler").choices == SCHEDULERS
    with pytest.raises(ValueError, match="scheduler must be one of greedy, separable1, separable2, not 'fast'"):
        design.params(scheduler="fast")
    path = tmp_path / "accel.yaml"
    path.write_text("design: tensordash\ntensordash:\n  scheduler: separable2\n")
    config = load_config(path)
    assert config.params["scheduler"] == "separable2"
    dnnsim = dataclasses.replace(config, dataflow="dnnsim")
    assert dnnsim.params["scheduler"] == "greedy" and dnnsim.as_dict()["scheduler"] == "greedy"
    assert dataclasses.replace(dnnsim, dataflow="default").params["scheduler"] == "separable2"
    path.write_text("design: tensordash\ndataflow: dnnsim\ntensordash:\n  scheduler: separable1\n")
    assert load_config(path).params["scheduler"] == "greedy"
    path.write_text("design: tensordash\ntensordash:\n  scheduler: fast\n")
    with pytest.raises(ConfigError, match=r"field 'tensordash.scheduler': must be one of"):
        load_config(path)
