"""Recording inside the user's own training loop: autocast, gradient accumulation, any optimizer, DDP, repeated calls.

The recorded tensors are checked against a plain functional pass of the same network whose
gradients come from PyTorch's autograd (``seq_reference``).
"""

import contextlib
import copy
import socket

import numpy as np
import pytest
import torch
from torch import distributed as dist
from torch.nn import functional as F
from trace_helpers import SeqNet, seq_reference

from dashraker.mapping.runner import layer_ops
from dashraker.trace import RecordError, open_trace
from dashraker.trace.recorder import Recorder, recording

SAMPLES = 2
LAYERS = ["conv", "q", "k", "v", "attention.scores", "attention.mix", "shared", "shared#1", "head"]


def _batch(seed, n=5):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, 6, generator=gen), torch.randint(0, 3, (n,), generator=gen)


def _layout(name, tensor):
    """A reference tensor as the recorder saves it: the first samples, a matmul's as [batch, M, N]."""
    tensor = tensor.detach()[:SAMPLES].float()
    return (tensor.reshape(-1, *tensor.shape[-2:]) if name.startswith("attention.") else tensor).numpy()


def _check_against_reference(trace, step, reference, suffix=lambda name: name, operand=lambda t: t):
    """``operand``: what a product consumes of an input or weight (under autocast: rounded to bf16)."""
    for name, (inp, weight, out) in reference.items():
        got, entry = trace.load(suffix(name), step), suffix(name)
        np.testing.assert_array_equal(got.input, _layout(name, operand(inp)), err_msg=entry)
        weight = operand(weight)
        expected_weight = _layout(name, weight) if name.startswith("attention.") else weight.detach().float().numpy()
        np.testing.assert_array_equal(got.weight, expected_weight, err_msg=entry)
        np.testing.assert_array_equal(got.output_grad, _layout(name, out.grad), err_msg=entry)


@pytest.mark.parametrize("autocast", [False, True])
def test_golden_tensors_with_and_without_autocast(tmp_path, autocast):
    torch.manual_seed(0)
    net = SeqNet()
    reference = seq_reference(copy.deepcopy(net), *_batch(1), autocast=autocast)
    x, y = _batch(1)
    recorder = Recorder(net, tmp_path / "t", samples=SAMPLES)
    with recorder.step(1):
        with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            loss = F.cross_entropy(net(x), y)
        loss.backward()
    trace = open_trace(tmp_path / "t")
    assert [layer.name for layer in trace.layers] == LAYERS
    types = {layer.name: layer.type for layer in trace.layers}
    assert (types["conv"], types["attention.mix"], types["shared#1"]) == ("conv1d", "matmul", "linear")
    scores = trace.layer("attention.scores")  # 2 samples x 2 heads of [6, 4] @ [4, 6]
    assert (scores.input_shape, scores.weight_shape, scores.in_channels, scores.out_channels) == (
        (4, 6, 4), (4, 4, 6), 4, 6)
    assert (trace.layer("conv").kernel, trace.layer("conv").padding) == ((1, 3), (0, 1))
    # Under autocast the products ran in bf16: the inputs and weights recorded are the bf16 values they consumed
    # (the data fed to the first layer and the fp32 master weights rounded), the gradients as autograd gave them.
    _check_against_reference(trace, 1, reference, operand=lambda t: t.bfloat16() if autocast else t)
    if autocast:
        for name in ("conv", "q", "attention.scores", "head"):
            tensors = trace.load(name, 1)
            for tensor in (tensors.input, tensors.weight):
                np.testing.assert_array_equal(tensor, torch.tensor(tensor).bfloat16().float().numpy(), err_msg=name)


