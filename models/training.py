"""Training with a tile's arithmetic: matmuls whose forward and both backward products run on a golden tile.

``Matmul`` is an autograd function; in a tile's mode (``TILE_MODES``) every product of
a training step (forward ``x @ w``, input gradient ``g @ w.T``, weight gradient
``x.T @ g``) is computed by that design's golden model on bf16 (RNE) operands, in
passes of 8-lane steps as the mapper forms them: ``"term-serial"`` by FPRaker's
``golden.tile`` (the left operand on the term-serial side), ``"tree"`` and ``"fused"``
by the dense baseline's ``dense_tile`` with that step sum (``dot``) and the
fixed-point accumulator, the designs' default. Convolutions are unfold -> matmul, so
they get the same arithmetic; everything else (bias, ReLU, pooling, the loss, SGD)
stays fp32. Modes ``"fp32"`` and ``"bf16"`` (operands rounded to bf16, fp32 matmul)
are the references trained with the same data, seed and steps.
"""

import functools

import torch
from torch.nn import functional as F

from dashraker.models.baseline import accumulate, dense_tile
from dashraker.models.fpraker.golden import tile
from dashraker.models.numerics import quantize, to_bf16_bits

__all__ = ["MODES", "REFERENCE_MODES", "TILE_MODES", "fpraker_matmul", "baseline_matmul", "Matmul", "DigitsNet",
           "digits_data", "train", "capture_step"]

REFERENCE_MODES = ("fp32", "bf16")
TILE_MODES = ("term-serial", "tree", "fused")  # FPRaker's tile, then the baseline's with each step sum (``dot``)
MODES = REFERENCE_MODES + TILE_MODES
_LANES = 8
# The term-serial mode's guard bits: FPRaker's registry default (tests/models/test_training.py checks them alike; the
# registry sits above the models, which do not import it).
GUARD_BITS = 3


def _passes(x, w, chunk=None):
    """``x [M, K]``, ``w [K, N]`` as a tile's passes: a [passes, M, steps, lanes], b [passes, N, steps, lanes].

    Each pass reduces ``chunk`` consecutive elements (default: all K), in steps of ``_LANES``; the last
    step of a pass is padded with zeros.
    """
    (m, k), n = x.shape, w.shape[1]
    chunk = chunk or k
    if k % chunk:
        raise ValueError(f"reduction length {k} is not a multiple of the chunk {chunk}")
    passes, steps = k // chunk, -(-chunk // _LANES)
    pad = steps * _LANES - chunk
    a = F.pad(x.reshape(m, passes, chunk), (0, pad)).reshape(m, passes, steps, _LANES)
    b = F.pad(w.T.reshape(n, passes, chunk), (0, pad)).reshape(n, passes, steps, _LANES)
    return a.transpose(0, 1), b.transpose(0, 1)


def fpraker_matmul(x, w, chunk, guard_bits):
    """``x [M, K] @ w [K, N]`` with every dot product on the golden FPRaker PE (x term-serial).

    With ``chunk``, the reduction is split into passes of ``chunk`` consecutive
    elements (for a weight gradient: one pass per sample, SPEC section 5) whose
    results are then added one by one in fp32.
    """
    a, b = _passes(to_bf16_bits(x), to_bf16_bits(w), chunk)
    partial = tile(a, b, guard_bits, 1).outputs  # an all-zero step costs a cycle; it changes no output
    return accumulate(partial.permute(1, 2, 0), 1)


def baseline_matmul(x, w, chunk=None, *, dot):
    """``x [M, K] @ w [K, N]`` with every dot product on the golden baseline PE with step sum ``dot``.

    ``dense_tile`` on bf16 operands, the fixed-point accumulator (``accumulators`` 0) rounding once per
    pass; ``chunk`` splits the reduction into passes added one by one in fp32, as ``fpraker_matmul``.
    """
    a, b = _passes(quantize(x, "bf16"), quantize(w, "bf16"), chunk)
    partial = torch.stack([dense_tile(a[p], b[p], "bf16", accumulators=0, dot=dot) for p in range(len(a))], -1)
    return accumulate(partial, 1)


_TILE_MATMULS = {
    "term-serial": functools.partial(fpraker_matmul, guard_bits=GUARD_BITS),
    "tree": functools.partial(baseline_matmul, dot="tree"),
    "fused": functools.partial(baseline_matmul, dot="fused"),
}


def _product(x, w, mode, chunk=None):
    if mode == "fp32":
        return x @ w
    if mode == "bf16":
        return quantize(x, "bf16") @ quantize(w, "bf16")
    return _TILE_MATMULS[mode](x, w, chunk)


