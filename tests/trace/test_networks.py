"""The networks: shapes, the layers the recorder sees, and real traces of each (the large ones marked slow)."""

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from dashraker.trace import open_trace, record
from dashraker.trace.layers import Attention, MatMul
from dashraker.trace.networks import build_model
from dashraker.trace.recorder import recordable_layers


# Parameter counts worked out by hand: the CIFAR ResNet-18's well-known 11,173,962; VGG: convs
# 27*32 + 288*32 + 288*64 + 576*64 + 576*128, BN 2*320, Linear 512*128+128 + 128*10+10; MobileNet:
# stem 864+64, blocks (9c + 2c + c*c' + 2c') over (32,64) ... (256,512) = 268,192, Linear 5,130;
# MLP 3072*256+256 + 256*128+128 + 128*10+10.
@pytest.mark.parametrize(
    "name, convs, depthwise, linears, parameters",
    [
        ("resnet18", 20, 0, 1, 11_173_962),
        ("vgg", 5, 0, 2, 206_698),
        ("mobilenet", 13, 6, 1, 274_250),
        ("mlp", 0, 0, 3, 820_874),
    ],
)
def test_image_networks(name, convs, depthwise, linears, parameters):
    net = build_model(name, (3, 32, 32), 10, "tensors")
    layers = [m for _, m in recordable_layers(net)]
    assert sum(isinstance(m, nn.Conv2d) for m in layers) == convs
    assert sum(isinstance(m, nn.Conv2d) and m.groups == m.in_channels > 1 for m in layers) == depthwise
    assert sum(isinstance(m, nn.Linear) for m in layers) == linears
    assert sum(p.numel() for p in net.parameters()) == parameters
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_transformer_projections_are_linear_and_attention_products_matmul():
    net = build_model("transformer", (16,), 256, "tokens")
    layers = recordable_layers(net)
    kinds = ("q", "k", "v", "attention.scores", "attention.mix", "out", "ffn1", "ffn2")
    assert [name for name, _ in layers] == [f"blocks.{b}.{p}" for b in (0, 1) for p in kinds] + ["head"]
    assert [name for name, m in layers if isinstance(m, MatMul)] == [
        f"blocks.{b}.attention.{p}" for b in (0, 1) for p in ("scores", "mix")]
    tokens = torch.randint(0, 256, (2, 16))
    logits = net(tokens)
    assert logits.shape == (2, 16, 256)
    # Causal: changing the last token leaves earlier positions unchanged.
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 256
    torch.testing.assert_close(net(changed)[:, :-1], logits[:, :-1])


@pytest.mark.parametrize("mask", ["causal", "bool", "float", None])
def test_attention_is_pytorchs_scaled_dot_product_attention(mask):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=gen) for _ in range(3))
    masks = {"causal": None, "bool": torch.rand(5, 5, generator=gen) > 0.3, "float": torch.randn(5, 5, generator=gen),
             None: None}
    masks["bool"][:, 0] = True  # every query keeps a key: no all-masked row (NaN in both)
    options = dict(attn_mask=masks[mask], is_causal=mask == "causal")
    torch.testing.assert_close(Attention()(q, k, v, **options), F.scaled_dot_product_attention(q, k, v, **options))
    torch.testing.assert_close(Attention()(q, k, v, scale=0.3), F.scaled_dot_product_attention(q, k, v, scale=0.3))


def test_transformer_trace(tmp_path):
    out = record(
        "transformer", "pystdlib", [1, 2], 2, tmp_path / "t", batch_size=4, seq_len=16, progress=False, threads=1
    )
    trace = open_trace(out)
    ffn2 = trace.layer("blocks.1.ffn2")
    assert ffn2.input_shape == (2, 16, 256) and ffn2.output_grad_shape == (2, 16, 128)
    assert np.mean(trace.load("blocks.1.ffn2", 2).input == 0) > 0.2  # ReLU zeros
    assert trace.manifest["optimizer"] == {"name": "AdamW", "lr": 1e-3}
    # Attention products of 2 samples x 4 heads: q k^T and weights @ v, the causal mask's zeros in the
    # weights (mix's input) and in the gradient of the scores, exactly above the diagonal.
    scores, mix = trace.layer("blocks.0.attention.scores"), trace.layer("blocks.0.attention.mix")
    assert (scores.type, scores.input_shape, scores.weight_shape, scores.output_grad_shape) == (
        "matmul", (8, 16, 32), (8, 32, 16), (8, 16, 16))
    assert (mix.input_shape, mix.weight_shape, mix.output_grad_shape) == ((8, 16, 16), (8, 16, 32), (8, 16, 32))
    above = np.triu(np.ones((16, 16), bool), 1)
    weights, score_grad = trace.load(mix.name, 1).input, trace.load(scores.name, 1).output_grad
    assert (weights[:, above] == 0).all() and (weights[:, ~above] > 0).all()
    assert (score_grad[:, above] == 0).all() and (score_grad[:, ~above] != 0).mean() > 0.9


def test_pruned_trace_carries_weight_sparsity(tmp_path):
    out = record("mlp", "digits", [1, 4], 2, tmp_path / "t", batch_size=8, prune=0.5, progress=False, threads=1)
    trace = open_trace(out)
    for layer in trace.layers:
        early, late = (float(np.mean(trace.load(layer.name, s).weight == 0)) for s in (1, 4))
        # Cubic schedule over the first half (2 steps): 0.5 * (1 - (1 - 1/2)^3) at step 1, then 0.5.
        assert early == pytest.approx(0.4375, abs=1 / trace.layer(layer.name).weight_shape[1])
        assert late == pytest.approx(0.5, abs=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["resnet18", "mobilenet"])
def test_cnn_traces_on_digits(tmp_path, model):
    out = record(model, "digits", [1, 3], 2, tmp_path / "t", batch_size=8, progress=False)
    trace = open_trace(out)
    first_hidden = trace.layers[1]
    assert first_hidden.type == "conv2d"
    for step in trace.steps:
        assert np.mean(trace.load(first_hidden.name, step).input == 0) > 0.2  # ReLU zeros
    losses = trace.manifest["losses"]
    assert len(losses) == 3 and all(np.isfinite(losses))
