"""The fused FPRaker kernels against the golden tile they replace in the mapper: every field of every result, equal;
the cost-only kernel the mapper runs on the CPU (``tile_cycles``) against the same golden results in every case.

Each case runs on Numba's CPU kernel and on the CUDA kernel (where PyTorch sees a GPU; skipped in CI).
"""

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from layer_cases import make_layer

from dashraker.designs import DESIGNS
from dashraker.mapping.config import load_config
from dashraker.mapping.engine import map_op
from dashraker.models import fpraker as golden
from dashraker.models.kernels import fpraker as kernel
from dashraker.models.numerics import fp32_bits

sys.path.insert(0, str(Path(__file__).parents[1] / "fpraker"))  # the FPRaker stimulus, shared with the golden's tests
from fpraker_stimulus import FIVE_TERM_SIGNIFICANDS, random_bits, real_bits  # noqa: E402

ONE, INF, NAN = 127 << 7, 0xFF << 7, (0xFF << 7) | 0x40
NEG = 1 << 15

# the registry's defaults: the models have none of their own
GUARD_BITS, ZERO_BLOCK_CYCLES = (DESIGNS["fpraker"].parameter(name).default for name in ("guard_bits", "zero_block_cycles"))
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _on_cpu(result):
    """A ``TileResult`` on a GPU, brought back."""
    return golden.TileResult(*(getattr(result, field.name).cpu() for field in dataclasses.fields(result)))


def _on_cuda(a, b, guard_bits, zero_block_cycles):
    from dashraker.models.kernels import fpraker_cuda

    return _on_cpu(fpraker_cuda.tile(a, b, guard_bits, zero_block_cycles))


@pytest.fixture(params=["numba", pytest.param("cuda", marks=cuda)])
def tile(request):
    """The kernel under test, as a ``tile`` function whose results are on the CPU."""
    return {"numba": kernel.tile, "cuda": _on_cuda}[request.param]


def assert_equal_results(got, want):
    """Two ``TileResult``s equal in every field: dtypes, shapes and values (outputs as fp32 bit patterns)."""
    for field in dataclasses.fields(want):
        g, w = getattr(got, field.name), getattr(want, field.name)
        assert (g.dtype, g.shape) == (w.dtype, w.shape), field.name
        if field.name == "outputs":
            g, w = fp32_bits(g), fp32_bits(w)
        assert torch.equal(g, w), f"{field.name} differs"


def as_values(bits, low_halves=None):
    """bf16 patterns as the float32 values the mapper holds (``low_halves``, if given, in their ignored low bits)."""
    values = np.asarray(bits).astype(np.uint32) << 16
    return (values if low_halves is None else values | low_halves).view(np.float32)


def assert_same(tile, a, b, guard_bits=GUARD_BITS, zero_block_cycles=ZERO_BLOCK_CYCLES):
    """The kernel's and the golden tile's results on bf16 patterns ``a`` and ``b`` are equal, and so is the cost that
    ``tile_cycles`` gives on them as values; returns the kernel's."""
    got = tile(a, b, guard_bits, zero_block_cycles)
    want = golden.tile(a, b, guard_bits, zero_block_cycles)
    assert_equal_results(got, want)
    assert_cost(kernel.tile_cycles(as_values(a), as_values(b), guard_bits, zero_block_cycles), want)
    return got


def assert_cost(cost, want):
    """``tile_cycles``' arrays equal a ``TileResult``'s fields of the same names, dtypes and shapes included."""
    assert set(cost) == {"cycles", "terms", "skipped_terms", "pe_cycles", "step_cycles"}
    for name, values in cost.items():
        assert torch.equal(torch.from_numpy(values), getattr(want, name)), f"tile_cycles' {name} differs"


@pytest.mark.parametrize("zero_block_cycles", [0, 1])
@pytest.mark.parametrize("guard_bits", range(8))
def test_random_operands(tile, guard_bits, zero_block_cycles):
    rng = np.random.default_rng(guard_bits * 2 + zero_block_cycles)
    for spread, corner in [(2, 0.0), (8, 0.3), (40, 0.6)]:
        rows, cols, steps, lanes = rng.integers(1, 5), rng.integers(1, 5), rng.integers(1, 13), rng.integers(1, 17)
        a = random_bits(rng, (3, rows, steps, lanes), spread, corner)
        b = random_bits(rng, (3, cols, steps, lanes), spread, corner)
        assert_same(tile, a, b, guard_bits, zero_block_cycles)


@pytest.mark.parametrize("lanes", range(1, 17))
def test_lanes(tile, lanes):
    rng = np.random.default_rng(lanes)
    a, b = random_bits(rng, (4, 3, 12, lanes)), random_bits(rng, (4, 2, 12, lanes))
    assert_same(tile, a, b, guard_bits=lanes % 8, zero_block_cycles=lanes % 2)


