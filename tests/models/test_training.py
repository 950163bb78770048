"""The training study's arithmetic: each tile's matmul forms its passes right, and the autograd function uses it."""

import pytest
import torch

from dashraker.designs import DESIGNS
from dashraker.models.training import GUARD_BITS, TILE_MODES, Matmul, baseline_matmul


def _integers(generator, *shape):
    """Small integers: exact in bf16, their products and sums exact in fp32, whatever the order or window."""
    return torch.randint(-8, 9, shape, generator=generator).float()


@pytest.mark.parametrize("mode", TILE_MODES)
def test_every_product_of_a_step_is_exact_on_integers(mode):
    """Forward, input and weight gradient (two passes per chunk of 12, 8-lane steps padded) equal the exact matmuls,
    so the passes take the right rows, columns and reduction elements."""
    generator = torch.Generator().manual_seed(TILE_MODES.index(mode))
    x, w, grad = _integers(generator, 24, 13), _integers(generator, 13, 5), _integers(generator, 24, 5)
    x.requires_grad_(), w.requires_grad_()
    y = Matmul.apply(x, w, mode, 12)
    y.backward(grad)
    x64, w64, g64 = (t.detach().double() for t in (x, w, grad))
    assert torch.equal(y.double(), x64 @ w64)
    assert torch.equal(x.grad.double(), g64 @ w64.T)
    assert torch.equal(w.grad.double(), x64.T @ g64)


def test_the_term_serial_mode_runs_fprakers_default_guard_bits():
    assert GUARD_BITS == DESIGNS["fpraker"].parameter("guard_bits").default


def test_the_step_sum_is_the_baselines_dot():
    """One step of 2^20, -2^20 and 2^-10: the fp32 tree adds 2^-10 to the cancelled pair; the fused window, 24 bits
    below 2^20's top, drops it."""
    x = torch.tensor([[2.0**20, -(2.0**20), 2.0**-10]])
    w = torch.ones(3, 1)
    assert baseline_matmul(x, w, dot="tree").item() == 2.0**-10
    assert baseline_matmul(x, w, dot="fused").item() == 0.0

