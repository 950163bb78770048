"""``dashraker sweep`` and ``config.apply_overrides``: each point is a single map of its configuration; bad input is one
line before any mapping; the totals and plots carry what the rows hold."""

import csv
import json

import pytest
import yaml

from dashraker.cli import main
from dashraker.mapping.config import ConfigError, apply_overrides, load_config
from dashraker.mapping.runner import map_each, map_trace, totals
from dashraker.mapping.sweep import SweepError, sweep


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory):
    """The digits MLP at two recorded steps, one sample each."""
    from dashraker.trace import record

    return record("mlp", "digits", steps=[1, 2], samples=1, out=tmp_path_factory.mktemp("two") / "mlp",
                  progress=False, threads=1)


def _file(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_overrides_read_as_the_file_would(tmp_path):
    for design in ("baseline", "tensordash", "fpraker"):
        config = load_config(None, design)
        assert apply_overrides(config, {}) == config
    changes = {"memory": {"dram_gbps": 400}, "tiles": 8, "tensordash": {"lookahead": 3, "scheduler": "greedy"},
               "clock_mhz": 500, "area_scope": "chip"}
    written = load_config(_file(tmp_path, "changed.yaml", changes), "tensordash")
    overridden = apply_overrides(load_config(None, "tensordash"), {"memory.dram_gbps": 400, "tiles": 8,
                                                                   "tensordash.lookahead": 3, "clock_mhz": 500,
                                                                   "tensordash.scheduler": "greedy",
                                                                   "area_scope": "chip"})
    assert dataclasses_equal(written, overridden)


def dataclasses_equal(a, b):
    """Equal but for the file they name."""
    import dataclasses

    return dataclasses.replace(a, path="") == dataclasses.replace(b, path="")


@pytest.mark.parametrize("overrides, message", [
    ({"memory.dram_gbs": 1}, "field 'memory.dram_gbs': unknown field"),
    ({"memory.dram_gbps": -1}, "field 'memory.dram_gbps': must be at least"),
    ({"tensordash.lookahead": 9}, "field 'tensordash.lookahead': must be an integer in 0..7, not 9"),
    ({"clock_mhz": "fast"}, "field 'clock_mhz': must be a positive number (MHz)"),
    ({"tiles.count": 2}, "field 'tiles.count': 'tiles' is not a section"),
    ({"design": "fpraker"}, "field 'design'"),
])
def test_overrides_refused_as_the_file_would(tmp_path, overrides, message):
    with pytest.raises(ConfigError) as error:
        apply_overrides(load_config(None, "tensordash"), overrides)
    assert message in str(error.value)
    if "." in next(iter(overrides)) and next(iter(overrides)) != "tiles.count":  # the same refusal from a file
        section, field = next(iter(overrides)).split(".")
        with pytest.raises(ConfigError) as from_file:
            load_config(_file(tmp_path, "bad.yaml", {section: {field: next(iter(overrides.values()))}}), "tensordash")
        assert str(from_file.value).split(": ", 1)[1] == str(error.value).split(": ", 1)[1]


def test_points_are_single_maps(two_steps, tmp_path, capsys):
    built = sweep(two_steps, {"memory.dram_gbps": [1, 400]}, designs=["baseline", "tensordash"], jobs=1,
                  progress=False, tiles=[2])
    assert [p.overrides for p in built] == [{"memory.dram_gbps": 1}, {"memory.dram_gbps": 400}, {"tiles": 2}]
    for point, changes in zip(built, ({"memory": {"dram_gbps": 1}}, {"memory": {"dram_gbps": 400}}, {"tiles": 2})):
        out = tmp_path / f"map{len(list(tmp_path.iterdir()))}"
        config = _file(tmp_path, "point.yaml", changes)
        assert main(["map", str(two_steps), "--config", str(config), "--design", "baseline,tensordash", "--jobs", "1",
                     "--no-progress", "--out", str(out)]) == 0
        mapped = json.loads((out / "map.json").read_text())["rows"]
        assert json.loads(json.dumps(point.rows)) == mapped
    capsys.readouterr()
    out = tmp_path / "sweep"
    assert main(["sweep", str(two_steps), "--axis", "memory.dram_gbps=1,400", "--axis", "tiles=2", "--design",
                 "baseline,tensordash", "--jobs", "1", "--no-progress", "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out / "sweep.csv")))
    configured = str(load_config().memory.dram_gbps)
    assert [(r["memory.dram_gbps"], r["tiles"], r["design"]) for r in rows] == [
        ("1.0", "16", "baseline"), ("1.0", "16", "tensordash"), ("400.0", "16", "baseline"),
        ("400.0", "16", "tensordash"), (configured, "2", "baseline"), (configured, "2", "tensordash")]
    for row, (point, design) in zip(rows, ((p, d) for p in built for d in ("baseline", "tensordash"))):
        total = point.totals[design, "all"]
        assert float(row["time_speedup"]) == pytest.approx(total["time_speedup"])
        assert float(row["energy_efficiency"]) == pytest.approx(total["energy_efficiency"])
        assert int(row["cycles"]) == total["cycles"]
    import pyarrow.parquet as pq

    assert pq.read_table(out / "sweep.parquet").to_pylist() == json.loads((out / "sweep.json").read_text())["table"]
    for name in ("sweep_memory_dram_gbps", "sweep_tiles"):
        assert (out / f"{name}.png").read_bytes()[:4] == b"\x89PNG" and b"<svg" in (out / f"{name}.svg").read_bytes()


def test_configurations_sharing_an_evaluation_map_as_each_alone(two_steps):
    """Configurations mapped together share their passes' evaluation where only tiles, compression or clock differ
    (a design twice, as a sweep's points): each one's rows are those of its map alone, on workers as in-process."""
    configs = [load_config(None, name) for name in ("tensordash", "fpraker")]
    configs += [apply_overrides(c, {"tiles": 3, "memory.compression": "zvc", "clock_mhz": 700}) for c in configs]
    together = map_each(two_steps, configs, jobs=2, progress=False)
    assert [len(rows) for rows in together] == [len(together[0])] * 4
    for config, rows in zip(configs, together):
        alone = map_trace(two_steps, [config], jobs=1, progress=False)
        assert json.loads(json.dumps(rows)) == json.loads(json.dumps(alone))
    assert together[0][0]["cycles"] != together[2][0]["cycles"]  # the tiles moved it: a point of its own


def test_totals_move_with_dram_bandwidth(two_steps):
    """Cycles do not depend on the DRAM; run time, time speedup and (leakage over the time) what bounds them do."""
    config = load_config(None, "fpraker")
    slow, fast = (totals(map_trace(two_steps, [apply_overrides(config, {"memory.dram_gbps": gbps})], jobs=1,
                                   progress=False))["fpraker", "all"] for gbps in (0.1, 1000))
    assert slow["cycles"] == fast["cycles"] and slow["speedup"] == fast["speedup"]
    assert slow["time_s"] > fast["time_s"] and slow["dram_s"] > fast["dram_s"]
    assert slow["memory_bound_ops"] == slow["ops"] and fast["memory_bound_ops"] < fast["ops"]
    assert slow["time_speedup"] == pytest.approx(1.0) and fast["time_speedup"] == pytest.approx(
        fast["dense_time_s"] / fast["time_s"]) and fast["time_speedup"] != pytest.approx(1.0)


@pytest.mark.parametrize("axes, message", [
    (["memory.dram_gbs=1,2"], "--axis memory.dram_gbs=1: "),
    (["memory.dram_gbps="], "--axis memory.dram_gbps: an empty value"),
    (["memory.dram_gbps=1,,2"], "--axis memory.dram_gbps: an empty value"),
    (["tiles"], "--axis 'tiles': give KEY=V1,V2"),
    (["tiles=4,0"], "--axis tiles=0: "),
    (["tensordash.lookahead=2,9"], "must be an integer in 0..7, not 9"),
    (["design=tensordash,eyeriss"], "--axis design: unknown design 'eyeriss'"),
    (["tiles=1", "tiles=2"], "--axis tiles is given twice"),
    (["--grid", "tiles=1,2,3,4,5,6,7,8", "memory.dram_gbps=1,2,3,4,5,6,7,8,9"], "--grid: 8 x 9 = 72 points (about"),
])
def test_bad_input_is_one_line_before_any_mapping(two_steps, tmp_path, capsys, monkeypatch, axes, message):
    def refuse(*args, **kwargs):
        raise AssertionError("mapped")

    monkeypatch.setattr("dashraker.mapping.runner.map_trace", refuse)
    argv = ["sweep", str(two_steps), "--out", str(tmp_path / "out"), "--no-progress"]
    for axis in axes:
        argv += [axis] if axis.startswith("--") else ["--axis", axis]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()
    with pytest.raises(SweepError):
        sweep(two_steps, {"tiles": []})


@pytest.mark.parametrize("command", [["sweep", "", "--axis", "tiles=1,2"], ["suite", "small", "--traces", ""]])
def test_an_empty_path_is_refused_not_taken_for_the_current_folder(tmp_path, capsys, command):
    with pytest.raises(SystemExit) as exit_status:
        main([*command, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_status.value.code == 2 and "an empty name is not a file or folder" in err and ".:" not in err, err
    assert not (tmp_path / "out").exists()


def test_plots_carry_every_step_and_one_colour_per_component(two_steps, tmp_path, monkeypatch):
    from dashraker.mapping import report

    figures = {}
    monkeypatch.setattr(report, "save_figures", lambda figure, path: figures.__setitem__(path.name, figure))
    rows = map_trace(two_steps, [load_config(None, d) for d in ("tensordash", "fpraker")], jobs=1, progress=False)
    report.write_reports(tmp_path, rows, totals(rows), {})
    labels = [t.get_text() for t in figures["speedup.png"].axes[0].get_xticklabels()]
    assert labels == [f"{layer}@{step}" for step in (1, 2) for layer in dict.fromkeys(r["layer"] for r in rows)]
    heights = sorted(round(bar.get_height(), 9) for bar in figures["speedup.png"].axes[0].patches)
    want = sorted(round(r["dense_cycles"] / r["cycles"], 9) for r in rows if r["design"] == "tensordash")
    assert heights == want  # a bar for every row of every step
    colours = [{text.get_text(): handle.get_facecolor() for handle, text in
                zip(ax.get_legend().legend_handles, ax.get_legend().get_texts())} for ax in figures["energy.png"].axes]
    shared = set(colours[0]) & set(colours[1])
    assert {"dram_words", "global_sram_words"} <= shared and all(colours[0][c] == colours[1][c] for c in shared)
    assert len({colours[0][c] for c in colours[0]}) == len(colours[0])  # one colour per component


def test_sensitivity_moves_each_verdict_as_single_maps_do(two_steps, tmp_path):
    """Each end of each range is the verdict a single map at that value gives (against the reference at the same
    value); an end that is the configured value is the configured verdict; the tornado plot and section are written."""
    from dashraker.mapping import sensitivity

    result = sensitivity.sensitivity(two_steps, jobs=1, progress=False, steps=[1])
    by_name = {a["name"]: a for a in result["assumptions"]}
    assert [a.name for a in sensitivity.ASSUMPTIONS] == list(by_name)
    dram = by_name["DRAM bandwidth (GB/s)"]
    mapped = {name: totals(map_trace(two_steps, [apply_overrides(load_config(None, name), {"memory.dram_gbps": 25.6})],
                                     [1], jobs=1, progress=False))[name, "all"] for name in ("baseline", "fpraker")}
    assert dram["figures"]["fpraker"]["time_speedup"]["low"] == pytest.approx(
        mapped["baseline"]["time_s"] / mapped["fpraker"]["time_s"])
    assert dram["figures"]["fpraker"]["energy_efficiency"]["low"] == pytest.approx(
        mapped["baseline"]["energy_pj"] / mapped["fpraker"]["energy_pj"])
    estimate = by_name["tiles' area estimate (leakage)"]  # configured: asic, the high end
    assert estimate["figures"]["tensordash"]["time_speedup"]["high"] == result["base"]["tensordash"]["time_speedup"]
    lines = sensitivity.report_lines(result)
    assert lines[0] == "## Sensitivity" and any("| fpraker | speedup (time) |" in line for line in lines)
    sensitivity.plot(tmp_path / "sensitivity.png", result)
    assert (tmp_path / "sensitivity.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "sensitivity.svg").exists()


def test_sensitivity_maps_the_samples_in_the_studys_groups(tmp_path):
    """With the study's groups, the sensitivity's configured verdict is the grouped map's (each group a batch of its
    own), so the report's sections agree; the study passes its groups of the first trace."""
    import argparse

    from dashraker.mapping import sensitivity
    from dashraker.trace import record

    trace = record("mlp", "digits", steps=[1], samples=2, out=tmp_path / "mlp", progress=False, threads=1)
    grouped = sensitivity.sensitivity(trace, jobs=1, progress=False, base={"area_scope": "compute"}, groups=2)
    configs = [apply_overrides(load_config(None, name), {"area_scope": "compute"}) for name in ("baseline", "fpraker")]
    mapped = totals(map_trace(trace, configs, jobs=1, progress=False, groups=2))
    assert grouped["groups"] == 2 and grouped["base"]["fpraker"]["time_speedup"] == pytest.approx(
        mapped["baseline", "all"]["time_s"] / mapped["fpraker", "all"]["time_s"])
    whole = totals(map_trace(trace, configs, jobs=1, progress=False))
    assert whole["fpraker", "all"]["time_s"] != mapped["fpraker", "all"]["time_s"]  # the groups are batches of one
    args = argparse.Namespace(traces=[trace], config=None, jobs=1, dask=None, no_progress=True, area_estimate=None,
                              area_cache="build/area", asic_cache="build/asic")
    assert sensitivity.for_study(args, [1], 2)["base"] == grouped["base"]


def test_parquet_holds_a_column_of_mixed_types_as_text(tmp_path):
    """An axis of numbers and names (clock_mhz=700,sta) and a field one design lacks go into Parquet as the CSV has
    them; numbers of both kinds as floats."""
    import pyarrow.parquet as pq

    from dashraker.mapping.sweep import write_parquet

    rows = [{"clock_mhz": 700.0, "tensordash.lookahead": None, "cycles": 10, "speedup": 1},
            {"clock_mhz": "sta", "tensordash.lookahead": 2, "cycles": 8, "speedup": 1.25}]
    write_parquet(tmp_path / "t.parquet", rows)
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.to_pylist() == [{"clock_mhz": "700.0", "tensordash.lookahead": None, "cycles": 10, "speedup": 1.0},
                                 {"clock_mhz": "sta", "tensordash.lookahead": 2, "cycles": 8, "speedup": 1.25}]
    assert str(table.schema.field("cycles").type) == "int64"


def test_a_table_fitted_to_zero_charges_zero(two_steps):
    """The gate-level table fits the bf16 multiplier to 0 pJ: a point under it charges the multiplications 0 (before,
    a 0 was taken for an entry the table lacks, and the map failed)."""
    table, gate = sweep(two_steps, {"energy_table": ["horowitz45", "nangate45-gate"]}, designs=["baseline"], jobs=1,
                        progress=False)
    assert gate.configs[0].energy.entries["mul_bf16"] == 0.0
    assert all(row["energy_breakdown_pj"]["mul"] == 0.0 for row in gate.rows)
    assert all(row["energy_breakdown_pj"]["mul"] > 0 for row in table.rows)
    assert gate.totals["baseline", "all"]["energy_pj"] > 0
