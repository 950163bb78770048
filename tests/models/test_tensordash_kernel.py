"""The fused TensorDash kernel against the reference scheduler: cycles and non-zero counts, pass by pass."""

import numpy as np
import pytest
import torch
from layer_cases import make_layer

from dashraker.mapping.dataflow import OPS, plan
from dashraker.models import numerics
from dashraker.models import interconnect
from dashraker.models import tensordash as td
from dashraker.models.kernels.tensordash import cycles_and_nonzero

DENSITIES = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
PATTERNS = [
    "T<2,5>",
    "T<0,0>",
    "T<1,0>",
    "T<2,0>",
    "T<4,0>",
    "(0,0),(1,0),(1,-1),(1,1),(1,2)",
    "(0,0),(1,0),(1,2),(2,0),(2,-3),(3,0),(3,1)",
    "(0,0),(2,1),(2,-1),(4,0)",  # no candidate at step 1, candidates past the window's middle
]


def assert_matches_reference(operand, pattern, lookahead):
    cycles, nonzero = cycles_and_nonzero(operand, pattern, lookahead, "greedy")
    flags = td.nonzero(operand) if operand.dtype != bool else operand
    np.testing.assert_array_equal(cycles, td.cycles(flags, pattern, lookahead, "greedy"))
    np.testing.assert_array_equal(nonzero, np.count_nonzero(flags, axis=(1, 2, 3)))
    assert cycles.dtype == nonzero.dtype == np.int64


def random_passes(rng, rows, steps, lanes, repeats=2):
    """Passes at every density of ``DENSITIES`` (each ``repeats`` times): all-zero and all-dense ones included."""
    density = np.repeat(DENSITIES, repeats)[:, None, None, None]
    return rng.random((density.size, rows, steps, lanes)) < density


def usable_lanes(pattern, candidates):
    """Lane counts the pattern supports (no two offsets equal modulo N)."""
    usable = []
    for lanes in candidates:
        try:
            interconnect.lane_groups(lanes, pattern)
        except ValueError:
            continue
        usable.append(lanes)
    return usable


@pytest.mark.parametrize("extra", [0, 1, 2])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_random_masks_every_density(pattern, extra):
    lookahead = interconnect.pattern_lookahead(pattern) + extra
    rng = np.random.default_rng([PATTERNS.index(pattern), extra])
    for lanes in usable_lanes(pattern, [1, 2, 3, 5, 7, 8, 13, 16, 21, 31, 32, 33, 48, 63, 64]):
        rows, steps = int(rng.integers(1, 9)), int(rng.integers(1, 40))
        assert_matches_reference(random_passes(rng, rows, steps, lanes), pattern, lookahead)


@pytest.mark.parametrize("rows", range(1, 9))
def test_rows_sharing_words_and_spanning_several(rows):
    # 16 lanes: 4 rows a word; 24: 2 rows a word, 16 bits unused; 40: one row a word.
    rng = np.random.default_rng(rows)
    for lanes in (16, 24, 40):
        for steps in (1, 2, 3, 17):
            assert_matches_reference(random_passes(rng, rows, steps, lanes), "T<2,5>", 2)


@pytest.mark.parametrize("tiles", [1, 3, 16])
def test_two_threads_from_the_kernels_pass_cycles_as_from_the_reference_schedule(tiles):
    """SPEC section 3: each thread runs its passes as alone, so the mapper lays the kernel's per-pass cycles on the
    threads (``stream_cycles``): the same loop length as the reference schedule's decisions laid cycle by cycle."""
    rng = np.random.default_rng(tiles)
    sparse = rng.random((40, 4, 9, 16)) < 0.05  # mostly one-cycle passes next to dense ones
    for operand in (random_passes(rng, 4, 9, 16), np.concatenate([sparse, random_passes(rng, 4, 9, 16)])):
        kernel, _ = cycles_and_nonzero(operand, "T<2,5>", 2, "greedy")
        decisions = td.schedule(operand, interconnect.parse_pattern("T<2,5>"), 2, "greedy").cycles
        per_tile = np.pad(kernel, (0, -len(kernel) % tiles)).reshape(-1, tiles)  # round robin, as the mapper deals
        expected = [len(td.interleave(decisions[tile::tiles], 2)) for tile in range(tiles)]
        np.testing.assert_array_equal(td.stream_cycles(per_tile, 2), expected)


