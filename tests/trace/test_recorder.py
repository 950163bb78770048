"""The recorder saves what a plain forward/backward computes, and recording leaves training unchanged."""

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from dashraker.trace import RecordError, open_trace
from dashraker.trace.data import Dataset
from dashraker.trace.recorder import Recorder
from dashraker.trace.training import train

from trace_helpers import MixedNet, reference_pass

SAMPLES = 3


def _record_one_step(net, x, y, out, **kwargs):
    recorder = Recorder(net, out, samples=SAMPLES, meta={"model": "test"}, **kwargs)
    with recorder.step(1):
        F.cross_entropy(net(x), y).backward()
    return open_trace(out)


def test_tensors_equal_plain_forward_backward(tmp_path):
    torch.manual_seed(0)
    net = MixedNet()
    reference_net = copy.deepcopy(net)
    x, y = torch.randn(5, 3, 8, 8), torch.randint(0, 10, (5,))
    trace = _record_one_step(net, x, y, tmp_path / "t", input_grad=True)
    reference = reference_pass(reference_net, x.clone(), y)
    assert [layer.name for layer in trace.layers] == list(reference)
    for name, (inp, module, out) in reference.items():
        got = trace.load(name, 1)
        np.testing.assert_array_equal(got.input, inp[:SAMPLES].detach().numpy(), err_msg=name)
        np.testing.assert_array_equal(got.weight, module.weight.detach().numpy(), err_msg=name)
        np.testing.assert_array_equal(got.output_grad, out.grad[:SAMPLES].numpy(), err_msg=name)
        if name == "conv1":
            assert got.input_grad is None  # the network input needs no gradient
            continue
        # This layer's own share of the input gradient (conv3's input also feeds a residual).
        if isinstance(module, nn.Conv2d):
            expected = torch.nn.grad.conv2d_input(
                inp.shape, module.weight, out.grad, module.stride, module.padding, module.dilation, module.groups
            )
        else:
            expected = out.grad @ module.weight
        expected = expected[:SAMPLES].detach().numpy()
        np.testing.assert_allclose(got.input_grad, expected, rtol=1e-5, atol=1e-7, err_msg=name)


def test_layer_hyper_parameters(mixed_trace):
    trace = open_trace(mixed_trace)
    conv2, conv3, conv4, fc = (trace.layer(n) for n in ("conv2", "conv3", "conv4", "fc"))
    assert (conv2.type, conv2.stride, conv2.padding, conv2.groups, conv2.bias) == ("conv2d", (2, 2), (1, 1), 2, False)
    assert conv2.weight_shape == (8, 4, 3, 3) and conv2.output_grad_shape == (2, 8, 4, 4)
    assert conv3.groups == 8 and conv3.weight_shape == (8, 1, 3, 3)
    assert conv4.stride == (2, 1) and conv4.kernel == (1, 1) and conv4.output_grad_shape == (2, 16, 2, 4)
    assert (fc.type, fc.in_channels, fc.out_channels, fc.kernel, fc.bias) == ("linear", 128, 10, (1, 1), True)
    assert fc.input_shape == (2, 128) and fc.weight_shape == (10, 128) and fc.output_grad_shape == (2, 10)
    assert trace.steps == [1, 3]


class TokenMLP(nn.Module):
    """Linear layers on [batch, tokens, features]: PyTorch returns views there, then modified in place by ReLU."""

    def __init__(self):
        super().__init__()
        self.up = nn.Linear(6, 12)
        self.down = nn.Linear(12, 4)

    def forward(self, x):
        return self.down(F.relu(self.up(x), inplace=True))


def test_linear_on_tokens_with_inplace_relu(tmp_path):
    torch.manual_seed(0)
    net = TokenMLP()
    x, y = torch.randn(4, 5, 6), torch.randint(0, 4, (4, 5))
    recorder = Recorder(net, tmp_path / "t", samples=2, meta={"model": "tokens"})
    with recorder.step(7):
        F.cross_entropy(net(x).reshape(-1, 4), y.reshape(-1)).backward()
    trace = open_trace(tmp_path / "t")
    hidden = F.linear(x, net.up.weight, net.up.bias)
    hidden.retain_grad()
    logits = F.linear(F.relu(hidden), net.down.weight, net.down.bias)
    logits.retain_grad()
    F.cross_entropy(logits.reshape(-1, 4), y.reshape(-1)).backward()
    up, down = trace.load("up", 7), trace.load("down", 7)
    # The tokens stay positions of each sample: [samples, tokens, features].
    np.testing.assert_array_equal(up.input, x[:2].numpy())
    np.testing.assert_array_equal(up.output_grad, hidden.grad[:2].numpy())
    np.testing.assert_array_equal(down.input, F.relu(hidden)[:2].detach().numpy())
    np.testing.assert_array_equal(down.output_grad, logits.grad[:2].numpy())


def _mixed_dataset():
    generator = torch.Generator().manual_seed(3)
    x, y = torch.randn(40, 3, 8, 8, generator=generator), torch.randint(0, 10, (40,), generator=generator)
    return Dataset("random", x, y, 10, "tensors")