def test_long_passes_and_far_exponents(tile):
    """Many steps, so the running maximum exponent rises far above most products and their terms fall out of bounds."""
    rng = np.random.default_rng(7)
    a, b = random_bits(rng, (3, 4, 300, 8), spread=30, corner=0.1), random_bits(rng, (3, 4, 300, 8), spread=3)
    result = assert_same(tile, a, b)
    assert int(result.skipped_terms.sum()) > 0


def test_many_passes(tile):
    """More PEs of more passes than a block of GPU threads, so the passes spread over many."""
    rng = np.random.default_rng(9)
    assert_same(tile, random_bits(rng, (150, 3, 9, 8), corner=0.3), random_bits(rng, (150, 4, 9, 8), corner=0.3))


def _power(k, negative=False):
    """The bf16 pattern of -2**k or 2**k."""
    return negative << 15 | (127 + k) << 7


def test_frame_moves_drop_the_bits_below_the_new_frame(tile):
    """Small products first, then one that moves the frame up 24 bits (G = 3): the small ones keep only the bits at
    or above the new frame's unit 2**(F - 150 - G), and the rounding sees exactly those. Pass 0: 2**-15 + 2**-21,
    then 2**9 (E = F = 136, unit 2**-17): 2**-21 is dropped, 2**9 + 2**-15 is a tie, rounded to even: 2**9 (the
    exact sum rounds up). Pass 1: 2**-11 + 2**-15 (E = 116 in the frame 112), then 2**13 (E = 140, F = 136, unit
    2**-17): both kept, above the tie, rounded up to 2**13 + 2**-10 (with frames of 4 bits, 2**-15 would be lost)."""
    a = np.full((2, 1, 2, 2), _power(0))
    b = np.array([[[[_power(-15), _power(-21)], [_power(9), 0]]], [[[_power(-11), _power(-15)], [_power(13), 0]]]])
    result = assert_same(tile, a, b)
    assert result.outputs.flatten().tolist() == [2.0**9, 2.0**13 + 2.0**-10]


def test_accumulator_beyond_2_53(tile):
    """With G = 29 the accumulator leaves float64's exact integers in one step. Pass 0: eight products 1 (E = 127,
    frame 120, offset 7: U = 8 * 2**52 << 7 = 2**62) and 1 x -2**-52 (d = 52, its one term in bound: floor(-1) =
    -1, moved to -128): U = 2**62 - 128, which float64 rounds up to 2**62; the value 8 - 2**-52 rounds to 8.
    Pass 1: sixteen products -1: U = -2**63, the int64 without a magnitude; the value is -16."""
    a = np.full((2, 1, 1, 16), _power(0))
    b = np.array([[[[_power(0)] * 8 + [_power(-52, negative=True)] + [0] * 7]], [[[_power(0, negative=True)] * 16]]])
    result = assert_same(tile, a, b, guard_bits=29)
    assert result.outputs.flatten().tolist() == [8.0, -16.0]


def _signs(rng, shape):
    return rng.integers(0, 2, shape) << 15


@pytest.mark.parametrize(
    "case",
    [
        lambda rng, shape: np.zeros(shape, np.int64),  # all-zero streams
        lambda rng, shape: _signs(rng, shape),  # signed zeros
        lambda rng, shape: _signs(rng, shape) | rng.integers(1, 128, shape),  # subnormals: zeros (DAZ)
        lambda rng, shape: _signs(rng, shape) | (127 << 7) | (rng.choice(FIVE_TERM_SIGNIFICANDS, shape) - 128),  # dense
        lambda rng, shape: np.where(np.arange(shape[-1]) == rng.integers(0, shape[-1], shape[:-1])[..., None],
                                    ONE | rng.integers(0, 128, shape), 0),  # maximum sparsity: one live lane a step
        lambda rng, shape: _signs(rng, shape) | INF,  # Inf products (and Inf x 0, Inf - Inf with the partner)
        lambda rng, shape: np.where(rng.random(shape) < 0.05, NAN, ONE),  # a NaN now and then
        lambda rng, shape: _signs(rng, shape) | (254 << 7) | rng.integers(0, 128, shape),  # overflow to Inf
        lambda rng, shape: _signs(rng, shape) | (1 << 7) | rng.integers(0, 128, shape),  # underflow, flushed
    ],
    ids=["zeros", "signed-zeros", "subnormals", "dense", "max-sparsity", "inf", "nan", "huge", "tiny"],
)
@pytest.mark.parametrize("partner", ["random", "zeros", "ones", "same"])
def test_special_streams(tile, case, partner):
    rng = np.random.default_rng(3)
    a = case(rng, (4, 2, 10, 8)).astype(np.int64)
    b = {
        "random": lambda: random_bits(rng, (4, 3, 10, 8), spread=8, corner=0.3),
        "zeros": lambda: _signs(rng, (4, 3, 10, 8)),
        "ones": lambda: np.full((4, 3, 10, 8), ONE),
        "same": lambda: case(rng, (4, 3, 10, 8)).astype(np.int64),
    }[partner]()
    for zero_block_cycles in (0, 1):
        assert_same(tile, a, b, 3, zero_block_cycles)
        assert_same(tile, b, a, 0, zero_block_cycles)  # the case on the partner side


