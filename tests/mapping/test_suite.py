"""``dashraker suite``: every workload recorded or reused and mapped, one row each; bad suites refused up front."""

import json

import pytest

from dashraker.cli import main
from dashraker.mapping.suite import load_suite
from dashraker.trace.networks import MODELS

SUITE = """
workloads:
  - {name: mlp, model: mlp, data: digits, steps: 1, samples: 1, batch_size: 4}
  - {name: gpt, model: gpt, data: pystdlib, seq_len: 16, steps: "1,2", samples: 1, batch_size: 2,
     model_args: {layers: 1, dim: 32, heads: 2}}
"""


def _run(tmp_path, suite_text, designs="all"):
    suite = tmp_path / "suite.yaml"
    suite.write_text(suite_text)
    return main(["suite", str(suite), "--out", str(tmp_path / "out"), "--traces", str(tmp_path / "traces"),
                 "--design", designs, "--jobs", "1", "--no-progress"])


def test_suite_records_maps_and_then_reuses(tmp_path, capsys):
    assert _run(tmp_path, SUITE) == 0
    printed = capsys.readouterr().out
    rows = json.loads((tmp_path / "out" / "suite.json").read_text())["workloads"]
    assert [row["workload"] for row in rows] == ["mlp", "gpt"]
    gpt = rows[1]
    assert (gpt["model"], gpt["data"], gpt["steps"], gpt["samples"], gpt["layers"]) == ("gpt", "pystdlib", [1, 2], 1, 9)
    assert gpt["record_s"] > 0 and gpt["baseline_speedup"] == 1.0
    assert rows[0]["tensordash_speedup"] > 1.0 and gpt["tensordash_speedup"] >= 1.0 and gpt["fpraker_speedup"] > 0
    assert "workload" in printed and "reused" not in printed
    assert (tmp_path / "out" / "suite.csv").read_text().splitlines()[0].startswith("workload,model,data")
    manifest = (tmp_path / "traces" / "gpt" / "manifest.json").stat().st_mtime_ns
    # The same suite again: both traces reused, same figures.
    assert _run(tmp_path, SUITE, "tensordash") == 0
    again = json.loads((tmp_path / "out" / "suite.json").read_text())["workloads"]
    assert [row["record_s"] for row in again] == [None, None]
    assert [row["tensordash_speedup"] for row in again] == [row["tensordash_speedup"] for row in rows]
    assert (tmp_path / "traces" / "gpt" / "manifest.json").stat().st_mtime_ns == manifest
    # A changed setting records that workload again.
    assert _run(tmp_path, SUITE.replace("samples: 1, batch_size: 4", "samples: 2, batch_size: 4"), "baseline") == 0
    third = json.loads((tmp_path / "out" / "suite.json").read_text())["workloads"]
    assert third[0]["record_s"] is not None and third[1]["record_s"] is None


@pytest.mark.parametrize(
    "text, message",
    [
        ("workloads: []", "a suite is a mapping with 'workloads:', a non-empty list"),
        ("workloads:\n  - {name: a, model: mlp}", "workload 1: an entry is a mapping with at least name, model, steps"),
        ("workloads:\n  - {name: a, model: mlp, steps: 1, colour: red}", "workload 'a': unknown key 'colour'"),
        ("workloads:\n  - {name: a, model: mlp, steps: 1, samples: two}", "workload 'a': samples must be an integer"),
        ("workloads:\n  - {name: a, model: alexnet, steps: 1}", "workload 'a': unknown model 'alexnet'"),
        ("workloads:\n  - {name: a, model: mlp, data: imagenet, steps: 1}", "unknown data set 'imagenet'"),
        ("workloads:\n  - {name: a, model: mlp, steps: '5,3'}", "workload 'a': steps must increase"),
        ("workloads:\n  - {name: a/b, model: mlp, steps: 1}", "name 'a/b' must be a unique folder name"),
        ("workloads:\n  - {name: a, model: mlp, steps: 1}\n  - {name: a, model: vgg, steps: 1}", "unique folder name"),
        ("workloads: [", "not a readable YAML file"),
    ],
)
def test_bad_suites_are_one_line_exit_2_nothing_written(tmp_path, capsys, text, message):
    assert _run(tmp_path, text) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["suite.yaml"]


def test_a_workload_that_fails_to_record_leaves_no_report(tmp_path, capsys):
    bad = SUITE.replace("workloads:\n", "workloads:\n  - {name: big, model: resnet50, image_size: 16, steps: 1}\n")
    assert _run(tmp_path, bad) == 2
    err = capsys.readouterr().err
    assert err.strip().endswith("workload 'big': ResNet50 needs images [channels, height, width] of at least 32x32, "
                                "not [3, 16, 16]")
    assert not (tmp_path / "out").exists()


def test_packaged_suites():
    small = load_suite("small")
    assert {settings["model"] for _, settings in small} == set(MODELS)  # every bundled network
    papers = dict(load_suite("papers"))
    assert papers["gpt2-small"]["model_args"] == {"layers": 12, "dim": 768, "heads": 12}
    assert all(settings["autocast"] == "bf16" and settings["steps"] == [1, 500] for settings in papers.values())
