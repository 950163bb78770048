"""The silicon a map charges leakage on: the tiles' areas, synthesised several at a time."""

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
        assert resolved.tile_transistors == resolved.reference_tile_transistors == alone > 0
        assert is_measured(config.design, config.params, tmp_path / "together")
    folders = sorted(p.name for p in (tmp_path / "together").iterdir())
    assert len(folders) == 2
    again = silicon.resolve_all(configs, tmp_path / "together", progress=False, jobs=2)
    assert [c.tile_transistors for c in again] == [c.tile_transistors for c in together]


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


def test_the_area_estimate_holds_large_memories_in_register_files_or_takes_the_tile_as_generated(tmp_path):
    """By hand: 2,048 bits of register file at 0.597 um2 / 0.5 / 0.17733 um2 = 6.733 transistors per bit replace the
    memory's 80,000 transistors of flip-flops; ``generated`` keeps them; both reach leakage through ``resolve``."""
    import dataclasses

    config = load_config(design="baseline")
    assert config.area_estimate == "asic"
    _cached_record(tmp_path, config.design, config.params)
    per_bit = 0.597 / 0.5 / 0.17733
    assert config.energy.register_file_bit_transistors == pytest.approx(per_bit)
    assert config.energy.silicon["register_file_min_bits"] == 1024
    asic = silicon.resolve(config, tmp_path, progress=False)
    assert asic.tile_transistors == asic.reference_tile_transistors == round(20_000 + 2048 * per_bit) == 33_790
    generated = silicon.resolve(dataclasses.replace(config, area_estimate="generated"), tmp_path, progress=False)
    assert generated.tile_transistors == 100_000


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
    from dashraker.mapping.isoarea import iso_table

    entry = {"design": "baseline", "tile_area": 10, **{f"{k}_{x}": 1 for k in ("tiles", "speedup", "energy_efficiency",
                                                                             "throughput_per_area")
                                                      for x in ("equal", "iso")}}
    assert iso_table([entry], "asic", "compute", "generated").startswith(
        "area measure: CMOS transistors (generated estimate) per tile, compute scope")
    assert iso_table([entry], "fpga", "compute", "asic").startswith("area measure: ECP5 LUT4s per tile")


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
