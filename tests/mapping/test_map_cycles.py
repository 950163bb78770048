"""Cycles of small layers counted by hand, and invariants of the three designs on real layers."""

import contextlib
import dataclasses
import types

import numpy as np
import pytest
import yaml

from dashraker.designs import DESIGNS
from dashraker.hw.fpraker.rounder import ROUNDER_LATENCY
from dashraker.mapping.config import default_config_path, load_config
from dashraker.mapping.engine import map_op, spread


def config_file(tmp_path, design, **changes):
    """The packaged configuration with some fields changed (dotted names for sections)."""
    data = yaml.safe_load(default_config_path().read_text())
    data["energy_table"] = "horowitz45"
    for key, value in changes.items():
        section, _, field = key.rpartition(".")
        (data.setdefault(section, {}) if section else data)[field] = value
    path = tmp_path / f"{design}.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_config(path, design)


def linear(a, w, g=None):
    """A Linear layer with given input [n, in] and weight [out, in] (gradient random, dense)."""
    a, w = np.asarray(a, np.float32), np.asarray(w, np.float32)
    g = np.ones((a.shape[0], w.shape[0]), np.float32) if g is None else g
    layer = types.SimpleNamespace(name="fc", type="linear", stride=(1, 1), padding=(0, 0), groups=1)
    return layer, types.SimpleNamespace(input=a, weight=w, output_grad=g, input_grad=None)


def test_spread_round_robin():
    assert spread([5, 1, 1, 5, 1], 2) == 7  # tile 0: passes 0, 2, 4 (5+1+1); tile 1: passes 1, 3 (1+5)
    assert spread([], 4) == 0


def test_baseline_cycles_by_hand(tmp_path, layer_case):
    # 16 windows (4x4 map) x 5 filters, 20 channels -> 2 chunks x 9 taps = 18 steps per pass;
    # 4 row sets x 2 column sets = 8 passes on 3 tiles: the busiest tile runs 3 passes = 54 cycles.
    layer, tensors, _ = layer_case(n=1, c=20, m=5, size=4, padding=1)
    config = config_file(tmp_path, "baseline", tiles=3, rows=4, cols=4, lanes=16)
    result = map_op(config, layer, tensors, "fwd")
    assert (result["passes"], result["dense_cycles"], result["cycles"]) == (8, 54, 54)
    assert result["speedup"] == 1.0 and result["energy_efficiency"] == 1.0


def test_fused_dot_is_charged_to_the_design_and_its_dense_reference(tmp_path, layer_case):
    """With ``dot: fused`` a PE-cycle costs N fused lanes and a frame add instead of N fp32 adds, on the design
    and on the dense baseline it is compared with; cycles are the tree's."""
    layer, tensors, _ = layer_case(n=1, c=20, m=5, size=4, padding=1)
    table = config_file(tmp_path, "baseline").energy.entries
    config = config_file(tmp_path, "baseline", tiles=3, rows=4, cols=4, lanes=16, **{"baseline.dot": "fused"})
    result = map_op(config, layer, tensors, "fwd")
    assert (result["dense_cycles"], result["cycles"]) == (54, 54) and result["energy_efficiency"] == 1.0
    pe_cycles = 18 * (4 * 16 + 4 * 4)  # 18 steps on 4 row sets x (4 columns, then the fifth filter alone)
    assert result["counts"]["fused_lanes"] == pe_cycles * 16 and result["counts"]["frame_adds"] == pe_cycles
    assert result["counts"]["add_fp32"] == 0
    breakdown = result["energy_breakdown_pj"]
    assert breakdown["frame_adds"] == pytest.approx(pe_cycles * table["frame_add"])
    # a design's dense reference is the configuration's (the baseline's section, SPEC section 7b), whatever its own
    # step sum: TensorDash's fused PEs against the fused reference, and against the default tree
    tensordash = map_op(config_file(tmp_path, "tensordash", tiles=3, rows=4, cols=4, lanes=16,
                                    **{"tensordash.dot": "fused", "baseline.dot": "fused"}), layer, tensors, "fwd")
    assert tensordash["baseline_energy_pj"] == pytest.approx(result["baseline_energy_pj"])
    tree = map_op(config_file(tmp_path, "baseline", tiles=3, rows=4, cols=4, lanes=16), layer, tensors, "fwd")
    tensordash = map_op(config_file(tmp_path, "tensordash", tiles=3, rows=4, cols=4, lanes=16,
                                    **{"tensordash.dot": "fused"}), layer, tensors, "fwd")
    assert tensordash["baseline_energy_pj"] == pytest.approx(tree["energy_pj"]) != result["baseline_energy_pj"]


