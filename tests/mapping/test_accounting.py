"""Leakage, clocking, chip-scope SRAM area and zero-value compressed traffic, counted by hand on small cases."""

import dataclasses

import numpy as np
import pytest

from dashraker.mapping import silicon
from dashraker.mapping.engine import map_op
from dashraker.mapping.memory import zvc_bytes

from test_map_cycles import config_file, linear

UM2_PER_TRANSISTOR = 1.064 / 6  # Nangate 45 nm AND2_X1 over its 6 transistors
NW_PER_TRANSISTOR = 25.066064 / 6  # its leakage, likewise
SRAM_BIT_UM2 = 0.346 / 0.5  # a 45 nm 6T cell over an array efficiency of 0.5


def test_the_table_s_silicon_figures_are_the_cited_ones(tmp_path):
    table = config_file(tmp_path, "baseline").energy
    assert table.silicon["transistor_um2"] == pytest.approx(UM2_PER_TRANSISTOR, rel=1e-4)
    assert table.silicon["leakage_nw"] == pytest.approx(NW_PER_TRANSISTOR, rel=1e-4)
    assert table.sram_bit_transistors == pytest.approx(SRAM_BIT_UM2 / UM2_PER_TRANSISTOR, rel=1e-4)


def test_sram_area_of_a_small_buffer_by_hand(tmp_path):
    # 1 KiB tile buffers (two per tile), a 4 KiB global buffer, 2 tiles of 1,000 transistors
    config = config_file(tmp_path, "baseline", tiles=2, **{"memory.tile_buffer_kib": 1, "memory.global_buffer_kib": 4})
    parts = silicon.chip_parts(config, 1000)
    one_buffer_um2 = 8192 * 0.692  # 8,192 bits of 0.692 um2 = 5,668.864 um2
    assert parts["tile_buffers"]["um2"] == pytest.approx(4 * one_buffer_um2, rel=1e-4)
    assert parts["global_buffer"]["um2"] == pytest.approx(4 * one_buffer_um2, rel=1e-4)
    assert parts["tile_logic"]["transistors"] == 2000
    assert parts["tile_buffers"]["transistors"] == pytest.approx(4 * 5668.864 / UM2_PER_TRANSISTOR, rel=1e-4)
    assert parts["chip"]["transistors"] == pytest.approx(2000 + 8 * 5668.864 / UM2_PER_TRANSISTOR, rel=1e-4)
    chip = dataclasses.replace(config, area_scope="chip")
    tile = silicon.transistor_tile(config, 1000, 0)
    assert silicon.silicon_area(config, tile) == 2000  # compute scope: the tiles' logic
    assert silicon.silicon_area(chip, tile) == pytest.approx(parts["chip"]["transistors"])
    assert silicon.leakage_nw(chip, tile) == pytest.approx(parts["chip"]["transistors"] * NW_PER_TRANSISTOR, rel=1e-4)


@pytest.mark.parametrize("scope", ["compute", "chip"])
def test_leakage_of_a_small_run_by_hand(tmp_path, scope):
    # Linear 64 -> 3, one sample, 16 lanes: one pass of 4 steps = 4 cycles = 4 ns at 1 GHz; DRAM moves
    # A (64 x 2 B) + W (192 x 2 B) + the result (3 x 2 B) = 518 B at 25.6 GB/s = 20.234 ns: memory-bound.
    layer, tensors = linear(np.ones((1, 64)), np.ones((3, 64)))
    config = config_file(tmp_path, "baseline", tiles=2, area_scope=scope,
                         **{"memory.tile_buffer_kib": 1, "memory.global_buffer_kib": 4, "memory.dram_gbps": 25.6})
    result = map_op(config, layer, tensors, "fwd")
    assert result["leakage_pj"] is None and result["energy_breakdown_pj"]["leakage"] == 0.0  # tile not measured
    tile = silicon.transistor_tile(config, 1000, 0)  # no flip-flops: no clocking
    config = dataclasses.replace(config, tile=tile, reference_tile=tile)
    result = map_op(config, layer, tensors, "fwd")
    seconds = 518 / 25.6e9
    assert result["cycles"] == 4 and result["memory_bound"] and result["time_s"] == pytest.approx(seconds)
    transistors = 2000 + (8 * 5668.864 / UM2_PER_TRANSISTOR if scope == "chip" else 0)
    expected_pj = transistors * NW_PER_TRANSISTOR * 1e-9 * seconds * 1e12  # W x s, in pJ
    assert result["leakage_pj"] == pytest.approx(expected_pj, rel=1e-4)
    assert result["energy_breakdown_pj"]["leakage"] == result["leakage_pj"]
    assert result["energy_pj"] == pytest.approx(sum(result["energy_breakdown_pj"].values()))
    assert result["core_energy_pj"] == pytest.approx(
        result["energy_breakdown_pj"]["mul"] + result["energy_breakdown_pj"]["add_fp32"])  # leakage apart