class Matmul(torch.autograd.Function):
    """``x @ w`` whose forward and two backward products use the arithmetic of ``mode``.

    ``positions``: rows of ``x`` per sample (a convolution's output positions), the
    reduction length of one pass of the weight gradient.
    """

    @staticmethod
    def forward(ctx, x, w, mode, positions=None):
        ctx.save_for_backward(x, w)
        ctx.mode, ctx.positions = mode, positions
        return _product(x.detach(), w.detach(), mode)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        grad_x = _product(grad, w.T, ctx.mode) if ctx.needs_input_grad[0] else None
        grad_w = _product(x.T, grad, ctx.mode, ctx.positions)
        return grad_x, grad_w, None, None


class DigitsNet(torch.nn.Module):
    """Small CNN for 8x8 digits: conv 3x3 (1->8), ReLU, 2x2 max-pool, linear (128->10)."""

    def __init__(self, mode):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.mode = mode
        self.conv1 = torch.nn.Parameter(torch.randn(9, 8) * (2 / 9) ** 0.5)
        self.fc = torch.nn.Parameter(torch.randn(128, 10) * (1 / 128) ** 0.5)
        self.biases = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(c)) for c in (8, 10)])

    def conv(self, x, weight, bias):
        """3x3 convolution, padding 1, as unfold -> matmul (the image input needs no gradient)."""
        batch, _, h, wd = x.shape
        cols = F.unfold(x, 3, padding=1).transpose(1, 2).reshape(batch * h * wd, -1)
        out = Matmul.apply(cols, weight, self.mode, h * wd) + bias
        return out.reshape(batch, h, wd, -1).permute(0, 3, 1, 2)

    def forward(self, x, record=None):
        flat = F.max_pool2d(F.relu(self.conv(x, self.conv1, self.biases[0])), 2).flatten(1)
        if record is not None:
            flat.retain_grad()
            record["activations"] = flat
        return Matmul.apply(flat, self.fc, self.mode) + self.biases[1]


def digits_data(seed=0, test_fraction=0.25):
    """sklearn's bundled digits (no download), scaled to [0, 1], split into train and test."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32)[:, None] / 16.0
    y = torch.tensor(digits.target)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    split = int(len(y) * (1 - test_fraction))
    return (x[order[:split]], y[order[:split]]), (x[order[split:]], y[order[split:]])


def train(mode, steps, batch=32, lr=0.05, seed=0, eval_every=10, progress=None):
    """Train ``DigitsNet`` with SGD; returns {"step", "loss", "eval_step", "accuracy"} lists.

    Same seed, same batches and same initial weights in every mode; test accuracy is
    measured with fp32 arithmetic on the held-out quarter of the data.
    """
    (x, y), (x_test, y_test) = digits_data(seed)
    torch.manual_seed(seed)
    model = DigitsNet(mode)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    order = torch.randint(0, len(y), (steps, batch), generator=torch.Generator().manual_seed(seed + 1))
    history = {"step": [], "loss": [], "eval_step": [], "accuracy": []}
    for step in range(steps):
        loss = F.cross_entropy(model(x[order[step]]), y[order[step]])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history["step"].append(step + 1)
        history["loss"].append(loss.item())
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            model.mode = "fp32"
            with torch.no_grad():
                accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
            model.mode = mode
            history["eval_step"].append(step + 1)
            history["accuracy"].append(accuracy)
        if progress is not None:
            progress(loss.item())
    return history


def capture_step(seed=0, batch=32, steps=20):
    """Real fp32 tensors of the training step after ``steps`` fp32 steps, per training matmul.

    Returns ``{name: (left [M, K], right [K, N])}`` for the classifier's forward
    (activations @ weights), input gradient (output gradients @ weights.T) and
    weight gradient (activations.T @ output gradients), and the convolution's
    forward (image patches @ filters).
    """
    (x, y), _ = digits_data(seed)
    torch.manual_seed(seed)
    model = DigitsNet("fp32")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps + 1):
        record = {}
        batch_x, batch_y = x[step * batch : (step + 1) * batch], y[step * batch : (step + 1) * batch]
        logits = model(batch_x, record)
        logits.retain_grad()
        loss = F.cross_entropy(logits, batch_y)
        optimizer.zero_grad()
        loss.backward()
        if step < steps:
            optimizer.step()
    act, weights, grads = record["activations"].detach(), model.fc.detach().clone(), logits.grad.detach()
    patches = F.unfold(batch_x, 3, padding=1).transpose(1, 2).reshape(-1, 9)
    return {
        "forward": (act, weights),
        "input_grad": (grads, weights.T.contiguous()),
        "weight_grad": (act.T.contiguous(), grads),
        "conv_forward": (patches, model.conv1.detach().clone()),
    }