def test_fma_lanes_are_charged_their_registers_and_pass_end_sums(tmp_path, layer_case):
    """With ``dot: fma`` (L = 1) a PE-cycle costs N multiplies, N fp32 adds and N register writes, and each PE's
    pass N - 1 adds of the lanes' tree; cycles are the tree's (a step a cycle), on the design and its reference."""
    layer, tensors, _ = layer_case(n=1, c=20, m=5, size=4, padding=1)
    table = config_file(tmp_path, "baseline").energy.entries
    config = config_file(tmp_path, "baseline", tiles=3, rows=4, cols=4, lanes=16,
                         **{"baseline.dot": "fma", "baseline.accumulators": 1})
    result = map_op(config, layer, tensors, "fwd")
    assert (result["dense_cycles"], result["cycles"]) == (54, 54) and result["energy_efficiency"] == 1.0
    pe_cycles, pe_passes = 18 * (4 * 16 + 4 * 4), 4 * 16 + 4 * 4  # as the fused dot product's test: 18 steps a pass
    assert result["counts"]["lane_registers"] == pe_cycles * 16
    assert result["counts"]["add_fp32"] == pe_cycles * 16 + pe_passes * 15
    assert result["energy_breakdown_pj"]["lane_registers"] == pytest.approx(pe_cycles * 16 * table["register_fp32"])
    fpraker = map_op(config_file(tmp_path, "fpraker", tiles=3, rows=4, cols=4, lanes=16,
                                 **{"baseline.dot": "fma", "baseline.accumulators": 1}), layer, tensors, "fwd")
    assert fpraker["baseline_energy_pj"] == pytest.approx(result["energy_pj"])  # the fma reference on its array


@pytest.mark.parametrize(
    "nonzero_steps, expected",
    [
        ([0, 3], 2),  # step 0, then steps 1 and 2 (empty) are skipped, then step 3
        ([], 2),  # all zero: each cycle consumes H+1 = 3 steps of the 4
        ([0, 1, 2, 3], 4),  # dense
    ],
)
def test_tensordash_step_skipping_by_hand(tmp_path, nonzero_steps, expected):
    a = np.zeros((1, 64), np.float32)
    for step in nonzero_steps:
        a[0, step * 16 : (step + 1) * 16] = 1.0
    layer, tensors = linear(a, np.ones((3, 64)))
    config = config_file(tmp_path, "tensordash", tiles=1, rows=4, cols=4, lanes=16)
    result = map_op(config, layer, tensors, "fwd")
    assert result["scheduled"] == "A" and result["dense_cycles"] == 4 and result["cycles"] == expected


@pytest.mark.parametrize("threads, sparse_first, expected", [
    (1, False, 6), (2, False, 7),  # passes of 4 then 2 decisions: thread 0's 4 end on cycle 6 (2 d_0 - 1)
    (1, True, 6), (2, True, 8),  # 2 then 4: thread 1's end on cycle 7 (2 d_1)
])
def test_tensordash_threads_by_hand(tmp_path, threads, sparse_first, expected):
    # 5 samples on 4 rows: row set 0 (samples 0-3), row set 1 (sample 4), one pass each on one tile.
    a = np.ones((5, 64), np.float32)
    sparse = slice(0, 4) if sparse_first else slice(4, 5)
    a[sparse, 16:48] = 0.0  # steps 1 and 2 empty: 2 decisions instead of 4
    layer, tensors = linear(a, np.ones((3, 64)))
    config = config_file(tmp_path, "tensordash", tiles=1, rows=4, cols=4, lanes=16, **{"tensordash.threads": threads})
    result = map_op(config, layer, tensors, "fwd")
    assert (result["passes"], result["dense_cycles"], result["cycles"]) == (2, 8, expected)


def test_tensordash_lone_pass_on_two_threads(tmp_path):
    layer, tensors = linear(np.ones((1, 64)), np.ones((3, 64)))
    config = config_file(tmp_path, "tensordash", tiles=1, rows=4, cols=4, lanes=16, **{"tensordash.threads": 2})
    assert map_op(config, layer, tensors, "fwd")["cycles"] == 2 * 4 - 1  # the other thread's cycles idle


def test_dnnsim_keeps_one_thread(tmp_path):
    config = config_file(tmp_path, "tensordash", dataflow="dnnsim", **{"tensordash.threads": 2})
    assert (config.configured_params["threads"], config.params["threads"]) == (2, 1)