def test_clocking_of_a_small_run_by_hand(tmp_path):
    """Every flip-flop of every tile over every cycle of the run time, stalls included: the run above, memory-bound,
    lasts 20.234 ns, 20.234 cycles at 1 GHz of which 4 compute; 2 tiles of 300 flip-flops at the table's 5.36 fJ. The
    dense comparison is charged the reference tile's 500 flip-flops over its own run time alike."""
    layer, tensors = linear(np.ones((1, 64)), np.ones((3, 64)))
    config = config_file(tmp_path, "baseline", tiles=2, **{"memory.dram_gbps": 25.6})
    assert map_op(config, layer, tensors, "fwd")["clock_pj"] is None  # tile not measured
    config = dataclasses.replace(config, tile=silicon.transistor_tile(config, 1000, 300),
                                 reference_tile=silicon.transistor_tile(config, 1000, 500))
    result = map_op(config, layer, tensors, "fwd")
    seconds = 518 / 25.6e9
    assert result["cycles"] == 4 and result["memory_bound"] and result["time_s"] == pytest.approx(seconds)
    expected_pj = 2 * 300 * (seconds * 1e9) * 0.00536  # tiles x flip-flops x cycles x pJ per flip-flop per cycle
    assert result["clock_pj"] == pytest.approx(expected_pj, rel=1e-6)
    breakdown = result["energy_breakdown_pj"]
    assert breakdown["clock"] == result["clock_pj"]
    assert result["core_energy_pj"] == pytest.approx(breakdown["mul"] + breakdown["add_fp32"] + expected_pj)
    assert result["energy_pj"] == pytest.approx(sum(breakdown.values()))
    baseline_clock = 2 * 500 * (result["dense_time_s"] * 1e9) * 0.00536
    actions = breakdown["mul"] + breakdown["add_fp32"]  # the dense run's actions are the same here
    assert result["baseline_core_energy_pj"] == pytest.approx(actions + baseline_clock)


def test_zvc_bytes_of_a_small_tensor_by_hand():
    # 40 values: a mask of 40 bits (5 bytes); 5 non-zero bf16 values of 2 bytes
    assert zvc_bytes(40, 5, 2) == 5 + 5 * 2
    assert zvc_bytes(41, 5, 2) == 6 + 5 * 2  # the mask in whole bytes
    assert zvc_bytes(16, 0, 4) == 2  # all zero: the mask alone
    assert zvc_bytes(8, 8, 2) == 1 + 16  # dense: the mask more than dense
    np.testing.assert_array_equal(zvc_bytes(np.array([16, 32]), np.array([1, 0]), 2), [4, 4])


