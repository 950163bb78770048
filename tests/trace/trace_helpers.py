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
