"""Golden model of the dense baseline PE and tile (SPEC section 2), in PyTorch float32 ops.

A PE multiplies its N lane pairs each cycle, sums the N products with a balanced
binary tree of fp32 adders and adds the tree sum to its fp32 accumulator. The tree
pairs neighbours level by level, ``(x0 + x1), (x2 + x3), ...``; an odd element at
the end of a level passes up unchanged (for N a power of two this is the usual
balanced tree with lane i at leaf i).
"""

import torch

from dashraker.models.numerics import flush_subnormals, fp32_add, fp32_mul, quantize

__all__ = ["adder_tree", "accumulate", "dense_pe", "dense_tile"]


def adder_tree(products):
    """Sum the last axis with the fp32 adder tree; returns the tree sums (one axis fewer)."""
    level = torch.as_tensor(products, dtype=torch.float32)
    while level.shape[-1] > 1:
        paired = level.shape[-1] // 2 * 2
        sums = fp32_add(level[..., 0:paired:2], level[..., 1:paired:2])
        level = torch.cat([sums, level[..., paired:]], dim=-1)
    return flush_subnormals(level[..., 0])


def accumulate(step_sums, initial=None):
    """Add per-step sums [..., steps] one by one into fp32 accumulators (starting at +0.0)."""
    step_sums = torch.as_tensor(step_sums, dtype=torch.float32)
    acc = torch.zeros(step_sums.shape[:-1]) if initial is None else initial.clone()
    for step in range(step_sums.shape[-1]):
        acc = fp32_add(acc, step_sums[..., step])
    return acc


def dense_pe(a, b, fmt="bf16"):
    """One PE: operands [steps, lanes] (fp32 tensors, quantized to ``fmt``) -> fp32 accumulator."""
    return dense_tile(torch.as_tensor(a)[None], torch.as_tensor(b)[None], fmt)[0, 0]


def dense_tile(a, b, fmt="bf16"):
    """An R x C tile: row operands a [R, steps, lanes], column operands b [C, steps, lanes] -> [R, C].

    PE (r, c) accumulates, step by step, the tree sum of ``a[r, step] * b[c, step]``.
    Inputs are quantized to the operand format first (RNE, FTZ), as the hardware sees them.
    """
    a = quantize(a, fmt)
    b = quantize(b, fmt)
    products = fp32_mul(a[:, None], b[None, :])  # [R, C, steps, lanes]
    return accumulate(adder_tree(products))
