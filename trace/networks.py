"""The networks traces are recorded from, in plain PyTorch: ResNet-18, VGG, MobileNet, MLP, Transformer encoder.

The CNNs take CIFAR-sized images (any size from 8x8 works); the MLP takes images or
vectors; the Transformer is a causal character-level language model whose projections are
all ``nn.Linear`` modules and whose attention products go through ``MatMul`` modules, so the
recorder sees them all (``nn.MultiheadAttention`` would hide them inside functional calls).
"""

import math

import torch
from torch import nn
from torch.nn import functional as F

from dashraker.trace.errors import RecordError
from dashraker.trace.layers import Attention

__all__ = ["MODELS", "build_model", "ResNet18", "VGGSmall", "MobileNetSmall", "MLP", "TransformerLM"]


def _conv_bn(in_channels, out_channels, kernel, stride=1, groups=1):
    """Conv2d (no bias, padding keeps the size at stride 1), BatchNorm and in-place ReLU."""
    return [
        nn.Conv2d(in_channels, out_channels, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    ]


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with an identity shortcut, or a strided 1x1 projection when the shape changes."""

    def __init__(self, in_channels, out_channels, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        out += x if self.downsample is None else self.downsample(x)
        return F.relu(out, inplace=True)


class ResNet18(nn.Module):
    """CIFAR-style ResNet-18: a 3x3 stem without max-pooling, four stages of two basic blocks, 64 to 512 channels."""

    def __init__(self, in_channels=3, num_classes=10, width=64):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        stages, channels = [], width
        for i, stride in enumerate((1, 2, 2, 2)):
            out_channels = width * 2**i
            blocks = BasicBlock(channels, out_channels, stride), BasicBlock(out_channels, out_channels, 1)
            stages.append(nn.Sequential(*blocks))
            channels = out_channels
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)), inplace=True)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class VGGSmall(nn.Module):
    """VGG-style: pairs of 3x3 conv/BN/ReLU between max-pools (32-32, 64-64, 128), then two Linear layers."""

    def __init__(self, in_channels=3, num_classes=10, config=(32, 32, "M", 64, 64, "M", 128, "M")):
        super().__init__()
        layers, channels = [], in_channels
        for item in config:
            if item == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += _conv_bn(channels, item, 3)
                channels = item
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.AdaptiveAvgPool2d(2),
            nn.Flatten(),
            nn.Linear(channels * 4, 128),
            nn.ReLU(inplace=True),
            nn.Linear(128, num_classes),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


class MobileNetSmall(nn.Module):
    """MobileNet-v1 style: a 3x3 stem, then depthwise 3x3 (groups = channels) + pointwise 1x1 blocks, some strided."""

    BLOCKS = ((32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1), (256, 512, 2))

    def __init__(self, in_channels=3, num_classes=10, width=1.0):
        super().__init__()
        scale = lambda c: max(8, int(c * width))  # noqa: E731
        layers = _conv_bn(in_channels, scale(32), 3)
        for cin, cout, stride in self.BLOCKS:
            layers += _conv_bn(scale(cin), scale(cin), 3, stride, groups=scale(cin))
            layers += _conv_bn(scale(cin), scale(cout), 1)
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(scale(self.BLOCKS[-1][1]), num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class MLP(nn.Module):
    """Flatten, then Linear/ReLU layers of the given widths and a Linear classifier."""

    def __init__(self, in_features, num_classes=10, hidden=(256, 128)):
        super().__init__()
        self.flatten = nn.Flatten()
        widths = [in_features, *hidden, num_classes]
        self.fcs = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))

    def forward(self, x):
        x = self.flatten(x)
        for fc in self.fcs[:-1]:
            x = F.relu(fc(x), inplace=True)
        return self.fcs[-1](x)


class EncoderBlock(nn.Module):
    """Pre-norm causal self-attention and ReLU feed-forward, every projection an ``nn.Linear`` and the two attention
    products (``attention.scores``: q k^T, ``attention.mix``: weights times v) ``MatMul`` layers, all recorded."""

    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.q, self.k, self.v = (nn.Linear(dim, dim) for _ in range(3))
        self.attention = Attention()
        self.out = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn1 = nn.Linear(dim, hidden)
        self.ffn2 = nn.Linear(hidden, dim)

    def forward(self, x):
        n, t, d = x.shape
        h = self.norm1(x)
        split = lambda y: y.view(n, t, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        attention = self.attention(split(self.q(h)), split(self.k(h)), split(self.v(h)), is_causal=True)
        x = x + self.out(attention.transpose(1, 2).reshape(n, t, d))
        return x + self.ffn2(F.relu(self.ffn1(self.norm2(x)), inplace=True))


class TransformerLM(nn.Module):
    """A small causal Transformer encoder: token and position embeddings, ``layers`` blocks, a Linear head."""

    def __init__(self, vocab, seq_len, dim=128, heads=4, layers=2, hidden=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.randn(seq_len, dim) / math.sqrt(dim))
        self.blocks = nn.Sequential(*(EncoderBlock(dim, heads, hidden) for _ in range(layers)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        return self.head(self.norm(self.blocks(x)))


def _image_model(cls):
    """Builder for a CNN: ``(sample_shape, num_classes) -> module``; needs [channels, height, width] images."""

    def build(shape, num_classes):
        if len(shape) != 3 or min(shape[1:]) < 8:
            raise RecordError(f"a CNN needs images [channels, height, width] of at least 8x8, not {list(shape)}")
        return cls(in_channels=shape[0], num_classes=num_classes)

    return build


def _mlp(shape, num_classes):
    return MLP(math.prod(shape), num_classes)


def _transformer(shape, num_classes):
    if len(shape) != 1:
        raise RecordError(f"the transformer needs token sequences, not samples of shape {list(shape)}")
    return TransformerLM(vocab=num_classes, seq_len=shape[0])


# Model name -> (builder(sample_shape, num_classes), kind of data it takes: "tokens" or "tensors").
MODELS = {
    "resnet18": (_image_model(ResNet18), "tensors"),
    "vgg": (_image_model(VGGSmall), "tensors"),
    "mobilenet": (_image_model(MobileNetSmall), "tensors"),
    "mlp": (_mlp, "tensors"),
    "transformer": (_transformer, "tokens"),
}


def build_model(name, sample_shape, num_classes, kind):
    """Build model ``name`` for samples of ``sample_shape`` and ``num_classes`` classes (vocabulary for tokens)."""
    if name not in MODELS:
        raise RecordError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    builder, wants = MODELS[name]
    if kind != wants:
        raise RecordError(f"model {name!r} takes {wants} data, the chosen data set gives {kind}")
    return builder(tuple(sample_shape), num_classes)
