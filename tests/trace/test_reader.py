"""The reader memory-maps valid traces and names the file, layer and field of every kind of damage."""

import json
import shutil

import numpy as np
import pytest

from dashraker.cli import main
from dashraker.trace import TraceError, open_trace
from dashraker.trace.check import check_trace


@pytest.fixture
def broken(mixed_trace, tmp_path):
    """A private copy of the shared trace, to damage."""
    return shutil.copytree(mixed_trace, tmp_path / "trace")


def _manifest(path):
    return json.loads((path / "manifest.json").read_text())


def _rewrite_manifest(path, change):
    manifest = _manifest(path)
    change(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_open_and_load(mixed_trace):
    trace = open_trace(mixed_trace)
    assert trace.path == mixed_trace and trace.manifest["model"] == "mixednet"
    assert trace.steps == [1, 3]
    assert [layer.name for layer in trace.layers] == ["conv1", "conv2", "conv3", "conv4", "fc"]
    tensors = trace.load("conv2", 3)
    for array, shape in zip(tensors, ((2, 8, 8, 8), (8, 4, 3, 3), (2, 8, 4, 4), (2, 8, 8, 8))):
        assert isinstance(array, np.memmap) and array.dtype == np.float32 and array.shape == shape
        assert not array.flags.writeable
    # Weights change between steps 1 and 3 (SGD updates them).
    assert not np.array_equal(trace.load("conv2", 1).weight, tensors.weight)


def _assert_fails(path, *fragments, layer="conv2", step=3):
    with pytest.raises(TraceError) as info:
        open_trace(path).load(layer, step)
    for fragment in fragments:
        assert fragment in str(info.value)
    return str(info.value)


def test_missing_file(broken):
    file = broken / "step_000003" / "conv2" / "output_grad.npy"
    file.unlink()
    _assert_fails(broken, str(file), "missing file")


def test_corrupted_file(broken):
    file = broken / "step_000003" / "conv2" / "weight.npy"
    data = bytearray(file.read_bytes())
    data[:16] = b"garbage garbage!"
    file.write_bytes(bytes(data))
    _assert_fails(broken, str(file), "not a readable .npy file")


def test_truncated_file(broken):
    file = broken / "step_000003" / "conv2" / "input.npy"
    file.write_bytes(file.read_bytes()[:-100])
    _assert_fails(broken, str(file), "truncated")


def test_file_with_extra_bytes(broken):
    file = broken / "step_000003" / "conv2" / "input.npy"
    file.write_bytes(file.read_bytes() + b"\0" * 8)
    _assert_fails(broken, str(file), "bytes")


def test_wrong_shape(broken):
    file = broken / "step_000003" / "conv2" / "weight.npy"
    np.save(file, np.zeros((8, 8, 3, 3), np.float32))
    _assert_fails(broken, str(file), "shape is [8, 8, 3, 3], the manifest says [8, 4, 3, 3]")


def test_wrong_dtype(broken):
    file = broken / "step_000003" / "conv2" / "weight.npy"
    np.save(file, np.zeros((8, 4, 3, 3), np.float64))
    _assert_fails(broken, str(file), "dtype is float64")


def test_nan(broken):
    file = broken / "step_000003" / "conv2" / "output_grad.npy"
    array = np.load(file)
    array[1, 2, 3, 0] = np.nan
    array[1, 5, 0, 0] = np.inf
    np.save(file, array)
    _assert_fails(broken, str(file), "2 NaN/Inf value(s), first at index [1, 2, 3, 0]")
    # The check can be left out by a reader that wants the raw values.
    assert np.isnan(open_trace(broken).load("conv2", 3, check_finite=False).output_grad[1, 2, 3, 0])


def test_unknown_layer_and_step(mixed_trace):
    trace = open_trace(mixed_trace)
    with pytest.raises(TraceError, match="no layer 'nope'"):
        trace.load("nope", 1)
    with pytest.raises(TraceError, match=r"step 2 was not recorded; recorded steps: \[1, 3\]"):
        trace.load("conv1", 2)


def test_manifest_not_json(broken):
    (broken / "manifest.json").write_text('{"format": ')
    with pytest.raises(TraceError, match="manifest.json: unreadable JSON"):
        open_trace(broken)


def test_manifest_missing(tmp_path):
    with pytest.raises(TraceError, match="manifest.json: missing file"):
        open_trace(tmp_path)


@pytest.mark.parametrize(
    "change, fragments",
    [
        (lambda m: m.pop("steps"), ["missing field 'steps'"]),
        (lambda m: m.update(format_version=99), ["field 'format_version' must be 1 to 2"]),
        (lambda m: m.update(steps=[3, 1]), ["increasing"]),
        (lambda m: m["layers"][1].pop("groups"), ["layer 1 'conv2'", "missing field 'groups'"]),
        (
            lambda m: m["layers"][1].update(stride=[1, 1]),
            ["'conv2'", "'output_grad_shape' is [2, 8, 4, 4]", "give [2, 8, 8, 8]"],
        ),
        (lambda m: m["layers"][1].update(groups=3), ["'conv2'", "field 'groups' (3) must divide"]),
        (lambda m: m["layers"][4].update(type=7), ["'fc'", "field 'type' must be one of"]),
        (lambda m: m["layers"][4].update(input_shape=[2, 3]), ["'fc'", "[2, 3] does not have in_channels=128"]),
        (lambda m: m["layers"][0].update(kernel=[3]), ["'conv1'", "field 'kernel' must be two integers >= 1"]),
        (lambda m: m["layers"].append(m["layers"][0]), ["layer names repeat: ['conv1']"]),
    ],
)
def test_manifest_errors_name_the_field(broken, change, fragments):
    _rewrite_manifest(broken, change)
    with pytest.raises(TraceError) as info:
        open_trace(broken)
    assert str(broken / "manifest.json") in str(info.value)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_check_collects_every_problem(broken):
    (broken / "step_000001" / "fc" / "input.npy").unlink()
    np.save(broken / "step_000003" / "conv1" / "weight.npy", np.full((8, 3, 3, 3), np.nan, np.float32))
    result = check_trace(broken)
    assert len(result.problems) == 2
    assert "step_000001/fc/input.npy: missing file" in result.problems[0]
    assert "step_000003/conv1/weight.npy: 216 NaN/Inf" in result.problems[1]
    # Everything else was still measured: 2 steps x (conv1 3 tensors + 4 layers x 4 tensors) - 2 broken files.
    assert len(result.stats) == 2 * 19 - 2


def test_check_command_fails_naming_file_and_problem(broken, capsys):
    file = broken / "step_000003" / "conv4" / "output_grad.npy"
    file.write_bytes(file.read_bytes()[:50])
    assert main(["trace", "check", "--quiet", str(broken)]) == 2
    err = capsys.readouterr().err
    assert str(file) in err and "not a readable .npy file" in err and "1 problem(s)" in err


def test_check_command_sparsity_table(mixed_trace, capsys):
    assert main(["trace", "check", str(mixed_trace)]) == 0
    out = capsys.readouterr().out
    trace = open_trace(mixed_trace)
    # conv4's input is a ReLU output: its zeros, counted here with NumPy, appear in its row.
    array = trace.load("conv4", 3).input
    expected = f"{100 * np.mean(array == 0):5.1f}"
    row = next(line for line in out.splitlines() if line.split()[:2] == ["3", "conv4"])
    assert row.split()[2] == expected.strip()
    assert "ok, 5 layers x 2 steps, 38 tensors" in out


def test_dilation_is_recorded_and_read(mixed_net_trace):
    """A dilated convolution's dilation reaches the manifest, the reader checks its shapes with it, the mapper maps it."""
    from dashraker.mapping.config import load_config
    from dashraker.mapping.dataflow import OPS, plan
    from dashraker.mapping.runner import map_trace

    trace = open_trace(mixed_net_trace(conv4_stride=2, groups=(1, 1), dilation=2))
    conv3 = next(layer for layer in trace.layers if layer.name == "conv3")
    assert conv3.dilation == (2, 2) and conv3.padding == (2, 2) and conv3.output_grad_shape == (2, 8, 4, 4)
    assert {layer.dilation for layer in trace.layers if layer.name != "conv3"} == {(1, 1)}
    tensors = trace.load("conv3", trace.steps[0])
    assert all(plan(conv3, tensors, op, 16).problems for op in OPS)
    rows = map_trace(trace.path, [load_config(None, "baseline")], steps=[1], jobs=1, progress=False)
    dilated = {row["op"]: (row["passes"], row["dense_cycles"]) for row in rows if row["layer"] == "conv3"}
    # By hand, 16 tiles of 4x4 PEs, 16 lanes; 2 samples, 8 channels, 4x4 maps, 3x3 taps 2 apart (padding 2).
    # fwd: 32 windows (8 row sets) x 8 filters (2 column sets) = 16 passes of 9 steps, one per tile: 9 cycles.
    # bwd_input: stride 1, every tap: the same. bwd_weight: 9 offsets x 2 x 2 channel sets = 36 passes of
    # 2 samples x 1 chunk of 16 positions, round robin: the busiest tile runs 3 of them, 6 cycles.
    assert dilated == {"fwd": (16, 9), "bwd_input": (16, 9), "bwd_weight": (36, 6)}


def _as_version_1(manifest):
    """A manifest as format version 1 wrote it: no ``input_needs_grad``."""
    manifest["format_version"] = 1
    for entry in manifest["layers"]:
        del entry["input_needs_grad"]


def test_version_1_manifest_is_read(broken):
    """Traces written before conv1d and matmul layers (format version 1) read as before."""
    _rewrite_manifest(broken, _as_version_1)
    trace = open_trace(broken)
    assert trace.manifest["format_version"] == 1 and [layer.type for layer in trace.layers][-1] == "linear"
    assert trace.load("fc", 3).weight.shape == trace.layer("fc").weight_shape
    assert {layer.input_needs_grad for layer in trace.layers} == {None}  # the mapper's rule: all but the first
    _rewrite_manifest(broken, lambda m: m["layers"][4].update(type="matmul"))
    with pytest.raises(TraceError, match=r"'fc': field 'type' must be one of \('conv2d', 'linear'\)"):
        open_trace(broken)


@pytest.fixture
def seq_trace(tmp_path):
    """A trace of ``SeqNet``: a conv1d, matmul layers and a Linear run twice."""
    import torch
    from torch.nn import functional as F
    from trace_helpers import SeqNet

    from dashraker.trace.recorder import Recorder

    torch.manual_seed(0)
    net = SeqNet()
    with Recorder(net, tmp_path / "seq", samples=2).step(1):
        F.cross_entropy(net(torch.randn(3, 4, 6)), torch.tensor([0, 1, 2])).backward()
    return tmp_path / "seq"


@pytest.mark.parametrize(
    "layer, change, fragments",
    [
        ("conv", dict(kernel=[3, 3]), ["'conv'", "field 'kernel' must be one integer >= 1"]),
        ("conv", dict(padding=[0]), ["'conv'", "'output_grad_shape' is [2, 8, 6]", "give [2, 8, 4]"]),
        ("attention.scores", dict(weight_shape=[4, 4, 5]), ["'weight_shape' is [4, 4, 5]", "give [4, 4, 6]"]),
        ("attention.mix", dict(in_channels=4), ["'attention.mix'", "[4, 6, 6] does not have in_channels=4"]),
        ("attention.mix", dict(stride=[2, 1]), ["a matmul layer has kernel [1, 1], stride [1, 1]"]),
        ("shared#1", dict(input_shape=[2, 6, 8, 1]), ["'shared#1'", "field 'input_shape' must be 2 or 3 positive"]),
        ("shared#1", dict(input_shape=[2, 5, 8]), ["'shared#1'", "'output_grad_shape' is [2, 6, 8]", "give [2, 5, 8]"]),
    ],
)
def test_conv1d_and_matmul_manifest_errors(seq_trace, layer, change, fragments):
    names = [entry["name"] for entry in _manifest(seq_trace)["layers"]]
    _rewrite_manifest(seq_trace, lambda m: m["layers"][names.index(layer)].update(change))
    with pytest.raises(TraceError) as info:
        open_trace(seq_trace)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_layers_of_an_unknown_type_are_warned_of_and_skipped_on_request(broken, tmp_path, capsys):
    """A layer type this version does not know (a newer recorder's): the rest reads, check warns, map refuses
    unless --skip-unsupported, which maps the rest and lists the layer in the report; export refuses."""
    from dashraker.cli import main

    _rewrite_manifest(broken, lambda m: m["layers"][4].update(type="lstm"))
    trace = open_trace(broken)
    assert [(layer.name, layer.type) for layer in trace.unsupported] == [("fc", "lstm")]
    assert "fc" not in [layer.name for layer in trace.layers] and len(trace.layers) == 4
    with pytest.raises(TraceError, match=r"'fc': type 'lstm' is not one this version maps"):
        trace.layer("fc")

    capsys.readouterr()
    assert main(["trace", "check", str(broken), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "warning: layer 'fc': type 'lstm'" in captured.err and "--skip-unsupported" in captured.err
    assert "1 warning(s) above" in captured.out

    out = tmp_path / "map"
    assert main(["map", str(broken), "--design", "baseline", "--jobs", "1", "--no-progress", "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "'fc'" in error[0] and "--skip-unsupported" in error[0] and not out.exists()
    assert main(["map", str(broken), "--design", "baseline", "--jobs", "1", "--no-progress", "--skip-unsupported",
                 "--out", str(out)]) == 0
    report = json.loads((out / "map.json").read_text())
    assert [layer["name"] for layer in report["skipped_layers"]] == ["fc"]
    assert {row["layer"] for row in report["rows"]} == {layer.name for layer in trace.layers}

    assert main(["trace", "export", str(broken), str(tmp_path / "x"), "--no-progress"]) == 2
    assert "'fc': type 'lstm'" in capsys.readouterr().err and not (tmp_path / "x").exists()

    _rewrite_manifest(broken, lambda m: [layer.update(type="lstm") for layer in m["layers"]])
    with pytest.raises(TraceError, match="no layer of a type this version takes"):
        open_trace(broken)
