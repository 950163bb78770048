"""Iso-area comparison: tile counts and figures from hand-made area tables and totals."""

import pytest

from dashraker.mapping.isoarea import AreaMeasureError, compare, tile_counts


def test_each_design_gets_the_whole_tiles_that_fit_the_reference_budget():
    areas = {"baseline": 1000, "tensordash": 1040, "fpraker": 230}
    # budget 16 x 1000: 16000 / 1040 = 15.38 -> 15 tiles, 16000 / 230 = 69.6 -> 69 tiles
    assert tile_counts(areas, "baseline", 16) == {"baseline": 16, "tensordash": 15, "fpraker": 69}
    assert tile_counts({"baseline": 10, "small": 5}, "baseline", 3) == {"baseline": 3, "small": 6}


def test_a_tile_larger_than_the_budget_or_without_area_is_refused():
    with pytest.raises(AreaMeasureError, match="exceeds the area budget"):
        tile_counts({"baseline": 10, "huge": 25}, "baseline", 2)
    with pytest.raises(AreaMeasureError, match="must be positive"):
        tile_counts({"baseline": 10, "none": 0}, "baseline", 2)


def test_iso_area_figures_are_against_the_reference_in_its_own_configuration():
    equal = {("baseline", "all"): {"cycles": 1000, "energy_pj": 500.0},
             ("small", "all"): {"cycles": 4000, "energy_pj": 400.0}}
    iso = {**equal, ("small", "all"): {"cycles": 1000, "energy_pj": 450.0}}
    (ref, small) = compare(equal, iso, {"baseline": 10, "small": 2.5}, {"baseline": 4, "small": 4},
                           {"baseline": 4, "small": 16}, "baseline")
    assert ref["speedup_iso"] == ref["energy_efficiency_equal"] == ref["throughput_per_area_iso"] == 1.0
    assert small["speedup_equal"] == 0.25 and small["throughput_per_area_equal"] == 0.25 * 40 / 10
    assert small["speedup_iso"] == 1.0 and small["energy_efficiency_iso"] == 500 / 450
    assert small["area_iso"] == 40 and small["throughput_per_area_iso"] == 1.0
