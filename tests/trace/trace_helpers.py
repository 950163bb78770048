"""Helpers of the trace tests: a small network with every kind of layer the recorder handles, and its plain pass."""

import contextlib

import torch
from torch import nn
from torch.nn import functional as F


class MixedNet(nn.Module):
    """Plain, strided+grouped, depthwise and pointwise convolutions, a Linear, in-place ReLUs, a shared input.

    ``groups`` are conv2's and conv3's ((1, 1): plain convolutions); ``dilation`` dilates conv3.
    """

    def __init__(self, conv4_stride=(2, 1), groups=(2, 8), dilation=1):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=groups[0], bias=False)
        self.conv3 = nn.Conv2d(8, 8, 3, padding=dilation, dilation=dilation, groups=groups[1], bias=False)
        self.conv4 = nn.Conv2d(8, 16, 1, stride=conv4_stride)
        self.fc = nn.Linear(16 * (4 // self.conv4.stride[0]) * (4 // self.conv4.stride[1]), 10)

    def forward(self, x):
        h = F.relu(self.conv1(x), inplace=True)
        h = F.relu(self.conv2(h), inplace=True)
        r = self.conv3(h)
        r += h  # h feeds conv3 and this residual; conv3's output is modified in place twice
        h = F.relu(self.conv4(F.relu(r, inplace=True)), inplace=True)
        return self.fc(h.flatten(1))


def reference_pass(net, x, y):
    """The same forward/backward written out with functional ops, no in-place ops; returns per-layer tensors."""
    layers = {}

    def conv(name, inp):
        module = getattr(net, name)
        out = F.conv2d(inp, module.weight, module.bias, module.stride, module.padding, module.dilation, module.groups)
        out.retain_grad()
        layers[name] = (inp, module, out)
        return out

    h = F.relu(conv("conv1", x))
    h = F.relu(conv("conv2", h))
    r = F.relu(conv("conv3", h) + h)
    h = F.relu(conv("conv4", r)).flatten(1)
    out = F.linear(h, net.fc.weight, net.fc.bias)
    out.retain_grad()
    layers["fc"] = (h, net.fc, out)
    F.cross_entropy(out, y).backward()
    return layers


@contextlib.contextmanager
def one_thread():
    """PyTorch on one thread: on a shared 2-core machine two spinning OpenMP threads make tiny ops 100x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class SeqNet(nn.Module):
    """A user's own sequence network: Conv1d, two-head causal ``Attention``, a Linear applied twice (shared weights).

    Takes [n, 4, 6] sequences, returns [n, 3] logits; layers in call order: conv, q, k, v,
    attention.scores, attention.mix, shared, shared#1, head.
    """

    def __init__(self, channels=4, dim=8, classes=3):
        super().__init__()
        from dashraker.trace.layers import Attention

        self.conv = nn.Conv1d(channels, dim, 3, padding=1)
        self.q, self.k, self.v = (nn.Linear(dim, dim) for _ in range(3))
        self.attention = Attention()
        self.shared = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, classes)

    def heads(self, x):
        """[n, L, dim] -> [n, 2, L, dim / 2]."""
        return x.view(*x.shape[:2], 2, -1).transpose(1, 2)

    def forward(self, x):
        h = F.relu(self.conv(x)).transpose(1, 2)
        a = self.attention(self.heads(self.q(h)), self.heads(self.k(h)), self.heads(self.v(h)), is_causal=True)
        h = h + a.transpose(1, 2).flatten(2)
        return self.head(self.shared(F.relu(self.shared(h))).mean(1))


def seq_reference(net, x, y, autocast=False):
    """``SeqNet``'s pass in plain functional PyTorch on ``x``'s device, under bf16 autocast if asked: per recorded
    layer entry, (input, weight, output) with the output's gradient from autograd, as the recorder lays them out."""
    layers = {}

    def keep(name, inp, weight, out):
        out.retain_grad()
        layers[name] = (inp, weight, out)
        return out

    def linear(name, module, inp):
        return keep(name, inp, module.weight, F.linear(inp, module.weight, module.bias))

    with torch.autocast(x.device.type, torch.bfloat16, enabled=autocast):
        h = F.relu(keep("conv", x, net.conv.weight, F.conv1d(x, net.conv.weight, net.conv.bias, padding=1)))
        h = h.transpose(1, 2)
        q, k, v = (net.heads(linear(name, getattr(net, name), h)) for name in "qkv")
        kt = k.transpose(-2, -1)
        scores = keep("attention.scores", q, kt, q @ kt) / 2.0  # 1 / sqrt(head dim 4)
        causal = torch.ones(6, 6, dtype=torch.bool, device=x.device).tril()
        weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        mix = keep("attention.mix", weights, v, weights @ v)
        h = h + mix.transpose(1, 2).flatten(2)
        h = linear("shared#1", net.shared, F.relu(linear("shared", net.shared, h)))
        out = linear("head", net.head, h.mean(1))
    F.cross_entropy(out, y).backward()
    return layers
