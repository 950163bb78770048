"""``dashraker map`` end to end on a real recorded trace, the configuration checks and the user errors."""

import csv
import json

import numpy as np
import pytest
import yaml

from dashraker.cli import main
from dashraker.mapping.config import ConfigError, default_config_path, load_config, load_energy_table
from dashraker.mapping.runner import layer_ops, map_layer


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def _default():
    data = yaml.safe_load(default_config_path().read_text())
    data["energy_table"] = "horowitz45"
    return data


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda d: d["memory"].update(dram_gbps=float("nan")), "'memory.dram_gbps': must be a number, not nan"),
        (lambda d: d.update(clock_mhz=float("inf")), "'clock_mhz': must be a positive number (MHz) or one of "
                                                      "['sta', 'common'], not inf"),
        (lambda d: d.update(rows="four"), "'rows': must be an integer"),
        (lambda d: d.update(lanes=0), "'lanes': must be at least 1"),
        (lambda d: d.update(design="eyeriss"), "'design': must be one of"),
        (lambda d: d.setdefault("tensordash", {}).update(lookahed=2), "'tensordash.lookahed': unknown field"),
        (lambda d: d["memory"].update(dram_gbps="fast"), "'memory.dram_gbps': must be a number"),
        (lambda d: d.update(design="fpraker", dtype="fp32"), "'dtype': must be bf16, not 'fp32'"),
        (lambda d: d.update(operand_format="bf16"), "'operand_format': renamed to 'dtype'"),
        # the generator's ranges, from the design registry
        (lambda d: d.update(design="fpraker") or d.setdefault("fpraker", {}).update(guard_bits=10),
         "'fpraker.guard_bits': must be an integer in 0..7, not 10"),
        (lambda d: d.update(design="fpraker") or d.setdefault("fpraker", {}).update(zero_block_cycles=2),
         "'fpraker.zero_block_cycles': must be 1, not 2"),
        # 0 is refused: the RTL takes a clock for an all-zero step (issue 38)
        (lambda d: d.update(design="fpraker") or d.setdefault("fpraker", {}).update(zero_block_cycles=0),
         "'fpraker.zero_block_cycles': must be 1, not 0"),
        (lambda d: d.setdefault("tensordash", {}).update(pattern="(0,0),(1,x)"), "'tensordash.pattern': pattern '(0,0),(1,x)'"),
        (lambda d: d.setdefault("tensordash", {}).update(lookahead=1), "'tensordash': pattern"),
        (lambda d: d.update(energy_table="missing.yaml"), "missing.yaml: cannot read energy table"),
    ],
)
def test_config_errors_name_file_and_field(tmp_path, change, field):
    data = _default()
    change(data)
    path = _write(tmp_path, "accel.yaml", data)
    with pytest.raises(ConfigError, match="accel.yaml|missing.yaml") as error:
        load_config(path)
    assert field in str(error.value)


def test_energy_table_errors_and_values(tmp_path):
    table = load_energy_table("horowitz45")
    assert [round(table.sram_pj(kib), 6) for kib in (8, 32, 1024)] == [10.0, 20.0, 100.0]  # Horowitz's points
    assert table.sram_pj(2) == pytest.approx(5.0)  # square-root extrapolation below 8 KB
    data = yaml.safe_load(open(table.path).read())
    del data["entries"]["mul_bf16"]["source"]
    with pytest.raises(ConfigError, match=r"bad\.yaml: field 'entries\.mul_bf16\.source': missing"):
        load_energy_table(_write(tmp_path, "bad.yaml", data))
    data["entries"]["mul_bf16"]["source"] = "nobody2020"
    with pytest.raises(ConfigError, match="names no entry of 'sources'"):
        load_energy_table(_write(tmp_path, "bad.yaml", data))
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(_write(tmp_path, "broken.yaml", "design: [baseline"))
    data = yaml.safe_load(open(table.path).read())
    data["entries"]["block_normalize"] = data["entries"].pop("step_accumulate")  # a table of its old name
    with pytest.raises(ConfigError, match=r"^[^\n]*old\.yaml: field 'entries\.block_normalize': renamed "
                                          r"'step_accumulate': rename the entry$"):
        load_energy_table(_write(tmp_path, "old.yaml", data))


