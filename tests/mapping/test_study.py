"""``dashraker study`` end to end on a real trace with small tiles (areas from real Yosys runs), and its refusals."""

import dataclasses
import json
import shutil

import pytest
import yaml

from dashraker.cli import main

SMALL = {"tiles": 2, "rows": 1, "cols": 1, "lanes": 2, "tensordash": {"pattern": "T<2,0>"}, "fpraker": {"lanes": 2},
         "memory": {"tile_buffer_kib": 1, "global_buffer_kib": 16}}


@pytest.fixture(scope="module")
def small_study(tmp_path_factory, mobilenet_trace):
    folder = tmp_path_factory.mktemp("study")
    config = folder / "small.yaml"
    config.write_text(yaml.safe_dump(SMALL))
    out = folder / "out"
    status = main(["study", str(mobilenet_trace), "--config", str(config), "--out", str(out),
                   "--area-cache", str(folder / "area"), "--jobs", "1", "--no-progress"])
    return status, out, folder


@pytest.mark.slow
@pytest.mark.real_area
def test_the_study_writes_one_report_with_every_accounting(small_study):
    status, out, _ = small_study
    assert status == 0 and sorted(p.name for p in out.iterdir()) == ["report.md", "study.json", "study.png",
                                                                      "study.svg"]
    result = json.loads((out / "study.json").read_text())
    (trace,) = result["traces"]
    (model,) = result["silicon_models"]
    scenarios = trace["scenarios"][model]
    for key, figures in scenarios.items():
        ref = figures["baseline"]
        assert ref["speedup"] == ref["energy_efficiency"] == ref["throughput_per_area"] == 1.0, key
        assert ref["tiles"] == 2 and ref["leakage_pj"] > 0 and ref["clock_mhz"] == 1000
    assert result["clocks"]["fpraker"]["source"] == "configured"
    # the iso-area tiles are what fits the reference's area under each scope, and are what was mapped
    for scope in ("compute", "chip"):
        for name, tiles in result["silicon"][model]["tiles_iso"][scope].items():
            assert scenarios[f"iso{'_chip' if scope == 'chip' else ''}"][name]["tiles"] == tiles
    fpraker = result["silicon"][model]["designs"]["fpraker"]
    assert fpraker["area"]["chip"] > fpraker["area"]["compute"] == 2 * fpraker["tile_area"]
    # compression changes the memory traffic, never the cycles
    equal, zvc = scenarios["equal_chip"], scenarios["equal_chip_zvc"]
    assert all(equal[name]["cycles"] == zvc[name]["cycles"] for name in equal)
    assert zvc["baseline"]["dram_bytes"] < equal["baseline"]["dram_bytes"]  # MobileNet's activations hold zeros
    text = (out / "report.md").read_text()
    assert text.count("\n# ") == 0 and text.startswith("# Study")
    for heading in ("## Silicon", "### The papers beside ours", "### The gap, axis by axis",
                    "### Where fpraker's cycles go", "1.95x", "under 5%", "study.png"):
        assert heading in text


@pytest.mark.slow
@pytest.mark.real_area
def test_a_second_study_reuses_the_cached_areas(small_study, mobilenet_trace, capsys):
    status, out, folder = small_study
    assert main(["study", str(mobilenet_trace), "--config", str(folder / "small.yaml"), "--out", str(out),
                 "--area-cache", str(folder / "area"), "--jobs", "1", "--no-progress", "--step", "1"]) == 0
    assert "area " not in capsys.readouterr().err  # no synthesis ran


