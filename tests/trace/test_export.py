"""The dnnsim export writes SPEC section 6's file names, the trace's values and one trace_params.csv line per layer."""

import numpy as np
import pytest
from trace_helpers import MixedNet

from dashraker.cli import main
from dashraker.trace import TraceError, open_trace
from dashraker.trace.export import export_dnnsim, trace_names


def _dnnsim_type(name):
    """How DNNsim types a trace_params.csv line by its name (interface/src/NetReader.cpp at 3b0ecaf)."""
    for word, kind in (("decoder", "Decoder"), ("encoder", "Encoder"), ("fc", "InnerProduct"),
                       ("Linear", "InnerProduct"), ("lstm", "LSTM")):
        if word in name:
            return kind
    return "Convolution"


# Equal strides on both axes and no groups: what the dnnsim layout can hold.
SQUARE = dict(conv4_stride=2, groups=(1, 1))


def test_export_dnnsim(mixed_net_trace, tmp_path):
    square_trace = mixed_net_trace(**SQUARE)
    (tmp_path / "out" / "mixed" / "weights").mkdir(parents=True)
    (tmp_path / "out" / "mixed" / "weights" / "stale.npy").write_bytes(b"")  # an older export is replaced whole
    root = export_dnnsim(square_trace, tmp_path / "out", net="mixed", overwrite=True)
    assert root == tmp_path / "out" / "mixed"
    trace = open_trace(square_trace)
    names = ["conv0", "conv1", "conv2", "conv3", "fc4"]
    # 2 batches per epoch: step 1 is epoch 0 batch 0, step 3 is epoch 1 batch 0.
    for step, tag in ((1, "0-0"), (3, "1-0")):
        for name, layer in zip(names, trace.layers):
            tensors = trace.load(layer.name, step)
            for folder, suffix, array in (
                ("weights", "w", tensors.weight),
                ("input", "in", tensors.input),
                ("outGrad", "outGrad", tensors.output_grad),
            ):
                exported = np.load(root / folder / f"{name}-{tag}-{suffix}.npy")
                assert exported.dtype == np.float32
                np.testing.assert_array_equal(exported, array)
    assert sorted(p.name for p in root.iterdir()) == ["DNNSIM.txt", "input", "layer_names.csv", "outGrad",
                                                       "tensordash.prototxt", "trace_params.csv", "weights"]
    assert sorted(p.name for p in root.parent.iterdir()) == ["mixed"]  # no temporary folder left
    assert len(list(root.rglob("*.npy"))) == 2 * 5 * 3  # the stale file went with the older export
    net = MixedNet(**SQUARE)
    expected = [
        f"{name},{m.out_channels},{m.kernel_size[0]},{m.kernel_size[1]},{m.stride[0]},{m.padding[0]}"
        for name, m in zip(names, (net.conv1, net.conv2, net.conv3, net.conv4))
    ]
    lines = (root / "trace_params.csv").read_text().splitlines()
    assert lines == expected + ["fc4,10,1,1,1,0"]
    assert [_dnnsim_type(line.split(",")[0]) for line in lines] == ["Convolution"] * 4 + ["InnerProduct"]
    assert (root / "layer_names.csv").read_text().splitlines() == [
        "dnnsim_name,trace_name", *(f"{new},{old}" for new, old in zip(names, ["conv1", "conv2", "conv3", "conv4", "fc"]))]


