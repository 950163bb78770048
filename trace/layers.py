"""Modules that make products of two activations visible to the recorder: ``MatMul`` and math-form ``Attention``.

A ``torch.matmul`` call inside a module's ``forward`` leaves no trace a hook can see, so a
network whose attention products should be recorded routes them through these modules (the
bundled transformer does). They compute exactly what the functional forms compute.
"""

import math

import torch
from torch import nn

__all__ = ["MatMul", "Attention"]


class MatMul(nn.Module):
    """``a @ b`` for batched activations ``a`` [..., M, K] and ``b`` [..., K, N], recorded as a ``matmul`` layer.

    The recorder saves ``a`` as the layer's input, ``b`` as its weight and the gradient of the
    product as its output gradient, each as [batch, rows, columns] with the leading axes
    flattened (the first is the sample axis, cut to the recorded samples).
    """

    def forward(self, a, b):
        return torch.matmul(a, b)


class Attention(nn.Module):
    """``F.scaled_dot_product_attention`` in its math form, its two products ``scores`` and ``mix`` recorded.

    ``forward(q, k, v, attn_mask=None, is_causal=False, scale=None)`` takes [..., L, E] queries
    and [..., S, E] keys and values as the functional form does (a boolean ``attn_mask`` keeps
    True positions, a float one is added), and returns softmax(q k^T * scale + mask) v. The
    causal mask's positions are exact zeros of the attention weights, which ``mix`` records.
    """

    def __init__(self):
        super().__init__()
        self.scores = MatMul()
        self.mix = MatMul()

    def forward(self, q, k, v, attn_mask=None, is_causal=False, scale=None):
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        scores = self.scores(q, k.transpose(-2, -1)) * scale
        if is_causal:
            length, keys = scores.shape[-2:]
            attn_mask = torch.ones(length, keys, dtype=torch.bool, device=q.device).tril()
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        elif attn_mask is not None:
            scores = scores + attn_mask
        return self.mix(torch.softmax(scores, dim=-1), v)