def test_gradient_accumulation_records_each_micro_batch(tmp_path):
    """Two micro-batches in one recorded step: each layer's second run is ``name#1`` (shared's: #2 and #3), and the
    step's update is the one without recording."""
    torch.manual_seed(0)
    net = SeqNet()
    plain = copy.deepcopy(net)
    micro = [_batch(1, 4), _batch(2, 4)]
    references = [seq_reference(copy.deepcopy(net), x, y) for x, y in micro]
    recorder = Recorder(net, tmp_path / "t", samples=SAMPLES)
    for model, context in ((net, recorder.step(1)), (plain, contextlib.nullcontext())):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        with context:
            for x, y in micro:
                (F.cross_entropy(model(x), y) / 2).backward()
        optimizer.step()
    for a, b in zip(net.parameters(), plain.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    trace = open_trace(tmp_path / "t")
    second = {name: f"{name}#1" for name in LAYERS} | {"shared": "shared#2", "shared#1": "shared#3"}
    assert [layer.name for layer in trace.layers] == [
        "conv", "conv#1", "q", "q#1", "k", "k#1", "v", "v#1", "attention.scores", "attention.scores#1",
        "attention.mix", "attention.mix#1", "shared", "shared#1", "shared#2", "shared#3", "head", "head#1"]
    # The data feeds conv and conv#1: no input gradient for either (``layer_ops``), every other layer has one.
    assert [layer.name for layer in trace.layers if not layer.input_needs_grad] == ["conv", "conv#1"]
    assert layer_ops(1, trace.layer("conv#1")) == ["fwd", "bwd_weight"]
    assert layer_ops(2, trace.layer("q")) == ["fwd", "bwd_input", "bwd_weight"]
    # A micro-batch's gradients are those of its own loss, halved by the accumulation's scaling.
    for reference in references:
        for _, _, out in reference.values():
            out.grad /= 2
    _check_against_reference(trace, 1, references[0])
    _check_against_reference(trace, 1, references[1], suffix=second.get)


def test_another_optimizer_trains_as_without_recording(tmp_path):
    """RMSprop with recording on steps 1 and 3 ends with the parameters of the same loop never recorded, and step 3
    records the weights that loop had before its third update."""
    torch.manual_seed(0)
    net = SeqNet()
    plain = copy.deepcopy(net)
    before_third = None
    with recording(net, tmp_path / "t", samples=SAMPLES, meta={"model": "SeqNet"}) as recorder:
        for model, record in ((net, True), (plain, False)):
            optimizer = torch.optim.RMSprop(model.parameters(), lr=0.01)
            for step in (1, 2, 3):
                if not record and step == 3:
                    before_third = model.head.weight.detach().clone()
                with recorder.step(step) if record and step != 2 else contextlib.nullcontext():
                    optimizer.zero_grad()
                    F.cross_entropy(model(_batch(step)[0]), _batch(step)[1]).backward()
                optimizer.step()
    for a, b in zip(net.parameters(), plain.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    trace = open_trace(tmp_path / "t")
    assert trace.steps == [1, 3] and trace.manifest["model"] == "SeqNet"
    np.testing.assert_array_equal(trace.load("head", 3).weight, before_third.numpy())


def test_recording_context_writes_nothing_on_failure(tmp_path):
    out = tmp_path / "t"
    net = SeqNet()
    with pytest.raises(RecordError, match="no step was recorded"):
        with recording(net, out, samples=SAMPLES):
            pass
    with pytest.raises(ZeroDivisionError):
        with recording(net, out, samples=SAMPLES) as recorder:
            with recorder.step(1):
                F.cross_entropy(net(_batch(1)[0]), _batch(1)[1]).backward()
            1 / 0
    assert not out.exists() and not list(tmp_path.iterdir())


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_world_size_one(tmp_path):
    """A DistributedDataParallel model (gloo, one process): layers keep the plain model's names and tensors."""
    torch.manual_seed(0)
    net = SeqNet()
    reference = seq_reference(copy.deepcopy(net), *_batch(1))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        model = torch.nn.parallel.DistributedDataParallel(net)
        recorder = Recorder(model, tmp_path / "t", samples=SAMPLES)
        with recorder.step(1):
            F.cross_entropy(model(_batch(1)[0]), _batch(1)[1]).backward()
    finally:
        dist.destroy_process_group()
    trace = open_trace(tmp_path / "t")
    assert [layer.name for layer in trace.layers] == LAYERS
    _check_against_reference(trace, 1, reference)


def test_unbatched_or_broadcast_matmul_is_refused(tmp_path):
    from dashraker.trace.layers import MatMul

    net = torch.nn.ModuleDict({"product": MatMul()})
    recorder = Recorder(net, tmp_path / "t", samples=1)
    for a, b in ((torch.randn(3, 4), torch.randn(4, 5)), (torch.randn(2, 3, 4), torch.randn(4, 5))):
        with pytest.raises(RecordError, match=r"layer 'product': a recorded matmul takes \[batch, ..., M, K\]"):
            with recorder.step(1):
                net["product"](a, b)