def test_tensordash_lookaside_by_hand(tmp_path):
    # one value per step, all at lane 0: in cycle 1 lane 0 issues step 0, lane 1 promotes step 1 through
    # (1,-1), lane 2 promotes step 2 through (2,-2); steps 1 and 2 are then empty and skipped; cycle 2: step 3.
    a = np.zeros((1, 64), np.float32)
    a[0, ::16] = 1.0
    layer, tensors = linear(a, np.ones((3, 64)))
    config = config_file(tmp_path, "tensordash", tiles=1, rows=4, cols=4, lanes=16)
    result = map_op(config, layer, tensors, "fwd")
    assert (result["dense_cycles"], result["cycles"]) == (4, 2)
    assert result["counts"]["mul"] == 4 * 3  # 4 non-zero values, each times 3 filters


@pytest.mark.parametrize(
    "case, expected",
    [
        # 2 products [5, 20] @ [20, 3], one 4x4 tile of 16 lanes, one group per product:
        # fwd: 5 rows of A (2 row sets) x 3 columns of B (1 set), ceil(20/16) = 2 steps: 2 x 2 passes x 2 groups = 8;
        # dA = G B^T: 5 rows of G (2 sets) x 20 rows of B (5 sets), ceil(3/16) = 1 step: 2 x 10 = 20;
        # dB = A^T G: 20 channels of A (5 sets) x 3 of G (1 set), 1 sample x ceil(5 positions / 16) = 1 step: 2 x 5 = 10.
        (dict(kind="matmul", n=2, size=5, c=20, m=3), {"fwd": 8, "bwd_input": 20, "bwd_weight": 10}),
        # Conv1d, 20 -> 5 channels, kernel 3, padding 1, length 8: a conv2d of height 1.
        # fwd: 8 windows (2 sets) x 5 filters (2 sets), ceil(20/16) x 3 taps = 6 steps: 4 passes x 6 = 24;
        # dA: 8 gradient windows (2 sets) x 20 filters (5 sets), ceil(5/16) x 3 taps = 3 steps: 10 x 3 = 30;
        # dW: 3 tap offsets x 20 channels of A (5 sets) x 5 of G (2 sets), ceil(8/16) = 1 step: 3 x 10 = 30.
        (dict(kind="conv1d", n=1, c=20, m=5, size=8, kernel=3, padding=1),
         {"fwd": 24, "bwd_input": 30, "bwd_weight": 30}),
    ],
)
def test_conv1d_and_matmul_baseline_cycles_by_hand(tmp_path, layer_case, case, expected):
    layer, tensors, _ = layer_case(**case)
    config = config_file(tmp_path, "baseline", tiles=1, rows=4, cols=4, lanes=16)
    assert {op: map_op(config, layer, tensors, op)["cycles"] for op in expected} == expected


def test_transposed_baseline_cycles_by_hand(tmp_path, layer_case):
    """A ConvTranspose2d 20 -> 5 channels, 3x3, stride 2, padding 1, output padding 1, 4x4 -> 8x8 maps, on 4x4 PEs:
    fwd (its convolution's input gradient): per stride phase 16 windows (4 sets) x 5 filters (2 sets), 2 chunks x
    taps {0, 2} or {1} per axis: 8 x (8 + 4 + 4 + 2) = 144; dA (that convolution's forward): 16 windows (4 sets) x
    20 filters (5 sets), 1 chunk x 9 taps: 20 x 9 = 180; dW: 9 offsets x 5 channels of G (2 sets) x 20 of A (5
    sets), 1 step: 90."""
    layer, tensors, _ = layer_case(kind="conv_transpose2d", n=1, c=20, m=5, size=4, stride=2, output_padding=1)
    config = config_file(tmp_path, "baseline", tiles=1, rows=4, cols=4, lanes=16)
    expected = {"fwd": 144, "bwd_input": 180, "bwd_weight": 90}
    assert {op: map_op(config, layer, tensors, op)["cycles"] for op in expected} == expected


def test_tensordash_skips_causal_zeros_of_a_matmul(tmp_path):
    """Attention weights [4, 48] @ v [48, 1] on one 1x1 PE of 16 lanes: row i of the causal weights holds i + 1
    non-zero chunks of 16, then zeros. TensorDash (H = 2) issues a chunk per cycle and skips up to two empty
    steps after it: rows cost 1, 2, 3, 3 cycles = 9 against 4 x 3 = 12 dense."""
    weights = np.zeros((1, 4, 48), np.float32)
    for i in range(4):
        weights[0, i, : 16 * (i + 1)] = 1.0
    v = np.ones((1, 48, 1), np.float32)
    layer = types.SimpleNamespace(name="mix", type="matmul", stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)
    tensors = types.SimpleNamespace(input=weights, weight=v, output_grad=np.ones((1, 4, 1), np.float32))
    config = config_file(tmp_path, "tensordash", tiles=1, rows=1, cols=1, lanes=16)
    result = map_op(config, layer, tensors, "fwd")
    assert (result["scheduled"], result["dense_cycles"], result["cycles"]) == ("A", 12, 9)