def test_cli_maps_a_real_trace(tmp_path, mobilenet_trace, capsys):
    out = tmp_path / "out"
    assert main(["map", str(mobilenet_trace), "--design", "baseline,tensordash", "--out", str(out),
                 "--jobs", "2", "--no-progress"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "== tensordash ==" in printed and "speedup" in printed
    rows = list(csv.DictReader(open(out / "map.csv")))
    report = json.load(open(out / "map.json"))
    assert len(rows) == len(report["rows"]) and {r["design"] for r in rows} == {"baseline", "tensordash"}
    assert {(t["design"], t["op"]) for t in report["totals"]} >= {("tensordash", "all"), ("baseline", "fwd")}
    for name in ("speedup.png", "energy.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left
    for row in report["rows"]:
        if row["design"] == "tensordash":  # SPEC 3: between dense/(H+1) and dense
            assert -(-row["dense_cycles"] // 3) <= row["cycles"] <= row["dense_cycles"], row["layer"]
    assert {r["op"] for r in report["rows"] if r["layer_index"] == 0} == {"fwd", "bwd_weight"}  # no dA for layer 0
    assert layer_ops(1) == ["fwd", "bwd_input", "bwd_weight"]

    # the same figures in this process: spreading the work over processes changes nothing
    from dashraker.trace import open_trace

    trace = open_trace(mobilenet_trace)
    configs = [load_config(None, d) for d in ("baseline", "tensordash")]
    for index in (0, 4, len(trace.layers) - 1):
        again = json.loads(json.dumps(map_layer(trace, configs, trace.steps[0], index)))
        got = [r for r in report["rows"] if r["layer_index"] == index]
        key = lambda r: (r["design"], r["op"])  # noqa: E731
        assert sorted(again, key=key) == sorted(got, key=key)


def test_cli_maps_transposed_layers(tmp_path, upsampler_trace, capsys):
    """Every design maps a trace's transposed convolutions: a row per operation as the user knows it, the dense
    cycles those of the mirrored convolution's plan (``mapping.dataflow``); the dnnsim preset refuses them."""
    from dashraker.designs import DESIGNS
    from dashraker.mapping.dataflow import plan
    from dashraker.mapping.engine import spread
    from dashraker.trace import open_trace

    out = tmp_path / "out"
    assert main(["map", str(upsampler_trace), "--design", "all", "--out", str(out), "--jobs", "1",
                 "--no-progress"]) == 0  # fmt: skip
    rows = json.load(open(out / "map.json"))["rows"]
    config = load_config(None, "baseline")
    trace = open_trace(upsampler_trace)
    for name in ("up1", "up2"):
        tensors = trace.load(name, 1)
        for op in ("fwd", "bwd_input", "bwd_weight"):
            got = {row["design"]: row for row in rows if (row["layer"], row["op"]) == (name, op)}
            assert set(got) == set(DESIGNS), (name, op)
            problems = plan(trace.layer(name), tensors, op, config.lanes).problems
            steps = [np.full(p.rows.num_sets(config.rows) * p.cols.num_sets(config.cols), p.steps) for p in problems]
            assert got["baseline"]["cycles"] == spread(np.concatenate(steps), config.tiles), (name, op)
    capsys.readouterr()
    assert main(["map", str(upsampler_trace), "--design", "tensordash", "--dataflow", "dnnsim", "--out",
                 str(tmp_path / "dnnsim"), "--jobs", "1", "--no-progress"]) == 2  # fmt: skip
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "layer 'up1': the dnnsim dataflow forms no transposed convolution's passes" in error
    assert not (tmp_path / "dnnsim").exists()


def test_fpraker_on_real_layers(mobilenet_trace):
    from dashraker.trace import open_trace

    trace = open_trace(mobilenet_trace)
    config = load_config(None, "fpraker")
    depthwise = max(i for i, layer in enumerate(trace.layers) if layer.groups > 1 and layer.stride[0] == 2)
    for index in (depthwise, len(trace.layers) - 1):  # a strided depthwise conv and the Linear
        for row in map_layer(trace, [config], trace.steps[0], index):
            fill = config.design.fill(config.params)  # the tile's pipeline, once per operation
            assert row["dense_cycles"] + fill <= row["cycles"] <= 5 * row["dense_cycles"] + fill
            assert 0 < row["counts"]["terms"] <= 5 * row["counts"]["term_encodes"] * config.cols


def test_cli_user_errors(tmp_path, mobilenet_trace, capsys):
    assert main(["map", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "not a trace folder" in capsys.readouterr().err
    assert main(["map", str(mobilenet_trace), "--design", "eyeriss", "--out", str(tmp_path / "o")]) == 2
    assert "unknown design 'eyeriss'" in capsys.readouterr().err
    bad = _write(tmp_path, "accel.yaml", {**_default(), "tiles": -1})
    assert main(["map", str(mobilenet_trace), "--config", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "accel.yaml: field 'tiles': must be at least 1" in capsys.readouterr().err
    assert main(["map", str(mobilenet_trace), "--step", "7", "--out", str(tmp_path / "o"), "--jobs", "1"]) == 2
    assert "step 7 is not recorded" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{")
    assert main(["map", str(broken), "--out", str(tmp_path / "o")]) == 2
    assert "manifest.json" in capsys.readouterr().err
