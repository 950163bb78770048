"""Golden model of the dense baseline PE and tile (SPEC section 2), in PyTorch float32 ops.

A PE multiplies its N lane pairs each cycle, sums the N products with a balanced
binary tree of fp32 adders and adds the tree sum to its fp32 accumulator. The tree
pairs neighbours level by level, ``(x0 + x1), (x2 + x3), ...``; an odd element at
the end of a level passes up unchanged (for N a power of two this is the usual
balanced tree with lane i at leaf i). With L interleaved accumulators (SPEC section
2, amended 2026-11) the tree sum of step t goes to partial t mod L and the L
partials are summed by the same tree at the end of the pass; L = 1 is the single
in-order accumulator.
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


def accumulate(step_sums, accumulators=1):
    """Accumulate per-step sums [..., steps] into L interleaved fp32 partials, then sum those with the tree.

    Partial p is the in-order fp32 sum, from +0.0, of the steps t with t mod L = p (+0.0
    if there is none); the result is ``adder_tree`` over the L partials.
    """
    step_sums = torch.as_tensor(step_sums, dtype=torch.float32)
    partials = torch.zeros(*step_sums.shape[:-1], accumulators)
    for start in range(0, step_sums.shape[-1], accumulators):
        sums = step_sums[..., start:start + accumulators]
        width = sums.shape[-1]
        partials = torch.cat([fp32_add(partials[..., :width], sums), partials[..., width:]], dim=-1)
    return adder_tree(partials)


def dense_pe(a, b, fmt="bf16", accumulators=1):
    """One PE: operands [steps, lanes] (fp32 tensors, quantized to ``fmt``) -> fp32 accumulator."""
    return dense_tile(torch.as_tensor(a)[None], torch.as_tensor(b)[None], fmt, accumulators)[0, 0]


def dense_tile(a, b, fmt="bf16", accumulators=1):
    """An R x C tile: row operands a [R, steps, lanes], column operands b [C, steps, lanes] -> [R, C].

    PE (r, c) accumulates, step by step, the tree sum of ``a[r, step] * b[c, step]`` into
    ``accumulators`` interleaved partials (``accumulate``). Inputs are quantized to the
    operand format first (RNE, FTZ), as the hardware sees them.
    """
    a = quantize(a, fmt)
    b = quantize(b, fmt)
    products = fp32_mul(a[:, None], b[None, :])  # [R, C, steps, lanes]
    return accumulate(adder_tree(products), accumulators)
