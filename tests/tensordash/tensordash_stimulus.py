"""Stimulus for the TensorDash checks: scheduled operand streams of every sparsity case, and their partners."""

import numpy as np
import torch

from dashraker.models.numerics import quantize
from dashraker.sim.stimulus import training_step_tensors

__all__ = ["CASES", "operands"]

RANDOM_SPARSITY = {f"random{pct}": pct / 100 for pct in (0, 25, 50, 75, 90, 99, 100)}
CASES = [*RANDOM_SPARSITY, "single_dense_lane", "alternating_steps", "zero_lane", "zero_row",
         "relu_activations", "relu_gradients"]


def _streams(matrix, passes, rows, lanes):
    """Rows of ``matrix`` cut into [passes, rows, steps, lanes] streams (lanes = consecutive columns)."""
    matrix = torch.as_tensor(np.ascontiguousarray(matrix))
    steps = matrix.shape[1] // lanes
    picked = matrix[torch.arange(passes * rows) % matrix.shape[0], :steps * lanes]
    return picked.reshape(passes, rows, steps, lanes)


def operands(case, passes, rows, cols, steps, lanes, fmt, seed):
    """Scheduled (row) and partner (column) operands of ``case``: fp32 tensors quantized to ``fmt``.

    The real-data cases take their steps from the tensors' widths (64 or 32 values).
    """
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    b = torch.randn(passes, cols, steps, lanes, generator=gen)
    a = torch.randn(passes, rows, steps, lanes, generator=gen)
    keep = None
    if case in RANDOM_SPARSITY:
        keep = rng.random(a.shape) >= RANDOM_SPARSITY[case]
    elif case == "single_dense_lane":
        keep = np.zeros(a.shape, bool)
        keep[..., lanes // 3] = True
    elif case == "alternating_steps":
        keep = np.broadcast_to((np.arange(steps) % 2 == 0)[:, None], a.shape)
    elif case == "zero_lane":
        keep = rng.random(a.shape) >= 0.1
        keep[..., 1] = False
    elif case == "zero_row":
        keep = rng.random(a.shape) >= 0.5
        keep[:, 0] = False
    elif case == "relu_activations":  # forward of a hidden layer: post-ReLU activations x weights
        real = training_step_tensors(seed)
        a = _streams(real["activations"], passes, rows, lanes)
        b = _streams(real["weights"], passes, cols, lanes)
    elif case == "relu_gradients":  # input gradient: ReLU-masked output gradient x transposed weights
        real = training_step_tensors(seed)
        a = _streams(real["output_grad"], passes, rows, lanes)
        b = _streams(real["weights"].T, passes, cols, lanes)
    else:
        raise ValueError(f"unknown stimulus case {case!r}; expected one of {CASES}")
    if keep is not None:
        a = a * torch.as_tensor(np.ascontiguousarray(keep))
    return quantize(a, fmt), quantize(b, fmt)