def _train_mixed(recorder=None, steps=(), prune=None):
    torch.manual_seed(0)
    net = MixedNet()
    if recorder is not None:
        recorder = recorder(net)
    context = (lambda step: recorder.step(step) if step in steps else None) if recorder else None
    losses = train(net, _mixed_dataset(), 6, batch_size=8, seed=0, lr=0.1, prune=prune, step_context=context)
    return losses, net.state_dict()


@pytest.mark.parametrize("input_grad", [False, True])
@pytest.mark.parametrize("prune", [None, 0.5])
def test_recording_does_not_change_training(tmp_path, input_grad, prune):
    plain_losses, plain_state = _train_mixed(prune=prune)
    def make(net):
        return Recorder(net, tmp_path / "t", samples=4, input_grad=input_grad, meta={"model": "m"})

    losses, state = _train_mixed(make, steps=(1, 2, 5), prune=prune)
    assert losses == plain_losses
    assert plain_losses[-1] < plain_losses[0]  # it does train
    assert state.keys() == plain_state.keys()
    for key in state:
        assert torch.equal(state[key], plain_state[key]), key
    assert open_trace(tmp_path / "t").steps == [1, 2, 5]


def test_interrupted_run_leaves_the_finished_steps(tmp_path):
    torch.manual_seed(0)
    net = MixedNet()
    recorder = Recorder(net, tmp_path / "t", samples=2, meta={"model": "m"})
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    for step in (1, 2):
        with recorder.step(step):
            F.cross_entropy(net(x), y).backward()
    with pytest.raises(KeyboardInterrupt):
        with recorder.step(3):
            F.cross_entropy(net(x), y).backward()
            raise KeyboardInterrupt
    trace = open_trace(tmp_path / "t")
    assert trace.steps == [1, 2]
    assert not (tmp_path / "t" / "step_000003").exists()
    assert not list((tmp_path / "t").rglob("*.tmp"))
    for layer in trace.layers:
        trace.load(layer.name, 2)
    # The hooks are gone: later steps run without recording.
    F.cross_entropy(net(x), y).backward()
    assert trace.steps == open_trace(tmp_path / "t").steps


def test_layer_without_gradient_is_refused(tmp_path):
    net = TokenMLP()
    recorder = Recorder(net, tmp_path / "t", samples=1)
    with pytest.raises(RecordError, match="'down' got no gradient"):
        with recorder.step(1):
            net.down(torch.zeros(1, 12))
            net.up(torch.randn(1, 6)).sum().backward()


def test_unrecordable_padding_is_refused(tmp_path):
    with pytest.raises(RecordError, match="padding_mode 'reflect'"):
        Recorder(nn.Conv2d(2, 2, 3, padding=1, padding_mode="reflect"), tmp_path, samples=1)


class _Sequence(nn.Module):
    """An LSTM and a ConvTranspose1d (not recorded), a BatchNorm and an Embedding (no PE work), a Linear."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.lstm = nn.LSTM(4, 4, batch_first=True)
        self.up = nn.ConvTranspose1d(2, 1, 2)
        self.norm = nn.BatchNorm1d(1)
        self.head = nn.Linear(5, 3)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))  # [n, 2, 4]
        return self.head(self.norm(self.up(out)).flatten(1))


def test_unrecorded_modules_warned_by_name_or_refused(tmp_path):
    from dashraker.trace.recorder import UnrecordedWarning, recording

    net = _Sequence()
    tokens, y = torch.randint(0, 10, (4, 2)), torch.tensor([0, 1, 2, 0])
    with pytest.warns(UnrecordedWarning, match=r"2 module\(s\) .*: lstm \(LSTM\), up \(ConvTranspose1d\)$"):
        with recording(net, tmp_path / "t", samples=2) as recorder:
            with recorder.step(1):
                F.cross_entropy(net(tokens), y).backward()
    assert [layer.name for layer in open_trace(tmp_path / "t").layers] == ["head"]
    with pytest.raises(RecordError, match=r"lstm \(LSTM\), up \(ConvTranspose1d\); refused \(strict\)"):
        with recording(net, tmp_path / "s", samples=2, strict=True):
            pass
    assert not (tmp_path / "s").exists()


def test_tensors_are_written_as_they_appear_and_a_failed_step_leaves_none(tmp_path):
    """Memory bound: a layer's input and weight are on disk once its forward pass ran, its output gradient once the
    backward pass reached it, before the step ends; a step that raises removes what it wrote."""
    torch.manual_seed(0)
    net = MixedNet()
    x, y = torch.randn(5, 3, 8, 8), torch.randint(0, 10, (5,))
    recorder = Recorder(net, tmp_path / "t", samples=SAMPLES)
    step = tmp_path / "t" / "step_000001"
    with recorder.step(1):
        loss = F.cross_entropy(net(x), y)
        first = sorted(p.relative_to(step).as_posix() for p in step.rglob("*.npy"))
        assert first and all(name.endswith(("/input.npy", "/weight.npy")) for name in first)
        loss.backward()
        assert len(list(step.rglob("output_grad.npy"))) == len(first) // 2
    assert open_trace(tmp_path / "t").steps == [1]
    with pytest.raises(RuntimeError, match="stopped"):
        with recorder.step(2):
            net(x)
            assert (tmp_path / "t" / "step_000002").is_dir()
            raise RuntimeError("stopped")
    assert not (tmp_path / "t" / "step_000002").exists() and open_trace(tmp_path / "t").steps == [1]
