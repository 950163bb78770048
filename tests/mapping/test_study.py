"""``dashraker study`` end to end on a real trace with small tiles (areas from real Yosys runs), and its refusals."""

import json

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


def test_the_study_writes_one_report_with_every_accounting(small_study):
    status, out, _ = small_study
    assert status == 0 and sorted(p.name for p in out.iterdir()) == ["report.md", "study.json", "study.png"]
    result = json.loads((out / "study.json").read_text())
    (trace,) = result["traces"]
    for key, figures in trace["scenarios"].items():
        ref = figures["baseline"]
        assert ref["speedup"] == ref["energy_efficiency"] == ref["throughput_per_area"] == 1.0, key
        assert ref["tiles"] == 2 and ref["leakage_pj"] > 0
    # the iso-area tiles are what fits the reference's area under each scope, and are what was mapped
    for scope in ("compute", "chip"):
        for name, tiles in result["tiles_iso"][scope].items():
            assert trace["scenarios"][f"iso{'_chip' if scope == 'chip' else ''}"][name]["tiles"] == tiles
    compute, chip = result["area"]["fpraker"]["compute"], result["area"]["fpraker"]["chip"]
    assert chip > compute == 2 * result["designs"]["fpraker"]["tile_transistors"]
    # compression changes the memory traffic, never the cycles
    equal, zvc = trace["scenarios"]["equal_chip"], trace["scenarios"]["equal_chip_zvc"]
    assert all(equal[name]["cycles"] == zvc[name]["cycles"] for name in equal)
    assert zvc["baseline"]["dram_bytes"] < equal["baseline"]["dram_bytes"]  # MobileNet's activations hold zeros
    text = (out / "report.md").read_text()
    assert text.count("\n# ") == 0 and text.startswith("# Study")
    for heading in ("## Silicon", "### The papers beside ours", "### The gap, axis by axis",
                    "### Where fpraker's cycles go", "1.95x", "under 5%", "study.png"):
        assert heading in text


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
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert main(["study", str(mobilenet_trace), "--out", str(tmp_path / "full"), "--no-progress"]) == 2
    assert "is not replaceable" in capsys.readouterr().err