def test_maximum_sparsity_and_runs_of_zero_steps():
    # Single values scattered over long runs of all-zero steps: every skip length 0..H occurs.
    rng = np.random.default_rng(7)
    for lookahead in range(5):
        operand = np.zeros((40, 3, 60, 16), bool)
        for p in range(40):
            hits = rng.integers(0, operand[p].size, p % 6)
            operand[p].reshape(-1)[hits] = True
        assert_matches_reference(operand, "T<0,0>", lookahead)
        if lookahead >= 2:
            assert_matches_reference(operand, "T<2,5>", lookahead)


def test_empty_shapes():
    assert_matches_reference(np.zeros((3, 2, 0, 16), bool), "T<2,5>", 2)
    assert_matches_reference(np.zeros((0, 2, 5, 16), bool), "T<2,5>", 2)
    assert_matches_reference(np.zeros((2, 0, 7, 16), bool), "T<2,5>", 2)  # no rows: only step skipping


def test_values_read_as_the_scheduler_reads_them():
    # Zero for scheduling is exponent field 0: subnormals and signed zeros are zeros; Inf and NaN are not.
    specials = numerics.fp32_from_bits(torch.tensor([0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x7F800000,
                                                     0x7FC00000, 0xFFFFFFFF, 0x3F800000])).numpy()
    rng = np.random.default_rng(3)
    values = rng.choice(specials, (6, 4, 20, 16))
    assert_matches_reference(values, "T<2,5>", 2)
    as_bool = cycles_and_nonzero(td.nonzero(values), "T<2,5>", 2, "greedy")
    np.testing.assert_array_equal(cycles_and_nonzero(values, "T<2,5>", 2, "greedy"), as_bool)
    strided = values[:, :, ::2]  # not contiguous
    assert_matches_reference(strided, "T<2,5>", 2)


def test_more_than_64_lanes_use_the_reference():
    rng = np.random.default_rng(5)
    for lanes in (65, 80):
        assert_matches_reference(random_passes(rng, 3, 9, lanes, repeats=1), "T<2,5>", 2)


@pytest.mark.parametrize("operand, pattern, lookahead, message", [
    (np.ones((4, 16), bool), "T<2,5>", 2, r"\[passes, rows, steps, lanes\]"),
    (np.ones((1, 1, 4, 16), bool), "T<2,5>", 1, "beyond lookahead 1"),
    (np.ones((1, 1, 4, 2), bool), "(0,0),(1,-1),(1,1)", 1, "slot twice with 2 lanes"),
    (np.ones((1, 1, 4, 16), bool), "T<2,4>", 2, "unknown named pattern"),
])
def test_bad_arguments_as_the_reference(operand, pattern, lookahead, message):
    for function in (cycles_and_nonzero, td.cycles):
        with pytest.raises(ValueError, match=message):
            function(operand, pattern, lookahead, "greedy")


@pytest.mark.parametrize("kind, stride", [("conv2d", 1), ("conv2d", 2), ("linear", 1)])
def test_real_layer_passes(kind, stride):
    # ReLU-sparse activations and pruned gradients as the mapper gathers them, on every operation.
    layer, tensors, _ = make_layer(kind, n=2, c=20, m=12, size=7, stride=stride, seed=stride)
    for op in OPS:
        for problem in plan(layer, tensors, op, lanes=16).problems:
            operand = problem.rows.sets(4, 0, problem.rows.num_sets(4))
            assert_matches_reference(operand, "T<2,5>", 2)
