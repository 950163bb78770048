"""DNNsim's TensorDash cycle count (``mapping.dnnsim``): the leading all-zero step jumped, the carried skip counter."""

import numpy as np
import pytest

from dashraker.mapping.dnnsim import carried_cycles, summaries, zero_run
from dashraker.models import interconnect, tensordash

PATTERN, H, LANES = interconnect.T25_PATTERN, 2, 16


def _dnnsim(passes, skip=0, pattern=PATTERN, h=H):
    """DNNsim's TensorDash.cpp written out line by line for passes [P, rows, steps, lanes] (bool): per pass, the
    scheduler's own counter (from 0) jumps up to H all-zero lines without promoting into them, and fills every other
    line group by group in priority order (SPEC section 3's promotion); then the counting loop walks the scheduled
    lines with one counter carried from pass to pass."""
    lanes = passes[0].shape[-1]
    pattern = interconnect.parse_pattern(pattern)
    groups, order = tensordash.lane_groups(lanes, pattern), tensordash.priority(pattern)
    cycles = []
    for flags in passes:
        state = flags.transpose(1, 0, 2).copy()  # [steps, rows, lanes]
        steps = len(state)
        jumped = 0
        for t in range(steps):
            if jumped < h and not state[t].any():
                jumped += 1
                continue
            jumped = 0
            for group in groups:
                for lane in group:
                    for k in order:
                        step, offset = pattern[k]
                        source = (lane + offset) % lanes
                        take = ~state[t, :, lane] & (t + step < steps)
                        if step and t + step < steps:
                            take &= state[t + step, :, source]
                            state[t, take, lane] = True
                            state[t + step, take, source] = False
        count = 0
        for t in range(steps):
            if skip < h and not state[t].any():
                skip += 1
                continue
            skip, count = 0, count + 1
        cycles.append(count)
    return np.array(cycles)


def _lines(*lines, rows=1):
    """A pass of one row whose steps are 'full' (every lane non-zero), '0' (all zero) or a lane list."""
    flags = np.zeros((rows, len(lines), LANES), bool)
    for t, line in enumerate(lines):
        flags[:, t, :] = True if line == "full" else False if line == "0" else np.isin(np.arange(LANES), line)
    return flags


def test_leading_all_zero_steps_are_jumped():
    """[0, 0, 0, full] with H = 2: DNNsim jumps steps 0 and 1, fills step 2 from step 3: one cycle; SPEC section 3's
    window issues step 0 (nothing to promote), skips 1 and 2, issues 3: two cycles."""
    passes = _lines("0", "0", "0", "full")[None]
    summary = summaries(passes, PATTERN, H)
    assert (summary.leading[0], summary.first[0], summary.inner[0], summary.tail[0]) == (3, 2, 1, 1)
    assert carried_cycles(summary, H).tolist() == [1] == _dnnsim(passes).tolist()
    assert tensordash.cycles(passes, PATTERN, H, "greedy").tolist() == [2]


@pytest.mark.parametrize("first, left, cycles", [
    (("full", "0", "full"), 0, [2, 1]),  # ends on a busy step: B's two zero steps are jumped
    (("full", "full", "0"), 1, [2, 2]),  # one zero step jumped: B's second zero step costs a cycle
    (("full", "0", "0"), 2, [1, 2]),  # two jumped: B's first zero step costs, its second is jumped
])
def test_the_skip_counter_carries_from_pass_to_pass(first, left, cycles):
    """Pass B = [0, 0, full] costs 1 cycle alone, and after pass A whatever A's trailing zero steps left."""
    a, b = _lines(*first), _lines("0", "0", "full")
    summary = summaries(np.stack([a, b]), PATTERN, H)
    assert summary.tail[0] == left
    assert carried_cycles(summary, H).tolist() == _dnnsim(np.stack([a, b])).tolist() == cycles
    assert carried_cycles(summaries(b[None], PATTERN, H), H).tolist() == [1]


def test_zero_run():
    """H = 2: from counter 0, two zero steps are free and the third costs; from counter 2 the first costs."""
    assert [zero_run(n, 0, 2) for n in range(7)] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 0)]
    assert [zero_run(n, 2, 2) for n in range(4)] == [(0, 2), (1, 0), (1, 1), (1, 2)]


