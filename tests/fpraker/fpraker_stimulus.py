"""Stimulus for the FPRaker checks: random bf16 blocks with every corner case, and real training tensors."""

import numpy as np
import torch

from dashraker.models.numerics import to_bf16_bits

__all__ = ["FIVE_TERM_SIGNIFICANDS", "random_bits", "real_tensors", "real_bits"]

# 8-bit significands (hidden one set) whose NAF has the maximum of 5 terms
FIVE_TERM_SIGNIFICANDS = [m for m in range(128, 256) if bin((3 * m ^ m) >> 1).count("1") == 5]


def random_bits(rng, shape, spread=8, corner=0.2):
    """bf16 patterns: normal values with exponents within +-``spread`` of 127, and a ``corner`` share of
    zeros, signed zeros, subnormals, Inf, NaN, 5-term significands and far-away exponents."""
    sign = rng.integers(0, 2, shape)
    exponent = np.clip(127 + rng.integers(-spread, spread + 1, shape), 1, 254)
    fraction = rng.integers(0, 128, shape)
    bits = (sign << 15) | (exponent << 7) | fraction
    kind = rng.random(shape)
    cases = [
        lambda: sign << 15,  # signed zeros
        lambda: (sign << 15) | rng.integers(1, 128, shape),  # subnormals
        lambda: (sign << 15) | 0x7F80,  # Inf
        lambda: 0x7F80 | rng.integers(1, 128, shape) | (sign << 15),  # NaN
        lambda: (sign << 15) | (exponent << 7) | (rng.choice(FIVE_TERM_SIGNIFICANDS, shape) - 128),
        lambda: (sign << 15) | (rng.integers(1, 40, shape) << 7) | fraction,  # tiny: far below
        lambda: (sign << 15) | (rng.integers(200, 255, shape) << 7) | fraction,  # huge
    ]
    weights = [0.3, 0.1, 0.04, 0.03, 0.33, 0.1, 0.1]
    lo = 0.0
    for case, weight in zip(cases, weights):
        hi = lo + corner * weight
        bits = np.where((kind >= lo) & (kind < hi), case(), bits)
        lo = hi
    return bits.astype(np.int64)


def real_tensors(seed=0):
    """Activations, weights and gradients (fp32) of one training step of a small CNN on sklearn's digits."""
    from sklearn.datasets import load_digits

    torch.manual_seed(seed)
    digits = load_digits()
    x = torch.tensor(digits.images[:64], dtype=torch.float32)[:, None] / 16.0
    y = torch.tensor(digits.target[:64])
    conv = torch.nn.Conv2d(1, 16, 3, padding=1)
    fc = torch.nn.Linear(16 * 4 * 4, 10)
    act = torch.relu(conv(x))
    act.retain_grad()
    pooled = torch.nn.functional.max_pool2d(act, 2)
    flat = pooled.flatten(1)
    flat.retain_grad()
    out = fc(flat)
    out.retain_grad()
    torch.nn.functional.cross_entropy(out, y).backward()
    return {
        "activations": flat.detach(),
        "weights": fc.weight.detach(),
        "gradients": out.grad.detach(),
        "conv_gradients": act.grad.detach(),
    }


def real_bits(rng, shape, seed=0):
    """bf16 patterns of random slices of the real tensors (each call draws from all of them)."""
    values = torch.cat([t.flatten() for t in real_tensors(seed).values()])
    picks = torch.as_tensor(rng.integers(0, values.numel(), int(np.prod(shape))))
    return to_bf16_bits(values[picks]).reshape(shape).numpy()
