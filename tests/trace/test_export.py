"""The dnnsim export writes SPEC section 6's file names, the trace's values and one trace_params.csv line per layer."""

import numpy as np
import pytest
from trace_helpers import MixedNet

from dashraker.cli import main
from dashraker.trace import TraceError, open_trace
from dashraker.trace.export import export_dnnsim


def test_export_dnnsim(square_trace, tmp_path):
    root = export_dnnsim(square_trace, tmp_path / "out", net="mixed")
    assert root == tmp_path / "out" / "mixed"
    trace = open_trace(square_trace)
    # 2 batches per epoch: step 1 is epoch 0 batch 0, step 3 is epoch 1 batch 0.
    for step, tag in ((1, "0-0"), (3, "1-0")):
        for layer in trace.layers:
            tensors = trace.load(layer.name, step)
            for folder, suffix, array in (
                ("weights", "w", tensors.weight),
                ("input", "in", tensors.input),
                ("outGrad", "outGrad", tensors.output_grad),
            ):
                exported = np.load(root / folder / f"{layer.name}-{tag}-{suffix}.npy")
                assert exported.dtype == np.float32
                np.testing.assert_array_equal(exported, array)
    assert sorted(p.name for p in root.iterdir()) == ["input", "outGrad", "trace_params.csv", "weights"]
    assert len(list(root.rglob("*.npy"))) == 2 * 5 * 3
    net = MixedNet(conv4_stride=2)
    expected = [
        f"{name},{m.out_channels},{m.kernel_size[0]},{m.kernel_size[1]},{m.stride[0]},{m.padding[0]}"
        for name, m in (("conv1", net.conv1), ("conv2", net.conv2), ("conv3", net.conv3), ("conv4", net.conv4))
    ]
    assert (root / "trace_params.csv").read_text().splitlines() == expected + ["fc,10,1,1,1,0"]


def test_export_refuses_unequal_strides(mixed_trace, tmp_path):
    # conv4 has stride (2, 1), which one csv column cannot hold.
    with pytest.raises(TraceError, match=r"layer 'conv4': stride \[2, 1\] differs between axes"):
        export_dnnsim(mixed_trace, tmp_path / "out")
    assert main(["trace", "export", "--no-progress", str(mixed_trace), str(tmp_path / "out")]) == 2