@pytest.mark.parametrize("lanes, pattern, h", [
    (16, PATTERN, H), (8, PATTERN, 3), (64, PATTERN, H), (4, "T<1,0>", 1), (1, "T<3,0>", 3),
    (32, "(0,0),(1,0),(1,-1),(2,1)", 2),
])
@pytest.mark.parametrize("seed", range(4))
def test_random_passes_as_dnnsim_counts_them(seed, lanes, pattern, h):
    """Random sparse passes with runs of all-zero steps (leading, inner, trailing), 1 to 9 rows (one to several
    words of the kernel's packing), carried from pass to pass: the summaries and the carried counter give DNNsim's
    literal count, and so does each pass alone from every counter."""
    rng = np.random.default_rng(seed)
    rows, steps = int(rng.integers(1, 10)), int(rng.integers(1, 14))
    passes = rng.random((12, rows, steps, lanes)) < rng.choice([0.05, 0.3, 0.7])
    idle = rng.random((12, steps)) < 0.45
    passes &= ~idle[:, None, :, None]
    passes[rng.random(12) < 0.2] = False  # some all-zero passes
    summary = summaries(passes, pattern, h)
    skip = int(rng.integers(0, h + 1))
    assert carried_cycles(summary, h, skip=skip).tolist() == _dnnsim(passes, skip, pattern, h).tolist()
    for p in range(len(passes)):
        for skip in range(h + 1):
            alone = carried_cycles(summary, h, order=[p], skip=skip)
            assert alone.tolist() == _dnnsim(passes[p : p + 1], skip, pattern, h).tolist()


@pytest.mark.parametrize("op", ["fwd", "bwd_input", "bwd_weight"])
@pytest.mark.parametrize("weights_sparser", [False, True])
def test_the_mapper_counts_as_dnnsim_under_the_dnnsim_preset(layer_case, op, weights_sparser):
    """``map --dataflow dnnsim`` on TensorDash: every pass of a layer as DNNsim counts it, written out above, with one
    counter per sample, carried over its passes (windows or activations outer: row sets outer when they are the
    scheduled side, else column sets outer) and its kernel offsets; one per stride phase of the input gradient. The
    multiplications are those the design's own evaluation counts, which DNNsim's count replaces."""
    import dataclasses

    from dashraker.mapping.config import load_config
    from dashraker.mapping.dataflow import plan
    from dashraker.mapping.engine import map_op

    layer, tensors, _ = layer_case(n=2, c=20, m=9, size=6, stride=2, padding=1)
    tensors.input[:, :, :2] = 0.0  # all-zero leading steps in some passes
    if weights_sparser:
        tensors.weight[:, :17] = 0.0
    config = load_config(None, "tensordash")
    config = dataclasses.replace(config, dataflow="dnnsim", tiles=1, params={**config.params, "rows": 2, "cols": 3})
    result = map_op(config, layer, tensors, op)
    op_plan = plan(layer, tensors, op, config.lanes, dataflow="dnnsim")
    rows_outer = op_plan.scheduled == ("G" if op == "bwd_input" else "A")
    assert rows_outer != (weights_sparser and op != "bwd_weight")  # both orders are covered
    calls, multiplications = {}, 0
    for problem in op_plan.problems:
        values = problem.rows.sets(config.rows, 0, problem.rows.num_sets(config.rows))
        own = config.design.cost.evaluate(config.params, values, None)  # what DNNsim's count stands in for
        assert set(own) == {"cycles", "mul"}
        multiplications += int(own["mul"].sum()) * problem.cols.count
        sets = tensordash.nonzero(values)
        col_sets = problem.cols.num_sets(config.cols)
        order = np.repeat(np.arange(len(sets)), col_sets) if rows_outer else np.tile(np.arange(len(sets)), col_sets)
        calls.setdefault(problem.label.split(" offset")[0], []).extend(sets[order])
    want = sum(int(_dnnsim(passes).sum()) for passes in calls.values())  # passes of unequal steps (phases)
    assert result["cycles"] - config.design.fill(config.params) == want
    assert result["counts"]["mul"] == multiplications
    assert result["problems"] == len(op_plan.problems)
    assert len(calls) == (2 * 4 if op == "bwd_input" else 2)  # a counter per sample (and stride phase)
