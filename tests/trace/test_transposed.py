"""ConvTranspose2d layers are recorded as ``conv_transpose2d``, read back, checked, and refused by the DNNsim export."""

import json
import shutil
import warnings

import numpy as np
import pytest
import torch
from layer_cases import record_upsampler, upsampler_batch
from torch import nn
from torch.nn import functional as F

from dashraker.cli import main
from dashraker.trace import RecordError, TraceError, open_trace
from dashraker.trace.recorder import RECORDED, Recorder
from dashraker.trace.store import RECORDED_NAMES


@pytest.fixture(scope="module")
def upsampler_trace(tmp_path_factory):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no UnrecordedWarning: every module with parameters is recorded
        return record_upsampler(tmp_path_factory.mktemp("upsampler") / "trace", input_grad=True, strict=True)


def _reference():
    """``Upsampler``'s step written out with functional ops: per transposed layer its input, output and weight."""
    net, x, y = upsampler_batch()
    a1 = torch.relu(F.conv2d(x, net.down.weight, net.down.bias, 2, 1))
    y1 = F.conv_transpose2d(a1, net.up1.weight, net.up1.bias, 2, 1, 1, 2)  # output padding 1, groups 2
    a2 = torch.relu(y1)
    y2 = F.conv_transpose2d(a2, net.up2.weight, None, 2, 1, 1, 1, 2)  # output_size (18, 18): padding 1, dilation 2
    for tensor in (a1, y1, a2, y2):
        tensor.retain_grad()
    F.cross_entropy(F.linear(torch.relu(y2).mean((2, 3)), net.head.weight, net.head.bias), y).backward()
    return {"up1": (a1, y1, net.up1.weight), "up2": (a2, y2, net.up2.weight)}


def test_transposed_layers_are_recorded(upsampler_trace):
    """The manifest entries and tensors of both transposed layers are what a plain forward/backward computes; the
    output padding ``output_size`` chose is the entry's."""
    trace = open_trace(upsampler_trace)
    assert [(layer.name, layer.type) for layer in trace.layers] == [
        ("down", "conv2d"), ("up1", "conv_transpose2d"), ("up2", "conv_transpose2d"), ("head", "linear")]
    assert trace.manifest["unrecorded_layers"] == []
    up1, up2 = trace.layer("up1"), trace.layer("up2")
    assert (up1.in_channels, up1.out_channels, up1.stride, up1.padding, up1.output_padding, up1.groups) == (
        4, 6, (2, 2), (1, 1), (1, 1), 2)
    assert (up1.weight_shape, up1.output_grad_shape) == ((4, 3, 3, 3), (2, 6, 8, 8))
    assert (up2.dilation, up2.output_padding, up2.bias, up2.output_grad_shape) == ((2, 2), (1, 1), False,
                                                                                    (2, 4, 18, 18))
    for name, (inp, out, weight) in _reference().items():
        got = trace.load(name, 1)
        np.testing.assert_array_equal(got.weight, weight.detach().numpy(), err_msg=name)
        for array, expected in ((got.input, inp), (got.output_grad, out.grad), (got.input_grad, inp.grad)):
            np.testing.assert_allclose(array, expected[:2].detach().numpy(), rtol=1e-5, atol=1e-7, err_msg=name)


def test_recorded_types_are_named_once():
    """Messages name the recorded types from ``store.RECORDED_NAMES``; it names ``RECORDED``."""
    assert RECORDED_NAMES.replace(" and", ",").split(", ") == [kind.__name__ for kind in RECORDED]


def test_trace_check_is_ok(upsampler_trace, capsys):
    assert main(["trace", "check", str(upsampler_trace), "--quiet", "--strict"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "ok, 4 layers x 1 steps" in captured.out


def test_zero_padding_only():
    """A transposed convolution's padding_mode (PyTorch builds only zeros, a later change is refused) in one line."""
    up = nn.ConvTranspose2d(2, 2, 3, padding=1)
    up.padding_mode = "reflect"
    with pytest.raises(RecordError, match=r"^layer '0': padding_mode 'reflect' is not recordable \(only zero padding\)$"):
        Recorder(nn.Sequential(up), "unused", samples=1)


@pytest.mark.parametrize(
    "change, fragments",
    [
        (lambda e: e.pop("output_padding"), ["missing field 'output_padding'"]),
        (lambda e: e.update(output_padding=[1]), ["field 'output_padding' must be two integers >= 0, not [1]"]),
        (lambda e: e.update(output_padding=[2, 1]),
         ["field 'output_padding' [2, 1] must be smaller than the stride or the dilation on each axis"]),
        (lambda e: e.update(output_padding=[0, 0]), ["'output_grad_shape' is [2, 6, 8, 8]", "give [2, 6, 7, 7]"]),
        (lambda e: e.update(weight_shape=[6, 2, 3, 3]), ["'weight_shape' is [6, 2, 3, 3]", "give [4, 3, 3, 3]"]),
        (lambda e: e.update(in_channels=6), ["field 'input_shape' [2, 4, 4, 4] does not have in_channels=6"]),
        (lambda e: e.update(groups=4), ["field 'groups' (4) must divide in_channels and out_channels"]),
    ],
)
def test_manifest_errors_name_file_layer_and_field(upsampler_trace, tmp_path, change, fragments):
    broken = shutil.copytree(upsampler_trace, tmp_path / "trace")
    manifest = json.loads((broken / "manifest.json").read_text())
    change(manifest["layers"][1])
    (broken / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TraceError) as info:
        open_trace(broken)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{broken / 'manifest.json'}: layer 1 'up1': ")
    for fragment in fragments:
        assert fragment in message


def test_export_refuses_transposed_layers(upsampler_trace, tmp_path, capsys):
    """Both transposed layers are named in the one line of the refusal; nothing is written."""
    out = tmp_path / "x"
    assert main(["trace", "export", str(upsampler_trace), str(out), "--no-progress"]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "2 layer(s) cannot be exported to dnnsim" in error, error
    for name in ("up1", "up2"):
        assert f"layer '{name}': a transposed convolution cannot be exported to dnnsim" in error
    assert not out.exists()
