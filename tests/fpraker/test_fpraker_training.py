"""FPRaker error analysis and the training-numerics autograd function."""

import pytest
import torch

from dashraker.designs import DESIGNS
from dashraker.models.fpraker.errors import matmul_report
from dashraker.models.training import DigitsNet, Matmul, fpraker_matmul, train
from dashraker.models.numerics import quantize


def test_error_against_fp64_is_close_to_the_fp32_tree():
    generator = torch.Generator().manual_seed(3)
    report = matmul_report(torch.randn(16, 96, generator=generator), torch.randn(96, 8, generator=generator),
                           DESIGNS["fpraker"].params(rows=4, cols=4))
    assert report["fpraker_error_max"] < 2**-22
    assert report["fpraker_error_median"] <= 2 * report["baseline_error_median"]
    assert 1 <= report["pe_cycles_per_step"] <= 5 <= report["mean_terms_per_value"] + 2


def test_matmul_and_chunked_weight_gradient_match_fp64():
    generator = torch.Generator().manual_seed(4)
    x, w = torch.randn(12, 40, generator=generator), torch.randn(40, 6, generator=generator)
    exact = quantize(x, "bf16").double() @ quantize(w, "bf16").double()
    for chunk in (None, 8, 20):
        y = fpraker_matmul(x, w, chunk, DESIGNS["fpraker"].params()["guard_bits"])
        assert torch.allclose(y.double(), exact, rtol=1e-5, atol=1e-5), chunk


def test_autograd_products_use_the_mode():
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(6, 16, generator=generator, requires_grad=True)
    w = torch.randn(16, 4, generator=generator, requires_grad=True)
    grad = torch.randn(6, 4, generator=generator)
    Matmul.apply(x, w, "term-serial").backward(grad)
    gx, gw = x.grad.clone(), w.grad.clone()
    qx, qw, qg = (quantize(t.detach(), "bf16").double() for t in (x, w, grad))
    assert torch.allclose(gx.double(), qg @ qw.T, rtol=1e-5, atol=1e-6)
    assert torch.allclose(gw.double(), qx.T @ qg, rtol=1e-5, atol=1e-6)


def test_training_runs_and_learns_in_every_mode():
    for mode in ("fp32", "term-serial"):
        history = train(mode, steps=4, batch=4, eval_every=2)
        assert len(history["loss"]) == 4 and history["eval_step"] == [2, 4]
        assert all(0 <= a <= 1 for a in history["accuracy"])
    with pytest.raises(ValueError, match="fp16"):
        DigitsNet("fp16")