def test_real_tensors(tile):
    """Activations, weights and gradients of a real training step (a small CNN on the digits data)."""
    a, b = np.split(real_bits(np.random.default_rng(11), (12, 4, 36, 8)), 2)
    for guard_bits in (0, 3, 7):
        assert_same(tile, a, b, guard_bits)


def test_degenerate_shapes(tile):
    for a_shape, b_shape in [((0, 2, 3, 8), (0, 3, 3, 8)), ((2, 2, 0, 8), (2, 3, 0, 8))]:
        assert_same(tile, np.zeros(a_shape, np.int64), np.zeros(b_shape, np.int64))


def test_operand_types(tile):
    """numpy and torch integers of any width give the same result; uint16 and strided views are used in place."""
    rng = np.random.default_rng(5)
    a, b = random_bits(rng, (3, 2, 6, 8)), random_bits(rng, (3, 2, 6, 8))
    want = assert_same(tile, a, b)
    wide = np.zeros((3, 2, 6, 16), np.uint16)
    wide[..., ::2] = a
    for x in (torch.from_numpy(a), a.astype(np.int32), a.astype(np.uint16), wide[..., ::2]):
        assert torch.equal(tile(x, b, GUARD_BITS, ZERO_BLOCK_CYCLES).outputs.view(torch.int32),
                           want.outputs.view(torch.int32))


@pytest.mark.parametrize(
    "a, b, guard_bits, zero_block_cycles, error, message",
    [
        (torch.zeros((1, 1, 1, 8)), np.zeros((1, 1, 1, 8), np.int64), 3, 1, TypeError, "bit patterns as integers"),
        (np.zeros((1, 1, 8), np.int64), np.zeros((1, 1, 8), np.int64), 3, 1, ValueError, "must have shape"),
        (np.full((1, 1, 1, 8), 0x10000), np.zeros((1, 1, 1, 8), np.int64), 3, 1, ValueError, "outside 0..0xFFFF"),
        (np.full((1, 1, 1, 8), -1), np.zeros((1, 1, 1, 8), np.int64), 3, 1, ValueError, "outside 0..0xFFFF"),
        (np.zeros((1, 1, 2, 8), np.int64), np.zeros((1, 1, 1, 8), np.int64), 3, 1, ValueError, "disagree"),
        (np.zeros((1, 1, 1, 8), np.int64), np.zeros((1, 1, 1, 8), np.int64), -1, 1, ValueError, "guard_bits"),
        (np.zeros((1, 1, 1, 8), np.int64), np.zeros((1, 1, 1, 8), np.int64), 3, 2, ValueError, "zero_block_cycles"),
    ],
)
def test_refusals_match_reference(tile, a, b, guard_bits, zero_block_cycles, error, message):
    for checked in (tile, golden.tile):
        with pytest.raises(error, match=message):
            checked(a, b, guard_bits, zero_block_cycles)


def test_values_read_in_place():
    """``tile_values`` on float32 bf16 values equals ``tile`` on their bf16 patterns, and ``tile_cycles`` its cost,
    whatever the values' low halves hold; other arrays are refused."""
    rng = np.random.default_rng(2)
    bits = random_bits(rng, (3, 2, 9, 8), corner=0.4)
    values = as_values(bits)
    partner = real_bits(rng, (3, 4, 9, 8))
    got = kernel.tile_values(values, as_values(partner), GUARD_BITS, ZERO_BLOCK_CYCLES)
    assert_equal_results(got, assert_same(kernel.tile, bits, partner))
    noisy = as_values(bits, rng.integers(0, 1 << 16, bits.shape, dtype=np.uint32))  # what bf16 ignores
    assert_cost(kernel.tile_cycles(noisy, as_values(partner), GUARD_BITS, ZERO_BLOCK_CYCLES), got)
    for values_tile in (kernel.tile_values, kernel.tile_cycles):
        with pytest.raises(TypeError, match="float32 NumPy array"):
            values_tile(np.zeros(values.shape), values, GUARD_BITS, ZERO_BLOCK_CYCLES)
        with pytest.raises(ValueError, match="guard_bits"):
            values_tile(values, values, -1, ZERO_BLOCK_CYCLES)


