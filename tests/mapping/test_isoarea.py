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


def _total(cycles, energy_pj, clock_mhz=1000):
    return {"cycles": cycles, "energy_pj": energy_pj, "compute_s": cycles / (clock_mhz * 1e6)}


def test_iso_area_figures_are_against_the_reference_in_its_own_configuration():
    equal = {("baseline", "all"): _total(1000, 500.0), ("small", "all"): _total(4000, 400.0)}
    iso = {**equal, ("small", "all"): _total(1000, 450.0)}
    (ref, small) = compare(equal, iso, {"baseline": 10, "small": 2.5}, {"baseline": 4, "small": 4},
                           {"baseline": 4, "small": 16}, "baseline")
    assert ref["speedup_iso"] == ref["energy_efficiency_equal"] == ref["throughput_per_area_iso"] == 1.0
    assert small["speedup_equal"] == 0.25 and small["throughput_per_area_equal"] == 0.25 * 40 / 10
    assert small["speedup_iso"] == 1.0 and small["energy_efficiency_iso"] == 500 / 450
    assert small["area_iso"] == 40 and small["throughput_per_area_iso"] == 1.0


def test_throughput_per_area_counts_the_cycles_at_each_design_s_clock():
    """A design of the reference's cycles at half its clock: the same speedup in cycles, half the throughput."""
    equal = {("baseline", "all"): _total(1000, 500.0), ("slow", "all"): _total(1000, 500.0, clock_mhz=500)}
    (_, slow) = compare(equal, equal, {"baseline": 10, "slow": 10}, {"baseline": 4, "slow": 4},
                        {"baseline": 4, "slow": 4}, "baseline")
    assert slow["speedup_equal"] == 1.0 and slow["throughput_per_area_equal"] == 0.5


@pytest.mark.slow  # a minute of Yosys; the iso-area arithmetic and the study's budgets are checked on given areas
@pytest.mark.real_area
def test_cli_maps_each_design_again_with_the_tiles_that_fit(tmp_path, mobilenet_trace, capsys):
    """`map --compare iso-area` end to end: areas from real Yosys runs of small tiles, the designs mapped again."""
    import json

    import yaml

    from dashraker.cli import main
    from dashraker.mapping.config import default_config_path

    config = yaml.safe_load(default_config_path().read_text())
    config.update(energy_table="horowitz45", tiles=2, rows=1, cols=1, lanes=2)
    config.setdefault("fpraker", {})["lanes"] = 2  # FPRaker's own default (8) otherwise
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    assert main(["map", str(mobilenet_trace), "--config", str(path), "--design", "baseline,fpraker",
                 "--compare", "iso-area", "--area-cache", str(tmp_path / "area"), "--out", str(out),
                 "--jobs", "1", "--no-progress"]) == 0
    assert "leakage of all the configured silicon (compute scope)" in capsys.readouterr().out
    iso = json.loads((out / "map.json").read_text())["iso_area"]
    entries = {entry["design"]: entry for entry in iso["designs"]}
    assert iso["reference"] == "baseline" and entries["baseline"]["tiles_iso"] == 2
    budget = 2 * entries["baseline"]["tile_area"]
    assert entries["fpraker"]["tiles_iso"] == budget // entries["fpraker"]["tile_area"] >= 1
    assert (out / "iso_area.png").read_bytes()[:4] == b"\x89PNG"
