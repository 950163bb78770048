"""Recording on a CUDA GPU: the same code as on the CPU (``test_training``, ``test_own_loop``), run where a GPU is.

Skipped on a machine without one; on one, ``pytest tests/trace/test_cuda.py`` runs them.
"""

import copy

import numpy as np
import pytest
import torch
from torch.nn import functional as F
from trace_helpers import SeqNet, seq_reference

from dashraker.trace import open_trace, record
from dashraker.trace.check import check_trace
from dashraker.trace.recorder import Recorder

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_cuda_trace_equals_the_cpu_trace(tmp_path):
    """The same training on both devices: step 1's weights are the same values (initialised on the host), the
    activations and gradients agree to rounding (the GPU's kernels sum in another order)."""
    traces = [open_trace(record("mlp", "digits", [1], 2, tmp_path / device, batch_size=8, progress=False,
                                device=device)) for device in ("cpu", "cuda")]
    assert traces[1].manifest["device"] == "cuda"
    for layer in traces[0].layers:
        cpu, cuda = (trace.load(layer.name, 1) for trace in traces)
        np.testing.assert_allclose(cuda.input, cpu.input, rtol=1e-4, atol=1e-6, err_msg=layer.name)
        np.testing.assert_array_equal(cuda.weight, cpu.weight, err_msg=layer.name)
        np.testing.assert_allclose(cuda.output_grad, cpu.output_grad, rtol=1e-3, atol=1e-6, err_msg=layer.name)


@pytest.mark.parametrize(
    "model, data, options",
    [
        ("resnet50", "digits", dict(image_size=32)),
        ("mobilenetv2", "digits", dict(image_size=32)),
        ("gpt", "pystdlib", dict(seq_len=32, model_args=dict(layers=1, dim=64, heads=4))),
        ("bert", "pystdlib-mlm", dict(seq_len=32, model_args=dict(layers=1, dim=64, heads=4))),
    ],
)
def test_papers_networks_on_cuda_under_bf16(tmp_path, model, data, options):
    out = record(model, data, [1, 3], 2, tmp_path / "t", batch_size=4, progress=False, device="cuda",
                 autocast="bf16", **options)
    result = check_trace(out, progress=False)
    assert not result.problems, result.problems
    trace = result.trace
    assert (trace.manifest["device"], trace.manifest["autocast"], trace.steps) == ("cuda", "bf16", [1, 3])
    layer = trace.layers[1]
    tensors = trace.load(layer.name, 3)
    for array in (tensors.input, tensors.weight):
        np.testing.assert_array_equal(array, torch.from_numpy(np.array(array)).bfloat16().float().numpy())


@pytest.mark.parametrize("autocast", [False, True])
def test_own_loop_on_cuda(tmp_path, autocast):
    """``Recorder`` in one's own loop on a GPU: the tensors of a plain functional pass on the GPU."""
    torch.manual_seed(0)
    net = SeqNet().cuda()
    generator = torch.Generator().manual_seed(1)
    x, y = torch.randn(5, 4, 6, generator=generator).cuda(), torch.randint(0, 3, (5,), generator=generator).cuda()
    reference = seq_reference(copy.deepcopy(net), x, y, autocast=autocast)
    recorder = Recorder(net, tmp_path / "t", samples=2)
    with recorder.step(1):
        with torch.autocast("cuda", torch.bfloat16, enabled=autocast):
            loss = F.cross_entropy(net(x), y)
        loss.backward()
    trace = open_trace(tmp_path / "t")
    operand = (lambda t: t.bfloat16()) if autocast else (lambda t: t)
    tolerance = dict(rtol=2e-2, atol=1e-2) if autocast else dict(rtol=1e-4, atol=1e-6)
    for name, (inp, weight, out) in reference.items():
        got = trace.load(name, 1)
        layout = lambda t: (t.reshape(-1, *t.shape[-2:]) if name.startswith("attention.") else t)  # noqa: E731
        np.testing.assert_allclose(got.input, layout(operand(inp).detach()[:2].float()).cpu().numpy(), **tolerance,
                                   err_msg=name)
        want = operand(weight).detach().float()
        want = layout(want[:2]) if name.startswith("attention.") else want
        np.testing.assert_allclose(got.weight, want.cpu().numpy(), **tolerance, err_msg=name)
        np.testing.assert_allclose(got.output_grad, layout(out.grad[:2].float()).cpu().numpy(), **tolerance,
                                   err_msg=name)
