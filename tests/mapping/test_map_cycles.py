"""Cycles of small layers counted by hand, and invariants of the three designs on real layers."""

import dataclasses
import types

import numpy as np
import pytest
import yaml

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


def test_fpraker_terms_by_hand(tmp_path):
    # a = 1.3125 = 1.0101b: significand 168 = 128 + 32 + 8, three terms; b = 1.0; equal exponents, all
    # in bound. 16 inputs on 8 lanes = 2 blocks of 3 cycles each; 4 samples x 4 outputs = 1 pass.
    layer, tensors = linear(np.full((4, 16), 1.3125), np.ones((4, 16)))
    config = config_file(tmp_path, "fpraker", tiles=2, rows=4, cols=4)
    result = map_op(config, layer, tensors, "fwd")
    assert (result["passes"], result["dense_cycles"], result["cycles"]) == (1, 2, 6)
    assert result["counts"]["terms"] == 4 * 4 * 16 * 3 and result["counts"]["term_encodes"] == 4 * 16


@pytest.mark.parametrize("zero_block_cycles", [0, 1])
def test_fpraker_all_zero_operand(tmp_path, layer_case, zero_block_cycles):
    layer, tensors, _ = layer_case(n=2, c=8, m=8, size=5)
    tensors.input[:] = 0.0
    config = config_file(tmp_path, "fpraker", **{"fpraker.zero_block_cycles": zero_block_cycles})
    for op in ("fwd", "bwd_weight"):
        result = map_op(config, layer, tensors, op)
        assert result["scheduled"] == "A" and result["counts"]["terms"] == 0
        assert result["cycles"] == zero_block_cycles * result["dense_cycles"]


@pytest.mark.parametrize(
    "case",
    [dict(), dict(size=7, stride=2), dict(c=8, m=8, groups=8, stride=2), dict(kind="linear", n=6, c=40, m=9)],
    ids=["conv", "stride2", "depthwise", "linear"],
)
def test_design_invariants(tmp_path, layer_case, case):
    layer, tensors, _ = layer_case(**case)
    for op in ("fwd", "bwd_input", "bwd_weight"):
        dense = map_op(config_file(tmp_path, "baseline"), layer, tensors, op)
        td = map_op(config_file(tmp_path, "tensordash"), layer, tensors, op)
        assert td["dense_cycles"] == dense["cycles"]
        assert -(-dense["cycles"] // 3) <= td["cycles"] <= dense["cycles"], op
        assert td["counts"]["mul"] < dense["counts"]["mul"]  # ReLU zeros are never multiplied
        fp = map_op(config_file(tmp_path, "fpraker"), layer, tensors, op)
        assert fp["dense_cycles"] <= fp["cycles"] <= 5 * fp["dense_cycles"], op  # 1 to 5 terms per block
        again = map_op(config_file(tmp_path, "fpraker"), layer, tensors, op)
        assert again == fp  # deterministic


def test_fpraker_operand_bits_match_numerics():
    """The mapper's FPRaker cost reads its float32 operands' bf16 patterns in place: the same as numerics' patterns."""
    import torch

    from dashraker.mapping.dataflow import _quantized
    from dashraker.models.fpraker import tile
    from dashraker.models.kernels.fpraker import tile_values
    from dashraker.models.numerics import fp32_bits, to_bf16_bits

    raw = np.concatenate([np.random.default_rng(0).standard_normal(1018) * 1e3, [0.0, -0.0, np.nan, np.inf, -np.inf,
                                                                                 1e-40]]).astype(np.float32)
    values = _quantized(raw, "bf16", "nearest").reshape(4, 2, 32, 4)
    expected = tile(to_bf16_bits(torch.from_numpy(raw)).reshape(4, 2, 32, 4), to_bf16_bits(torch.ones(4, 2, 32, 4)))
    got = tile_values(values, np.ones((4, 2, 32, 4), np.float32))
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