def test_zvc_traffic_of_a_small_layer_by_hand(tmp_path):
    # A [1, 64] with 24 non-zeros (the scheduled side), W [3, 64] dense, 16 lanes, one pass of 4 steps
    a = np.zeros((1, 64), np.float32)
    a[0, :24] = 1.0
    layer, tensors = linear(a, np.ones((3, 64)))
    dense = config_file(tmp_path, "baseline", tiles=1)
    zvc = dataclasses.replace(dense, memory=dataclasses.replace(dense.memory, compression="zvc"))
    plain, packed = map_op(dense, layer, tensors, "fwd"), map_op(zvc, layer, tensors, "fwd")
    assert packed["scheduled"] == "A" and packed["compression"] == "zvc" and plain["compression"] == "none"
    row_set = 64 // 8 + 24 * 2  # one stream of 64 values: an 8-byte mask, 24 values of 2 B = 56 B
    col_set = 192 // 8 + 192 * 2  # 3 streams of 64 values: a 24-byte mask, 192 values = 408 B
    dram = row_set + col_set + 3 * 2  # the tensors are the sets here; the result (3 values) stays dense: 470 B
    assert plain["dram_bytes"] == 128 + 384 + 6 and packed["dram_bytes"] == dram
    counts = packed["counts"]
    assert counts["dram_words"] == -(-dram // 8)
    assert counts["tile_sram_words"] == -(-2 * (row_set + col_set) // 8)  # loaded once, read once
    assert counts["global_sram_words"] == -(-(row_set + col_set + 3 * 4 + dram) // 8)  # reads, fp32 results, DRAM
    assert counts["zvc_decodes"] == 64 + 192 and counts["zvc_encodes"] == 3
    assert plain["counts"]["zvc_decodes"] == plain["counts"]["zvc_encodes"] == 0
    table = zvc.energy.entries
    assert packed["energy_breakdown_pj"]["zvc_decodes"] == pytest.approx(256 * table["zvc_decode"])
    assert packed["energy_breakdown_pj"]["zvc_encodes"] == pytest.approx(3 * table["zvc_encode"])


def test_fpraker_cycle_breakdown_on_two_passes_by_hand(tmp_path):
    # Linear 4 -> 2 on 2 samples; FPRaker, 2 lanes, tiles of 2 x 1 PEs: A (samples) on the rows, one filter per
    # pass: two passes of 2 steps. Terms (canonical signed digits): 1.0 one, 1.5 = 2 - 1/2 two, 1.75 = 2 - 1/4 two.
    # sample 0: step 0 lanes (1.0, 1.5) -> 1, 2 terms; step 1 (1.75, 1.0) -> 2, 1
    # sample 1: step 0 (1.0, 1.0) -> 1, 1; step 1 (2**-40, 0): its one term falls out of bounds -> 0 in bound
    a = np.array([[1.0, 1.5, 1.75, 1.0], [1.0, 1.0, 2.0**-40, 0.0]], np.float32)
    layer, tensors = linear(a, np.ones((2, 4)))
    config = config_file(tmp_path, "fpraker", tiles=1, rows=2, cols=1, **{"fpraker.lanes": 2})
    result = map_op(config, layer, tensors, "fwd")
    fill = config.design.fill(config.params)
    # per pass: step 0 costs max(PE0 2, PE1 1) = 2, step 1 max(PE0 2, PE1 1 (no term in bound, at least 1)) = 2
    assert result["scheduled"] == "A" and result["passes"] == 2 and result["cycles"] == 2 * 4 + fill
    b = result["cycle_breakdown"]
    # in-bound terms (1+2+2+1 + 1+1) x 2 passes = 16 over 2 lanes x 2 PEs: 4 cycles at the mean
    assert b["mean_terms"] == 4.0
    # each PE alone: PE0 2 + 2, PE1 1 + 1 per pass -> 12 over 2 PEs = 6: the lanes' maximum adds 2
    assert b["lane_max"] == 2.0
    assert b["lockstep"] == 2.0  # the tile runs 8 cycles, its mean PE 6
    assert b["tile_imbalance"] == 0.0 and b["fill"] == fill and b["skipped_terms"] == 2  # 2**-40's term, twice
    assert b["mean_terms"] + b["lane_max"] + b["lockstep"] + b["tile_imbalance"] + b["fill"] == result["cycles"]


def test_the_cycle_breakdown_adds_up_on_more_tiles(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 24)).astype(np.float32) * (rng.random((5, 24)) > 0.3)
    layer, tensors = linear(a, rng.standard_normal((7, 24)).astype(np.float32))
    config = config_file(tmp_path, "fpraker", tiles=3, rows=2, cols=2, **{"fpraker.lanes": 4})
    for op in ("fwd", "bwd_weight"):
        result = map_op(config, layer, tensors, op)
        b = result["cycle_breakdown"]
        parts = b["mean_terms"] + b["lane_max"] + b["lockstep"] + b["tile_imbalance"] + b["fill"]
        assert parts == pytest.approx(result["cycles"], rel=1e-12) and min(b["lane_max"], b["lockstep"]) >= 0
    assert map_op(dataclasses.replace(config, design=__import__("dashraker").designs.BASELINE,
                                      params=silicon.reference_params(config)), layer, tensors, "fwd")[
        "cycle_breakdown"] is None
