"""Stimulus for hardware tests: real tensors from a training step, passes cut from them, their operand bits."""

import functools

import numpy as np

__all__ = ["operand_bits", "training_step_tensors", "passes_from_matrices", "training_step_passes"]


def operand_bits(values, fmt):
    """Bit patterns (int64 NumPy) of fp32 values in operand format ``fmt``, rounded to nearest as ``quantize``."""
    import torch

    from dashraker.formats import BF16, float_format
    from dashraker.models.numerics import fp32_bits, quantize, to_bf16_bits

    values = torch.as_tensor(np.asarray(values, dtype=np.float32))
    if float_format(fmt) == BF16:
        return to_bf16_bits(values).numpy()
    return fp32_bits(quantize(values, fmt)).numpy()


@functools.lru_cache(maxsize=4)
def training_step_tensors(seed=0, steps=3):
    """Tensors of a real training step: a small MLP learning scikit-learn's bundled digits.

    After ``steps`` SGD steps, returns a dict of fp32 NumPy arrays of the hidden layer
    (``fc2``): ``activations`` (post-ReLU inputs, [batch, 64]), ``weights`` ([32, 64]) and
    ``output_grad`` ([batch, 32]), plus ``input_grad`` ([batch, 64], ReLU-masked).
    """
    import torch
    from sklearn.datasets import load_digits

    digits = load_digits()
    generator = torch.Generator().manual_seed(seed)
    images = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    labels = torch.tensor(digits.target)
    torch.manual_seed(seed)
    fc1, fc2, fc3 = torch.nn.Linear(64, 64), torch.nn.Linear(64, 32), torch.nn.Linear(32, 10)
    params = [p for layer in (fc1, fc2, fc3) for p in layer.parameters()]
    optimizer = torch.optim.SGD(params, lr=0.1)
    for _ in range(steps):
        batch = torch.randint(0, len(images), (32,), generator=generator)
        hidden = torch.relu(fc1(images[batch]))
        hidden.retain_grad()
        out = fc2(hidden)
        out.retain_grad()
        loss = torch.nn.functional.cross_entropy(fc3(torch.relu(out)), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return {
        "activations": hidden.detach().numpy().copy(),
        "weights": fc2.weight.detach().numpy().copy(),
        "output_grad": out.grad.numpy().copy(),
        "input_grad": hidden.grad.numpy().copy(),
    }


def passes_from_matrices(row_vectors, col_vectors, rows, cols, lanes):
    """Forward-style passes of a Linear layer: dot products of row vectors with column vectors.

    ``row_vectors`` [M, K] and ``col_vectors`` [P, K] are cut into tiles of ``rows`` x
    ``cols`` vectors, each vector into steps of ``lanes`` values (zero padded); returns a
    list of (a [rows, steps, lanes], b [cols, steps, lanes]) fp32 arrays.
    """
    row_vectors = np.asarray(row_vectors, dtype=np.float32)
    col_vectors = np.asarray(col_vectors, dtype=np.float32)
    depth = row_vectors.shape[1]
    steps = -(-depth // lanes)

    def tiles(vectors, count):
        padded = np.zeros((-(-len(vectors) // count) * count, steps * lanes), np.float32)
        padded[: len(vectors), :depth] = vectors
        return padded.reshape(-1, count, steps, lanes)

    return [(a, b) for a in tiles(row_vectors, rows) for b in tiles(col_vectors, cols)]


def training_step_passes(rows, cols, lanes, forward_tiles=1):
    """Passes of the two products of a real training step (``training_step_tensors``).

    The forward product (activations x weights, its first ``forward_tiles`` tiles of
    rows and of columns), then the weight gradient (output gradients x activations,
    dot products over the batch), cut by ``passes_from_matrices``.
    """
    tensors = training_step_tensors()
    forward = passes_from_matrices(tensors["activations"][: forward_tiles * rows],
                                   tensors["weights"][: forward_tiles * cols], rows, cols, lanes)
    weight_grad = passes_from_matrices(tensors["output_grad"].T[:rows], tensors["activations"].T[:cols],
                                       rows, cols, lanes)
    return forward + weight_grad
