"""The configurable reference (SPEC section 7b), the papers' presets, and the study's iso-area claims judged against
each dense baseline (tree, fused, fma): on the small MLP trace with hand-made tile areas."""

import json
import math

import pytest
import yaml

from dashraker.cli import main

SMALL = {"tiles": 2, "rows": 1, "cols": 1, "lanes": 2, "tensordash": {"pattern": "T<2,0>"}, "fpraker": {"lanes": 2},
         "memory": {"tile_buffer_kib": 1, "global_buffer_kib": 16}}
# hand-made transistors of each tile (``test_silicon._cached_record``): the baselines' differ, so their budgets do
TRANSISTORS = {"tree": 100_000, "fma": 200_000, "fused": 300_000}


def test_the_presets_carry_their_sources_figures():
    from dashraker.mapping.config import PRESETS, default_config_path, load_config
    from dashraker.mapping.silicon import reference_params

    tensordash = load_config("tensordash-paper", "tensordash")
    assert (tensordash.tiles, tensordash.rows, tensordash.cols, tensordash.lanes) == (16, 4, 16, 16)
    assert (tensordash.params["lookahead"], tensordash.params["pattern"], tensordash.fmt) == (2, "T<2,5>", "bf16")
    assert tensordash.dataflow == "dnnsim" and tensordash.preset == "tensordash-paper"
    assert tensordash.reference == {"accumulators": 0, "dot": "tree"}
    fpraker = load_config("fpraker-paper", "fpraker")
    assert fpraker.compare == "iso-area" and fpraker.area_scope == "compute" and fpraker.preset == "fpraker-paper"
    assert reference_params(fpraker) == {"rows": 4, "cols": 4, "fmt": "bf16", "lanes": 8, "accumulators": 1,
                                         "dot": "fma"}
    assert load_config(None, "fpraker").reference == {"accumulators": 0, "dot": "tree"}
    for preset in PRESETS[1:]:  # every figure a preset sets says where it comes from
        for line in default_config_path(preset).read_text().splitlines():
            if line.strip() and not line.startswith("#") and not line.rstrip().endswith(":"):
                assert "#" in line, (preset, line)


def test_a_file_builds_on_a_preset_and_the_reference_is_checked(tmp_path):
    from dashraker.mapping.config import ConfigError, apply_overrides, load_config

    mine = tmp_path / "mine.yaml"
    mine.write_text("preset: fpraker-paper\ntiles: 3\n")
    config = load_config(mine, "tensordash")
    assert config.preset == "fpraker-paper" and config.tiles == 3 and config.reference["dot"] == "fma"
    assert apply_overrides(config, {"baseline.dot": "fused", "baseline.accumulators": 0}).reference == {
        "accumulators": 0, "dot": "fused"}
    for text, message in (("preset: nope\n", "field 'preset': must be one of"),
                          ("baseline: {dot: fma, accumulators: 0}\n", "accumulators must be at least 1"),
                          ("baseline: {dot: blah}\n", "field 'baseline.dot': must be one of"),
                          ("dtype: fp32\nbaseline: {dot: fma, accumulators: 1}\n", "fmt must be bf16")):
        mine.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_config(mine, "tensordash")
    with pytest.raises(ConfigError, match="nope: no such configuration file nor preset; presets: default"):
        load_config("nope")