def test_study_refusals_are_one_line(tmp_path, mobilenet_trace, capsys):
    assert main(["study", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "not a trace folder" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("memory: {compression: gzip}\n")
    assert main(["study", str(mobilenet_trace), "--config", str(bad), "--out", str(tmp_path / "o"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "memory.compression" in err and len(err.strip().splitlines()) == 1
    big = tmp_path / "big.yaml"
    big.write_text("lanes: 64\n")  # 4x4 tiles of 64 lanes: 1,024
    assert main(["study", str(mobilenet_trace), "--config", str(big), "--out", str(tmp_path / "o"),
                 "--area-cache", str(tmp_path / "area"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "counts as 1,024 lanes" in err and "--force-size" in err and len(err.strip().splitlines()) == 1
    for flags, message in ((["--group-size", "0"], "--group-size must be at least 1, not 0"),
                           (["--group-size", "2"], "1 sample(s) recorded per step, fewer than --group-size 2"),
                           (["--confidence", "95"], "--confidence must be between 0 and 1, not 95.0")):
        assert main(["study", str(mobilenet_trace), *flags, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert main(["study", str(mobilenet_trace), "--out", str(tmp_path / "full"), "--no-progress"]) == 2
    assert "is not replaceable" in capsys.readouterr().err


def test_every_trace_is_checked_before_the_first_study(tmp_path, mobilenet_trace, monkeypatch, capsys):
    monkeypatch.setattr("dashraker.mapping.study.study", lambda *a, **k: pytest.fail("studied first"))
    same = tmp_path / "same"
    same.symlink_to(mobilenet_trace)
    assert main(["study", str(mobilenet_trace), str(same), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{same}: given twice (first as {mobilenet_trace})" in err and len(err.strip().splitlines()) == 1
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{")
    assert main(["study", str(mobilenet_trace), str(broken), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert str(broken) in err and len(err.strip().splitlines()) == 1
    assert main(["study", str(mobilenet_trace), "--step", "9", "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "step 9 is not recorded" in capsys.readouterr().err


def test_scenario_figures_by_hand(tmp_path):
    """Hand-made totals: the reference's own figures are 1.0, the other's are ratios; leakage is re-scoped."""
    from dashraker.mapping import silicon
    from dashraker.mapping.config import load_config
    from dashraker.mapping.study import SCENARIOS, scenario_figures

    configs = {}
    for name, t in (("baseline", 1000), ("fpraker", 250)):
        config = load_config(None, name)
        configs[name] = dataclasses.replace(config, tiles=2, tile=silicon.transistor_tile(config, t, 0),
                                            reference_tile=silicon.transistor_tile(config, 1000, 0))
    nw = configs["baseline"].energy.silicon["leakage_nw"]
    leak = {name: 2 * t * nw * 1e-9 * 1e-6 * 1e12 for name, t in (("baseline", 1000), ("fpraker", 250))}  # 1 us
    sums = {(name, "all"): {"cycles": cycles, "compute_s": cycles * 1e-9, "time_s": 1e-6,
                            "energy_pj": 100.0 + leak[name], "dram_bytes": 0, "core_energy_pj": core,
                            "energy_breakdown_pj": {"leakage": leak[name]}}
            for name, cycles, core in (("baseline", 1000, 40.0), ("fpraker", 4000, 20.0))}
    equal = next(s for s in SCENARIOS if s.key == "equal")
    figures = scenario_figures(equal, sums, configs, {"baseline": 2, "fpraker": 2}, "baseline")
    assert figures["baseline"]["speedup"] == figures["baseline"]["energy_efficiency"] == 1.0
    f = figures["fpraker"]
    assert f["speedup"] == 0.25 and f["core_energy_efficiency"] == 2.0 and f["energy_efficiency_no_leakage"] == 1.0
    assert f["energy_efficiency"] == pytest.approx((100 + leak["baseline"]) / (100 + leak["fpraker"]))
    assert f["area_overhead"] == pytest.approx(-0.75) and f["throughput_per_area"] == pytest.approx(1.0)
    chip = next(s for s in SCENARIOS if s.key == "equal_chip")
    sram = 2 * 2 * 8 * 8192 + 1024 * 8192  # bits: two 8 KiB buffers per tile, a 1 MiB global buffer
    per_bit = configs["baseline"].energy.sram_bit_transistors
    f = scenario_figures(chip, sums, configs, {"baseline": 2, "fpraker": 2}, "baseline")["fpraker"]
    assert f["leakage_pj"] == pytest.approx((500 + sram * per_bit) * nw * 1e-9 * 1e-6 * 1e12)
    assert f["area_overhead"] == pytest.approx((500 + sram * per_bit) / (2000 + sram * per_bit) - 1)
    # clocking, charged again like leakage: FPRaker's 2 tiles of 40 flip-flops over 1 us at 1 GHz (the sums' none)
    configs["fpraker"] = dataclasses.replace(configs["fpraker"],
                                             tile=silicon.transistor_tile(configs["fpraker"], 250, 40))
    f = scenario_figures(equal, sums, configs, {"baseline": 2, "fpraker": 2}, "baseline")["fpraker"]
    clock = 2 * 40 * 1000 * configs["fpraker"].energy.entries["flip_flop_clock"]
    assert f["clock_pj"] == pytest.approx(clock) and f["energy_pj"] == pytest.approx(100 + leak["fpraker"] + clock)
    assert f["core_energy_efficiency"] == pytest.approx(40 / (20 + clock))
    assert f["energy_efficiency_no_leakage"] == pytest.approx(100 / (100 + clock))


@pytest.mark.real_area  # resolve_all itself, on hand-made area records and a faked library
def test_the_study_judges_both_silicon_models_side_by_side_at_the_sta_clocks(small_trace, tmp_path, monkeypatch,
                                                                              capsys):
    """``--silicon both`` with ``clock_mhz: sta``: every accounting under the transistor estimate and the library,
    from the same runs (the cycles agree), each design at its tile's clock; a study of a numeric clock and the
    transistor model maps nothing onto the library."""
    from test_silicon import _cached_record, _characterised

    from dashraker.designs import DESIGNS
    from dashraker.mapping.config import load_config

    characterised = []
    monkeypatch.setattr("dashraker.asic.tile.characterise",
                        lambda design, params, *a, **k: characterised.append(design.name) or _characterised(
                            design, params, *a, **k))
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump({**SMALL, "clock_mhz": "sta"}))
    for name in DESIGNS:
        _cached_record(tmp_path / "area", DESIGNS[name], load_config(config, name).params)
    out = tmp_path / "out"
    common = ["--area-cache", str(tmp_path / "area"), "--asic-cache", str(tmp_path / "asic"), "--jobs", "1",
              "--no-progress"]
    assert main(["study", str(small_trace), "--config", str(config), "--out", str(out), "--silicon", "both",
                 *common]) == 0
    result = json.loads((out / "study.json").read_text())
    assert result["silicon_models"] == ["transistors", "liberty"]
    assert {name: clock["mhz"] for name, clock in result["clocks"].items()} == {
        "baseline": 800.0, "tensordash": 500.0, "fpraker": 100.0}
    assert result["clocks"]["tensordash"]["source"] == "sta" and result["clocks"]["fpraker"]["reference_mhz"] == 800.0
    liberty = result["silicon"]["liberty"]
    assert liberty["unit"] == "um2 of nangate45 cells" and result["silicon"]["transistors"]["unit"] == "CMOS transistors"
    areas = {name: d["tile_area"] for name, d in liberty["designs"].items()}
    assert liberty["tiles_iso"]["compute"]["fpraker"] == 2 * areas["baseline"] // areas["fpraker"]
    (trace,) = result["traces"]
    by_model = trace["scenarios"]
    for name in DESIGNS:
        a, b = by_model["transistors"]["equal"][name], by_model["liberty"]["equal"][name]
        assert a["cycles"] == b["cycles"] and a["time_s"] == b["time_s"] and a["clock_mhz"] == b["clock_mhz"]
        assert a["leakage_pj"] != b["leakage_pj"]
    text = (out / "report.md").read_text()
    for line in ("## Clocks", "| tensordash | 500 MHz | its tile's static timing | 500 MHz on nangate45 | "
                 "tensordash.a -> tensordash.b | 800 MHz |", "### nangate45 library",
                 "ours (transistor estimate) | verdict | ours (nangate45 library) | verdict",
                 "| transistor estimate -> nangate45 library | silicon model (iso-area, compute scope, dense memory) |",
                 "### Per operation", "| accounting | silicon | design | operation | speedup (cycles) |",
                 "### Per step", "| accounting | silicon | design | step | speedup (cycles) |", "| weight gradient |",
                 "(preset `default`)", "reference design: baseline (accumulators 0, dot tree)",
                 "| fma (dot fma, accumulators 1) | iso-area, compute scope, dense memory | nangate45 library |"):
        assert line in text, line
    assert (out / "study.png").read_bytes()[:4] == b"\x89PNG" and b"<svg" in (out / "study.svg").read_bytes()[:500]
    characterised.clear()
    config.write_text(yaml.safe_dump(SMALL))
    partial = tmp_path / "partial"  # a trace whose recording left a module out: said before the work and in the report
    shutil.copytree(small_trace, partial)
    manifest = json.loads((partial / "manifest.json").read_text())
    (partial / "manifest.json").write_text(json.dumps({**manifest, "unrecorded_layers": [{"name": "rnn",
                                                                                          "type": "LSTM"}]}))
    capsys.readouterr()
    assert main(["study", str(partial), "--config", str(config), "--out", str(tmp_path / "plain"), *common]) == 0
    assert not characterised
    assert f"warning: {partial}: 1 module(s) with parameters are not recorded" in capsys.readouterr().err
    assert json.loads((tmp_path / "plain" / "study.json").read_text())["silicon_models"] == ["transistors"]
    assert "Not the whole network: 1 module(s) with parameters are not recorded" in \
        (tmp_path / "plain" / "report.md").read_text()


def _resolved(config_path):
    """Every design's configuration of ``config_path`` with hand-made tiles, as ``study._setup`` takes them."""
    from dashraker.mapping import silicon
    from dashraker.mapping.study import _configs

    (configs,) = _configs(config_path).values()
    return [dataclasses.replace(c, tile=silicon.transistor_tile(c, 1000, 0),
                                reference_tile=silicon.transistor_tile(c, 1000, 0)) for c in configs]


def test_the_reports_assumptions_come_from_the_configuration_it_describes(tmp_path):
    """A contradiction between the report's sections cannot be written: change the configuration, its sentences
    change with it (the area estimate, the SRAM's array efficiency, the grouping of samples)."""
    import re

    from dashraker.mapping.config import default_config_path
    from dashraker.mapping.study import _setup
    from dashraker.mapping.study_report import not_modelled

    def sentences(config, group_size=None):
        models = {"transistors": _resolved(config)}
        return " ".join(not_modelled({**_setup(models, "baseline"), "group_size": group_size}))

    packaged = sentences(None)
    assert "register files" in packaged and "array efficiency of 0.5" in packaged and "groups of" not in packaged
    table = (default_config_path().parent.parent / "energy" / "horowitz45.yaml").read_text()
    (tmp_path / "table.yaml").write_text(re.sub(r"(sram_array_efficiency:\n    value:) 0.5", r"\1 0.6", table))
    (tmp_path / "mine.yaml").write_text("area_estimate: generated\nenergy_table: table.yaml\n")
    mine = sentences(tmp_path / "mine.yaml", group_size=4)
    assert "as the flip-flops the RTL has (the generated area estimate)" in mine and "register files of" not in mine
    assert "array efficiency of 0.6" in mine and "0.5" not in mine and "groups of 4" in mine


def test_a_claim_is_judged_against_the_interval():
    from dashraker.designs import DESIGNS

    speedup, area = DESIGNS["tensordash"].published[0], DESIGNS["tensordash"].published[-1]
    assert speedup.source and speedup.target == 1.95
    assert speedup.verdict(1.96, 2.1) == "holds" and speedup.verdict(1.5, 1.94) == "does not hold"
    assert speedup.verdict(1.9, 2.0) == "undecided"
    assert area.verdict(0.01, 0.04) == "holds" and area.verdict(0.05, 0.2) == "does not hold"
    faster = DESIGNS["fpraker"].published[0]
    assert faster.verdict(1.0, 1.2) == "undecided" and faster.verdict(1.01, 1.2) == "holds"