def test_fpraker_terms_by_hand(tmp_path):
    # a = 1.3125 = 1.0101b: significand 168 = 128 + 32 + 8, three terms; b = 1.0; equal exponents, all
    # in bound. 16 inputs on 8 lanes = 2 blocks of 3 cycles each; 4 samples x 4 outputs = 1 pass. The tile's
    # pipeline adds to the operation 10 cycles in the front end (operands taken in two hops, decode, two
    # comparator levels of the 8 lanes' maximum, exponent, bounds, the lanes' step lengths, the PE's; its queue),
    # 7 in the PE (its strobes, pick, shift, two adder-tree stages, frame shift, accumulator), the rounding's
    # ``ROUNDER_LATENCY`` and 2 through the result queue.
    layer, tensors = linear(np.full((4, 16), 1.3125), np.ones((4, 16)))
    config = config_file(tmp_path, "fpraker", tiles=2, rows=4, cols=4)
    result = map_op(config, layer, tensors, "fwd")
    assert (result["passes"], result["dense_cycles"], result["cycles"]) == (1, 2, 6 + 10 + 7 + ROUNDER_LATENCY + 2)
    assert result["counts"]["terms"] == 4 * 4 * 16 * 3 and result["counts"]["term_encodes"] == 4 * 16


def test_fpraker_all_zero_operand(tmp_path, layer_case):
    """An all-zero step costs one cycle, as in the RTL (``zero_block_cycles: 0`` is refused: issue 38)."""
    layer, tensors, _ = layer_case(n=2, c=8, m=8, size=5)
    tensors.input[:] = 0.0
    zero_block_cycles = 1
    config = config_file(tmp_path, "fpraker", **{"fpraker.zero_block_cycles": zero_block_cycles})
    for op in ("fwd", "bwd_weight"):
        result = map_op(config, layer, tensors, op)
        assert result["scheduled"] == "A" and result["counts"]["terms"] == 0
        assert result["cycles"] == zero_block_cycles * result["dense_cycles"] + config.design.fill(config.params)


