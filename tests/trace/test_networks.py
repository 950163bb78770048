"""The networks: shapes, the layers the recorder sees, and real traces of each (the large ones marked slow)."""

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from dashraker.trace import open_trace, record
from dashraker.trace.layers import Attention, MatMul
from dashraker.trace.networks import build_model
from dashraker.trace.errors import RecordError
from dashraker.trace.recorder import recordable_layers, unrecorded_layers


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


# The papers' networks at their published shapes, built on the meta device (no memory): the parameter counts
# torchvision prints for resnet50 (25,557,032) and mobilenet_v2 (3,504,872), GPT-2 small's 124,439,808 (vocabulary
# 50257, 1024 positions, head tied to the embedding) and Hugging Face's BertForMaskedLM bert-base-uncased
# (109,514,298) less its token-type embeddings (2 x 768), which a single-segment encoder has no use for.
@pytest.mark.parametrize(
    "name, shape, classes, kind, options, parameters, convs, depthwise, linears",
    [
        ("resnet50", (3, 224, 224), 1000, "tensors", {}, 25_557_032, 53, 0, 1),
        ("mobilenetv2", (3, 224, 224), 1000, "tensors", {}, 3_504_872, 52, 17, 1),
        ("gpt", (1024,), 50257, "tokens", dict(layers=12, dim=768, heads=12), 124_439_808, 0, 0, 12 * 6 + 1),
        ("bert", (512,), 30522, "masked", dict(layers=12, dim=768, heads=12), 109_514_298 - 2 * 768, 0, 0, 12 * 6 + 2),
    ],
)
def test_papers_networks_at_published_shape(name, shape, classes, kind, options, parameters, convs, depthwise,
                                            linears):
    with torch.device("meta"):
        net = build_model(name, shape, classes, kind, options)
    layers = [m for _, m in recordable_layers(net)]
    assert sum(p.numel() for p in net.parameters()) == parameters
    assert sum(isinstance(m, nn.Conv2d) for m in layers) == convs
    assert sum(isinstance(m, nn.Conv2d) and m.groups == m.in_channels > 1 for m in layers) == depthwise
    assert sum(isinstance(m, nn.Linear) for m in layers) == linears
    assert unrecorded_layers(net) == []  # every module with parameters is recorded or a normalisation/lookup


@pytest.mark.parametrize("name", ["resnet50", "mobilenetv2"])
@pytest.mark.parametrize("size", [(32, 32), (40, 56)])
def test_imagenet_cnns_take_any_resolution_from_32(name, size):
    net = build_model(name, (3, *size), 7, "tensors")
    assert net(torch.randn(2, 3, *size)).shape == (2, 7)
    with pytest.raises(RecordError, match=r"needs images \[channels, height, width\] of at least 32x32, not \[3, 31"):
        build_model(name, (3, 31, 64), 7, "tensors")


@pytest.mark.parametrize("name, kind, causal", [("gpt", "tokens", True), ("bert", "masked", False)])
def test_gpt_is_causal_and_bert_bidirectional(name, kind, causal):
    torch.manual_seed(0)
    net = build_model(name, (12,), 40, kind, dict(layers=1, dim=16, heads=2)).eval()
    names = [name for name, _ in recordable_layers(net)]
    block = [f"blocks.0.{p}" for p in ("q", "k", "v", "attention.scores", "attention.mix", "out", "ffn1", "ffn2")]
    assert names == block + (["transform"] if name == "bert" else []) + ["head"]
    assert net.head.weight is net.embed.weight  # tied, as GPT-2's and BERT's
    tokens = torch.randint(0, 40, (2, 12))
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 40
    logits, other = net(tokens), net(changed)
    assert logits.shape == (2, 12, 40)
    assert torch.equal(logits[:, :-1], other[:, :-1]) == causal


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("gpt", dict(dim=30, heads=4), "the width 30 must be a multiple of the 4 heads"),
        ("gpt", dict(depth=3), "model GPTDecoder takes no argument 'depth'; it takes dim, heads, layers, hidden"),
        ("resnet50", dict(vocab=3), "model ResNet50 takes no argument 'vocab'; it takes width, blocks"),
    ],
)
def test_network_arguments_are_checked(name, options, message):
    kind = "tokens" if name == "gpt" else "tensors"
    with pytest.raises(RecordError, match=message):
        build_model(name, (3, 32, 32) if kind == "tensors" else (8,), 10, kind, options)


def test_bert_trace_on_masked_text(tmp_path):
    out = record("bert", "pystdlib-mlm", [1, 2], 1, tmp_path / "t", batch_size=2, seq_len=16, progress=False,
                 threads=1, model_args=dict(layers=1, dim=32, heads=2))
    trace = open_trace(out)
    assert trace.manifest["optimizer"]["name"] == "AdamW" and trace.manifest["model_args"] == {"layers": 1, "dim": 32,
                                                                                            "heads": 2}
    assert trace.layer("head").out_channels == 257  # 256 bytes and the mask token
    assert trace.layer("blocks.0.ffn2").input_shape == (1, 16, 128)
    # Bidirectional: no structural zeros in the attention weights (mix's input), unlike the causal decoder.
    assert np.mean(trace.load("blocks.0.attention.mix", 2).input == 0) < 0.01
