"""Layers of any convolution geometry with real tensors: PyTorch computes the activations, gradients and references."""

import types

import torch


def bf16(x):
    return x.to(torch.bfloat16).to(torch.float32)


def make_layer(kind="conv2d", n=2, c=4, m=6, size=5, kernel=3, stride=1, padding=1, dilation=1, groups=1, seed=0,
               name="layer", output_padding=0):
    """A layer's hyper-parameters and bf16-exact tensors (ReLU-sparse input and gradient), plus fp64 references.

    ``kind``: conv2d, conv1d (length ``size``), linear, tokens (a Linear on [n, size, c]), matmul (``n``
    products [size, c] @ [c, m]), or conv_transpose2d (``c`` to ``m`` channels, with ``output_padding``).

    References: forward output, input gradient and weight gradient computed by PyTorch autograd in fp64.
    """
    gen = torch.Generator().manual_seed(seed)
    if kind in ("linear", "tokens"):  # tokens: a Linear over [n, size, c] sequences
        rows = (n, size) if kind == "tokens" else (n,)
        a = bf16(torch.relu(torch.randn(*rows, c, generator=gen)))
        w = bf16(torch.randn(m, c, generator=gen))
        g = bf16(torch.randn(*rows, m, generator=gen) * (torch.rand(*rows, m, generator=gen) > 0.4))
        a64, w64 = a.double().requires_grad_(), w.double().requires_grad_()
        out = a64 @ w64.T
        layer = types.SimpleNamespace(name=name, type="linear", stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                                      groups=1)
    elif kind == "matmul":  # n products [size, c] @ [c, m] of two activations, the first ReLU-sparse
        a = bf16(torch.relu(torch.randn(n, size, c, generator=gen)))
        w = bf16(torch.randn(n, c, m, generator=gen))
        g = bf16(torch.randn(n, size, m, generator=gen) * (torch.rand(n, size, m, generator=gen) > 0.4))
        a64, w64 = a.double().requires_grad_(), w.double().requires_grad_()
        out = a64 @ w64
        layer = types.SimpleNamespace(name=name, type="matmul", stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                                      groups=1)
    elif kind == "conv1d":
        a = bf16(torch.relu(torch.randn(n, c, size, generator=gen)))
        w = bf16(torch.randn(m, c // groups, kernel, generator=gen))
        a64, w64 = a.double().requires_grad_(), w.double().requires_grad_()
        out = torch.nn.functional.conv1d(a64, w64, stride=stride, padding=padding, dilation=dilation, groups=groups)
        g = bf16(torch.randn(out.shape, generator=gen) * (torch.rand(out.shape, generator=gen) > 0.4))
        layer = types.SimpleNamespace(name=name, type="conv1d", stride=(1, stride), padding=(0, padding),
                                      dilation=(1, dilation), groups=groups)
    elif kind == "conv_transpose2d":
        a = bf16(torch.relu(torch.randn(n, c, size, size, generator=gen)))
        w = bf16(torch.randn(c, m // groups, kernel, kernel, generator=gen))
        a64, w64 = a.double().requires_grad_(), w.double().requires_grad_()
        out = torch.nn.functional.conv_transpose2d(a64, w64, stride=stride, padding=padding,
                                                   output_padding=output_padding, groups=groups, dilation=dilation)
        g = bf16(torch.randn(out.shape, generator=gen) * (torch.rand(out.shape, generator=gen) > 0.4))
        layer = types.SimpleNamespace(
            name=name, type="conv_transpose2d", stride=(stride, stride), padding=(padding, padding),
            output_padding=(output_padding, output_padding), dilation=(dilation, dilation), groups=groups,
        )
    else:
        a = bf16(torch.relu(torch.randn(n, c, size, size, generator=gen)))
        w = bf16(torch.randn(m, c // groups, kernel, kernel, generator=gen))
        a64, w64 = a.double().requires_grad_(), w.double().requires_grad_()
        out = torch.nn.functional.conv2d(a64, w64, stride=stride, padding=padding, dilation=dilation, groups=groups)
        g = bf16(torch.randn(out.shape, generator=gen) * (torch.rand(out.shape, generator=gen) > 0.4))
        layer = types.SimpleNamespace(
            name=name, type="conv2d", stride=(stride, stride), padding=(padding, padding),
            dilation=(dilation, dilation), groups=groups,
        )
    out.backward(g.double())
    tensors = types.SimpleNamespace(input=a.numpy(), weight=w.numpy(), output_grad=g.numpy(), input_grad=None)
    reference = {"fwd": out.detach().numpy(), "bwd_input": a64.grad.numpy(), "bwd_weight": w64.grad.numpy()}
    return layer, tensors, reference


class Upsampler(torch.nn.Module):
    """A convolution then two transposed ones, recorded as ``conv_transpose2d`` layers: ``up1`` strided and grouped
    with an output padding, ``up2`` dilated and called with an ``output_size`` that pads its output by one more."""

    def __init__(self):
        super().__init__()
        self.down = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.up1 = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.up2 = torch.nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, dilation=2, bias=False)
        self.head = torch.nn.Linear(4, 3)

    def forward(self, x):  # [n, 3, 8, 8] -> [n, 4, 4, 4] -> [n, 6, 8, 8] -> [n, 4, 18, 18] -> [n, 3]
        h = torch.relu(self.up1(torch.relu(self.down(x))))
        return self.head(torch.relu(self.up2(h, output_size=(18, 18))).mean((2, 3)))


def upsampler_batch():
    """The ``Upsampler`` that ``record_upsampler`` records and its batch: 4 random 8x8 images and their classes."""
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    return Upsampler(), torch.randn(4, 3, 8, 8, generator=generator), torch.randint(0, 3, (4,), generator=generator)


def record_upsampler(out, **options):
    """A trace of ``Upsampler``: the forward and backward pass of ``upsampler_batch`` recorded as step 1, 2 samples
    (``options``: the ``Recorder``'s)."""
    from dashraker.trace.recorder import Recorder

    net, x, y = upsampler_batch()
    with Recorder(net, out, samples=2, meta={"model": "upsampler"}, **options).step(1):
        torch.nn.functional.cross_entropy(net(x), y).backward()
    return out