@pytest.mark.parametrize(
    "case",
    [dict(), dict(size=7, stride=2), dict(c=8, m=8, groups=8, stride=2), dict(kind="linear", n=6, c=40, m=9),
     dict(kind="conv_transpose2d", size=4, stride=2, output_padding=1)],
    ids=["conv", "stride2", "depthwise", "linear", "transposed"],
)
def test_design_invariants(tmp_path, layer_case, case):
    layer, tensors, _ = layer_case(**case)
    for op in ("fwd", "bwd_input", "bwd_weight"):
        dense = map_op(config_file(tmp_path, "baseline"), layer, tensors, op)
        td = map_op(config_file(tmp_path, "tensordash"), layer, tensors, op)
        assert td["dense_cycles"] == dense["cycles"]
        assert -(-dense["cycles"] // 3) <= td["cycles"] <= dense["cycles"], op
        assert td["counts"]["mul"] < dense["counts"]["mul"]  # ReLU zeros are never multiplied
        fp_config = config_file(tmp_path, "fpraker")
        fp = map_op(fp_config, layer, tensors, op)
        fill = fp_config.design.fill(fp_config.params)
        assert fp["dense_cycles"] + fill <= fp["cycles"] <= 5 * fp["dense_cycles"] + fill, op  # 1 to 5 terms per block
        again = map_op(config_file(tmp_path, "fpraker"), layer, tensors, op)
        assert again == fp  # deterministic


def test_fpraker_operand_bits_match_numerics():
    """The mapper's FPRaker cost reads its float32 operands' bf16 patterns in place: the same as numerics' patterns."""
    import torch

    from dashraker.models.fpraker import tile
    from dashraker.models.kernels.fpraker import tile_values
    from dashraker.models.kernels.numerics import quantize  # the mapper's conversion
    from dashraker.models.numerics import fp32_bits, to_bf16_bits

    raw = np.concatenate([np.random.default_rng(0).standard_normal(1018) * 1e3, [0.0, -0.0, np.nan, np.inf, -np.inf,
                                                                                 1e-40]]).astype(np.float32)
    values = quantize(raw, "bf16", "nearest").reshape(4, 2, 32, 4)
    params = DESIGNS["fpraker"].params()
    expected = tile(to_bf16_bits(torch.from_numpy(raw)).reshape(4, 2, 32, 4), to_bf16_bits(torch.ones(4, 2, 32, 4)),
                    params["guard_bits"], params["zero_block_cycles"])
    got = tile_values(values, np.ones((4, 2, 32, 4), np.float32), params["guard_bits"], params["zero_block_cycles"])
    assert torch.equal(fp32_bits(got.outputs), fp32_bits(expected.outputs))
    assert torch.equal(got.step_cycles, expected.step_cycles) and torch.equal(got.terms, expected.terms)


@pytest.mark.parametrize("design", ["tensordash", "fpraker"])
def test_batching_across_problems_changes_nothing(tmp_path, layer_case, design):
    """Many problems of equal steps (depthwise groups, kernel offsets) batched together or one by one."""
    layer, tensors, _ = layer_case(n=1, c=8, m=8, size=6, groups=8, stride=2)
    config = config_file(tmp_path, design)
    together = [map_op(config, layer, tensors, op) for op in ("fwd", "bwd_input", "bwd_weight")]
    one_by_one = dataclasses.replace(config.design, cost=dataclasses.replace(config.design.cost, max_values=1))
    config = dataclasses.replace(config, design=one_by_one)
    alone = [map_op(config, layer, tensors, op) for op in ("fwd", "bwd_input", "bwd_weight")]
    assert alone == together


@contextlib.contextmanager
def reference_models(monkeypatch):
    """The mapper with the reference models in place of the fused kernels (quantization, TensorDash counts)."""
    import torch

    from dashraker.mapping.dataflow import operations
    from dashraker.models import numerics
    from dashraker.models import tensordash as reference
    from dashraker.models.kernels import tensordash as kernel

    def reference_counts(operand, pattern, lookahead, scheduler):
        flags = reference.nonzero(operand)
        return reference.cycles(flags, pattern, lookahead, scheduler=scheduler), np.count_nonzero(flags, axis=(1, 2, 3))

    def reference_quantize(x, fmt, rounding):
        return numerics.quantize(torch.from_numpy(np.array(x, np.float32)), fmt, rounding).numpy()

    with monkeypatch.context() as patched:
        patched.setattr(operations, "quantize", reference_quantize)
        patched.setattr(kernel, "cycles_and_nonzero", reference_counts)
        yield


@pytest.mark.parametrize("changes", [dict(), dict(dataflow="dnnsim"), dict(dtype="fp32"), dict(rounding="truncate"),
                                     {"tensordash.lanes": 7, "tensordash.pattern": "T<3,0>", "tensordash.lookahead": 4},
                                     {"tensordash.threads": 2, "tiles": 2}],
                         ids=["default", "dnnsim", "fp32", "truncate", "odd", "threads2"])
def test_kernels_map_as_the_reference_models(tmp_path, layer_case, monkeypatch, changes):
    """The fused kernels give the rows the reference models give."""
    layers = [layer_case(**case)[:2] for case in
              (dict(size=7, stride=2, seed=1), dict(c=8, m=8, groups=8), dict(kind="linear", n=6, c=40, m=9))]
    configs = [config_file(tmp_path, design, **changes) for design in ("baseline", "tensordash")]

    def rows():
        return [map_op(config, layer, tensors, op) for layer, tensors in layers for config in configs
                for op in ("fwd", "bwd_input", "bwd_weight")]

    fused = rows()
    with reference_models(monkeypatch):
        assert rows() == fused


def test_kernels_map_a_real_trace_as_the_reference_models(mobilenet_trace, monkeypatch):
    from dashraker.mapping.runner import map_layer
    from dashraker.trace import open_trace

    trace = open_trace(mobilenet_trace)
    configs = [load_config(None, design) for design in ("baseline", "tensordash")]
    depthwise = max(i for i, layer in enumerate(trace.layers) if layer.groups > 1 and layer.stride[0] == 2)
    layers = (0, depthwise, depthwise + 1, len(trace.layers) - 1)  # first conv, strided depthwise, pointwise, Linear
    fused = [map_layer(trace, configs, trace.steps[0], index) for index in layers]
    with reference_models(monkeypatch):
        assert [map_layer(trace, configs, trace.steps[0], index) for index in layers] == fused