@pytest.mark.parametrize("options, message", [
    (dict(groups=(2, 8)), r"layer 'conv2': groups 2 \(grouped\) cannot be exported to dnnsim: trace_params.csv "
                          r"\(name,out_channels,Kx,Ky,stride,padding\) has no groups or dilation column"),
    (dict(groups=(1, 8)), r"layer 'conv3': groups 8 \(depthwise\) cannot be exported"),
    (dict(dilation=2), r"layer 'conv3': dilation \[2, 2\] \(dilated\) cannot be exported"),
    (dict(conv4_stride=(2, 1), groups=(1, 1)), r"layer 'conv4': stride \[2, 1\] differs between axes"),
])
def test_export_refuses_what_the_csv_cannot_say(options, message, mixed_net_trace, tmp_path, capsys):
    path = mixed_net_trace(**{**SQUARE, **options})
    with pytest.raises(TraceError, match=message):
        export_dnnsim(path, tmp_path / "out")
    assert main(["trace", "export", "--no-progress", str(path), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "layer 'conv" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())  # nothing written


def test_export_refuses_matmul(tmp_path):
    import torch

    from dashraker.trace.layers import MatMul
    from dashraker.trace.recorder import Recorder

    net = torch.nn.ModuleDict({"fc": torch.nn.Linear(4, 4), "product": MatMul()})
    with Recorder(net, tmp_path / "t", samples=1).step(1):
        h = net["fc"](torch.randn(2, 3, 4))
        net["product"](h, h.transpose(1, 2)).sum().backward()
    with pytest.raises(TraceError, match=r"layer 'product': a matmul \(a product of two activations"):
        export_dnnsim(tmp_path / "t", tmp_path / "out")


def test_every_refusal_at_once_in_one_line(mixed_net_trace, tmp_path, capsys):
    """MixedNet's defaults: conv2 grouped, conv3 depthwise, conv4's stride differs between axes: all three named."""
    path = mixed_net_trace()
    assert main(["trace", "export", "--no-progress", str(path), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert "3 layer(s) cannot be exported to dnnsim: layer 'conv2': groups 2 (grouped)" in err, err
    assert "; layer 'conv3': groups 8 (depthwise)" in err and "; layer 'conv4': stride [2, 1] differs" in err, err
    assert not (tmp_path / "out").exists()


def test_help_lists_what_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["trace", "export", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for refused in ("grouped and depthwise", "dilated", "differs between the axes", "matmul layers",
                    "transformer's attention", "another network's export"):
        assert refused in text, refused


def test_another_networks_export_is_never_replaced(mixed_net_trace, tmp_path, capsys):
    path = mixed_net_trace(**SQUARE)
    export_dnnsim(path, tmp_path / "out", net="vgg")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    for force in ([], ["--force"]):
        assert main(["trace", "export", "--no-progress", *force, "--net", "mixed", str(path), str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "holds the export of another network (vgg); export mixed into a folder " \
            "of its own (--force replaces only an export of mixed)" in err, err
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    assert main(["trace", "export", "--no-progress", "--force", "--net", "vgg", str(path), str(tmp_path / "out")]) == 0
    capsys.readouterr()
    assert main(["trace", "export", "--no-progress", "--force", "--net", "vgg", str(path), "--out",
                 str(tmp_path / "out")]) == 0  # --out, as every other command takes it
    for twice in ([str(tmp_path / "a"), "--out", str(tmp_path / "b")], []):
        assert main(["trace", "export", "--no-progress", str(path), *twice]) == 2
        assert "give the output folder once" in capsys.readouterr().err


def test_the_steps_dnnsim_needs_are_written_out(mixed_net_trace, tmp_path):
    """Steps 1 and 3 of 2 batches per epoch are epoch 0 and 1 of batch 0: one DNNsim simulation of 2 epochs."""
    root = export_dnnsim(mixed_net_trace(**SQUARE), tmp_path / "out", net="mixed")
    batch_file = (root / "tensordash.prototxt").read_text()
    assert batch_file.count("simulate {") == 1 and "epochs: 2\n  batch: 0\n" in batch_file
    assert 'network: "mixed"' in batch_file and "training: true" in batch_file and "lookahead_h: 2" in batch_file
    steps = (root / "DNNSIM.txt").read_text()
    assert "cp EXPORT/mixed/trace_params.csv models/mixed/" in steps and "cp -r EXPORT/mixed net_traces/mixed" in steps
    assert trace_names(root) == {"conv0": "conv1", "conv1": "conv2", "conv2": "conv3", "conv3": "conv4", "fc4": "fc"}