@cuda
def test_cuda_values_read_in_place():
    """The CUDA ``tile_values`` on float32 GPU tensors of bf16 values equals ``tile`` on their bf16 patterns;
    other tensors are refused."""
    from dashraker.models.kernels import fpraker_cuda

    rng = np.random.default_rng(2)
    bits, partner = random_bits(rng, (3, 2, 9, 8), corner=0.4), real_bits(rng, (3, 4, 9, 8))
    values, partner_values = (torch.from_numpy((x.astype(np.uint32) << 16).view(np.float32)).cuda()
                              for x in (bits, partner))  # fmt: skip
    got = fpraker_cuda.tile_values(values, partner_values, GUARD_BITS, ZERO_BLOCK_CYCLES)
    assert_equal_results(_on_cpu(got), assert_same(_on_cuda, bits, partner))
    for bad in (values.cpu(), values.double(), values[0]):
        with pytest.raises(TypeError, match="float32 CUDA tensor"):
            fpraker_cuda.tile_values(bad, partner_values, GUARD_BITS, ZERO_BLOCK_CYCLES)


@pytest.mark.parametrize("steps", [7, 2 * kernel._BLOCK + 52])  # one block of steps, and three
def test_cost_of_picked_sets(steps):
    """``tile_cycles`` of passes given as stream sets and picks (row sets in runs, column sets cycling, as the mapper
    gives them, and in any order; passes of one block of steps and of several) equals the golden tile's cost of the
    gathered passes; bad picks are refused."""
    rng = np.random.default_rng(8)
    a_sets, b_sets = random_bits(rng, (3, 2, steps, 8), spread=30, corner=0.3), real_bits(rng, (4, 3, steps, 8))
    runs = np.divmod(np.arange(12), 4)
    for a_pick, b_pick in (runs, (rng.integers(0, 3, 9), rng.integers(0, 4, 9)), (runs[0][:2], runs[1][:2])):
        want = golden.tile(a_sets[a_pick], b_sets[b_pick], GUARD_BITS, ZERO_BLOCK_CYCLES)
        assert_cost(kernel.tile_cycles(as_values(a_sets), as_values(b_sets), GUARD_BITS, ZERO_BLOCK_CYCLES, a_pick,
                                       b_pick), want)
    for a_pick, b_pick, message in ((runs[0], runs[1][:3], "as long as"), (runs[0] + 1, runs[1], "outside the 3"),
                                    (runs[0], runs[1] - 1, "outside the 4"), (runs[0] * 1.0, runs[1], "integer")):
        with pytest.raises(ValueError, match=message):
            kernel.tile_cycles(as_values(a_sets), as_values(b_sets), GUARD_BITS, ZERO_BLOCK_CYCLES, a_pick, b_pick)


@pytest.mark.parametrize("changes", [{}, {"guard_bits": 0, "zero_block_cycles": 0, "rows": 2, "cols": 3, "lanes": 5}])
def test_mapping_rows_unchanged(changes, monkeypatch):
    """A layer mapped with the kernel gives the rows it gives with the golden tile, every figure equal."""
    layer, tensors, _ = make_layer(n=2, c=12, m=10, size=6, stride=2)
    config = load_config(None, "fpraker")
    config = dataclasses.replace(config, params={**config.params, **changes})
    ops = ("fwd", "bwd_input", "bwd_weight")
    with_kernel = [map_op(config, layer, tensors, op) for op in ops]

    def golden_cost(a_sets, b_sets, guard_bits, zero_block_cycles, a_pick, b_pick):
        a, b = (sets.view(np.uint32)[pick] >> 16 for sets, pick in ((a_sets, a_pick), (b_sets, b_pick)))
        result = golden.tile(a, b, guard_bits, zero_block_cycles)
        return {name: getattr(result, name).numpy() for name in ("cycles", "terms", "skipped_terms", "pe_cycles")}

    monkeypatch.setattr(kernel, "tile_cycles", golden_cost)
    assert [map_op(config, layer, tensors, op) for op in ops] == with_kernel
    assert all(row["counts"]["terms"] > 0 for row in with_kernel)


def test_nonzero_values_counts_as_numpy():
    values = np.random.default_rng(4).standard_normal((5, 3, 7, 8)).astype(np.float32)
    values[values < 0.5] = 0.0
    values[0, 0, 0, :5] = [-0.0, np.nan, np.inf, -np.inf, 1e-42]
    assert np.array_equal(kernel.nonzero_values(values), np.count_nonzero(values, axis=(1, 2, 3)))
    assert np.array_equal(kernel.nonzero_values(values[:, :, ::2]), np.count_nonzero(values[:, :, ::2], axis=(1, 2, 3)))