def test_an_unknown_preset_or_a_bad_reference_is_one_line_before_any_work(tmp_path, small_trace, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("baseline: {dot: fma, accumulators: 0}\n")
    commands = (["map", str(small_trace), "--out", str(tmp_path / "o")], ["study", str(small_trace), "--out",
                str(tmp_path / "o")], ["sweep", str(small_trace), "--axis", "tiles=1,2", "--out", str(tmp_path / "o")],
                ["suite", "small", "--traces", str(tmp_path / "traces"), "--out", str(tmp_path / "o")])
    for command in commands:
        for config, message in (("nope", "nope: no such configuration file nor preset"),
                                (str(bad), "field 'baseline': dot 'fma' accumulates each lane in fp32")):
            assert main([*command, "--config", config, "--no-progress"]) == 2
            err = capsys.readouterr().err
            assert message in err and len(err.strip().splitlines()) == 1, (command, err)
            assert not (tmp_path / "o").exists()
    assert main(["sweep", str(small_trace), "--axis", "baseline.dot=fma", "--out", str(tmp_path / "o")]) == 2
    assert "accumulators must be at least 1" in capsys.readouterr().err


def _hand_made_areas(root, config, fpraker=100_000):
    """Hand-made area records of every tile a study of ``config`` measures, each baseline's of its own size, FPRaker's
    of ``fpraker`` transistors."""
    from test_silicon import _cached_record

    from dashraker.mapping import baselines, silicon
    from dashraker.mapping.study import _configs

    configs = _configs(config)
    every = [c for scoped in configs.values() for c in scoped]
    every += [c for by_model in baselines.configure(configs).values() for scoped in by_model.values() for c in scoped]
    for design, params in silicon.unmeasured(every, root):
        own = {"fpraker": fpraker}.get(design.name, 100_000)
        _cached_record(root, design, params, transistors=TRANSISTORS[params["dot"]] if design.reference else own)


@pytest.mark.real_area  # resolve_all itself, on hand-made records
def test_the_study_judges_fprakers_claims_against_every_baseline(small_trace, tmp_path):
    """Under the fpraker-paper preset the reference is the fma baseline: its tile sets the iso-area budget; the claims
    are judged against the tree, fused and fma baselines too, each with the budget its own tile sets."""
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump({**SMALL, "preset": "fpraker-paper"}))
    _hand_made_areas(tmp_path / "area", config)
    out = tmp_path / "out"
    assert main(["study", str(small_trace), "--config", str(config), "--out", str(out), "--area-cache",
                 str(tmp_path / "area"), "--jobs", "1", "--no-progress"]) == 0
    result = json.loads((out / "study.json").read_text())
    assert result["preset"] == "fpraker-paper" and result["reference_params"] == {"accumulators": 1, "dot": "fma"}
    (model,) = result["silicon_models"]
    silicon, about = result["silicon"][model], result["baselines"]
    assert list(about) == ["tree", "fused", "fma"]
    areas = {name: b["silicon"][model]["tile_area"] for name, b in about.items()}
    assert areas["tree"] < areas["fma"] < areas["fused"]
    # against the fma reference the budget is the fma tile's area
    assert silicon["designs"]["baseline"]["tile_area"] == areas["fma"]
    fpraker_area = silicon["designs"]["fpraker"]["tile_area"]
    assert silicon["tiles_iso"]["compute"]["fpraker"] == math.floor(2 * areas["fma"] / fpraker_area)
    (trace,) = result["traces"]
    for name, by_model in trace["baselines"].items():
        iso = by_model[model]["iso"]
        assert iso["fpraker"]["tiles"] == math.floor(2 * areas[name] / fpraker_area)
        assert iso["baseline"]["area"] == 2 * areas[name] and iso["baseline"]["speedup"] == 1.0
        assert iso["fpraker"]["tiles"] == about[name]["silicon"][model]["tiles_iso"]["compute"]["fpraker"]
    tree, fma = trace["baselines"]["tree"][model]["iso"], trace["baselines"]["fma"][model]["iso"]
    assert fma["fpraker"]["speedup"] == trace["scenarios"][model]["iso"]["fpraker"]["speedup"]
    assert tree["fpraker"]["tiles"] < fma["fpraker"]["tiles"] and tree["fpraker"]["speedup"] < fma["fpraker"]["speedup"]
    text = (out / "report.md").read_text()
    for line in ("(preset `fpraker-paper`)", "reference design: baseline (accumulators 1, dot fma)",
                 "### The iso-area claims against each baseline",
                 f"| fpraker | faster than FP MAC units at iso-compute area | > 1x | tree (dot tree, accumulators 0) | "
                 f"iso-area, compute scope, dense memory | transistor estimate | {2 * areas['tree']:,.0f} (CMOS transistors) | "
                 f"{tree['fpraker']['tiles']} |", "| fused (dot fused, accumulators 0) |",
                 "| more energy-efficient at iso-compute area | > 1x | fma (dot fma, accumulators 1) |"):
        assert line in text, line


@pytest.mark.real_area  # resolve_all itself, on hand-made records
def test_the_study_runs_under_the_tensordash_preset_and_names_it(small_trace, tmp_path):
    """(The default preset's study: test_study; fpraker-paper's: above.)"""
    preset = "tensordash-paper"
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump({**SMALL, "preset": preset}))
    _hand_made_areas(tmp_path / "area", config)
    out = tmp_path / "out"
    assert main(["study", str(small_trace), "--config", str(config), "--out", str(out), "--area-cache",
                 str(tmp_path / "area"), "--jobs", "1", "--no-progress"]) == 0
    text = (out / "report.md").read_text()
    assert f"(preset `{preset}`)" in text and "reference design: baseline (accumulators 0, dot tree)" in text
    assert text.count("| fpraker | faster than FP MAC units at iso-compute area | > 1x |") == 1 + 3


@pytest.mark.real_area  # resolve_all itself, on hand-made records
def test_a_baseline_whose_budget_a_tile_exceeds_is_a_row_saying_so(small_trace, tmp_path):
    """FPRaker's tile larger than two tree tiles, within two fma tiles: the study runs against its fma reference, and
    the tree baseline's rows say why they are not judged."""
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump({**SMALL, "preset": "fpraker-paper"}))
    _hand_made_areas(tmp_path / "area", config, fpraker=150_000)
    out = tmp_path / "out"
    assert main(["study", str(small_trace), "--config", str(config), "--out", str(out), "--area-cache",
                 str(tmp_path / "area"), "--jobs", "1", "--no-progress"]) == 0
    result = json.loads((out / "study.json").read_text())
    assert "fpraker: one tile" in result["baselines"]["tree"]["refused"] and result["baselines"]["fma"]["refused"] is None
    assert list(result["traces"][0]["baselines"]) == ["fused", "fma"]
    text = (out / "report.md").read_text()
    assert text.count("| tree (dot tree, accumulators 0) | - | - | - | - | not judged: fpraker: one tile") == 2
