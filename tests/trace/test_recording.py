"""Training options of ``record``: the step schedule, the device, autocast."""

import numpy as np
import pytest
import torch

from dashraker.cli import main
from dashraker.trace import RecordError, open_trace, record
from dashraker.trace.training import check_device, parse_steps


@pytest.mark.parametrize(
    "text, steps",
    [
        ("3", [3]),
        ("1,50,200", [1, 50, 200]),
        ("1,1000:5000:1000", [1, 1000, 2000, 3000, 4000, 5000]),
        ("10:25:10, 30", [10, 20, 30]),
        ("7:7:3", [7]),
    ],
)
def test_step_schedules(text, steps):
    assert parse_steps(text) == steps


@pytest.mark.parametrize(
    "text, message",
    [
        ("5,3", r"steps must increase: step 3 comes after step 5"),
        ("1,1", r"steps must increase: step 1 comes after step 1"),
        ("1,1000:5000:1000,4500", r"step 4500 comes after step 5000"),
        ("5:1:1", r"not '5:1:1'"),
        ("1:9:0", r"not '1:9:0'"),
        ("1:9", r"not '1:9'"),
        ("x", r"not 'x'"),
        ("0", r"step numbers in 1..999,999"),
    ],
)
def test_bad_schedules(text, message):
    with pytest.raises(RecordError, match=message):
        parse_steps(text)


def test_a_schedule_out_of_order_is_one_line_exit_2_nothing_written(tmp_path, capsys):
    code = main(["trace", "record", "--model", "mlp", "--steps", "1,1000:3000:1000,2500", "--samples", "1",
                 "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code == 2 and err == "dashraker trace: error: steps must increase: step 2500 comes after step 3000 in " \
        "[1, 1000, 2000, 3000, 2500]\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_one_line_exit_2(tmp_path, capsys):
    code = main(["trace", "record", "--model", "mlp", "--steps", "1", "--samples", "1", "--device", "cuda",
                 "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("dashraker trace: error: device 'cuda': no CUDA GPU is available here")
    assert len(err.splitlines()) == 1 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("device, message", [("tpu", "recording runs on cpu or cuda"), ("cuda:x", "device 'cuda:x'")])
def test_bad_devices(device, message):
    with pytest.raises(RecordError, match=message):
        check_device(device)


def _bf16(array):
    return torch.from_numpy(np.array(array)).bfloat16().float().numpy()


def test_record_under_bf16_autocast(tmp_path):
    """The papers' setting: every recorded input and weight is a bf16 value (what the products consumed)."""
    out = record("gpt", "pystdlib", [1, 2], 1, tmp_path / "t", batch_size=2, seq_len=16, progress=False, threads=1,
                 autocast="bf16", model_args=dict(layers=1, dim=32, heads=2))
    trace = open_trace(out)
    assert trace.manifest["autocast"] == "bf16" and trace.manifest["device"] == "cpu"
    for layer in trace.layers:
        tensors = trace.load(layer.name, 2)
        for array in (tensors.input, tensors.weight):
            np.testing.assert_array_equal(array, _bf16(array), err_msg=layer.name)
    with pytest.raises(RecordError, match=r"autocast must be one of \['bf16'\], not 'fp16'"):
        record("mlp", "digits", [1], 1, tmp_path / "u", autocast="fp16")
