"""Layers of any convolution geometry with real tensors: PyTorch computes the activations, gradients and references."""

import types

import torch


def bf16(x):
    return x.to(torch.bfloat16).to(torch.float32)


def make_layer(kind="conv2d", n=2, c=4, m=6, size=5, kernel=3, stride=1, padding=1, dilation=1, groups=1, seed=0,
               name="layer"):
    """A layer's hyper-parameters and bf16-exact tensors (ReLU-sparse input and gradient), plus fp64 references.

    ``kind``: conv2d, conv1d (length ``size``), linear, tokens (a Linear on [n, size, c]), or matmul (``n``
    products [size, c] @ [c, m]).

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
