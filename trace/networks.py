"""The networks traces are recorded from, in plain PyTorch: the small CIFAR-sized ones (ResNet-18, VGG, MobileNet,
MLP, Transformer) and those of the papers' scale (ResNet-50, MobileNetV2, a GPT-style decoder, a BERT-style encoder).

The small CNNs take any image size from 8x8, ResNet-50 and MobileNetV2 (ImageNet-shaped, 224x224 the
papers') any from 32x32; the MLP takes images or vectors. The transformers' projections are all
``nn.Linear`` modules and their attention products go through ``MatMul`` modules, so the recorder sees
them all (``nn.MultiheadAttention`` would hide them inside functional calls). Every network takes keyword
arguments (``--model-arg``): widths, depths, heads, hidden sizes.
"""

import inspect
import math

import torch
from torch import nn
from torch.nn import functional as F

from dashraker.trace.errors import RecordError
from dashraker.trace.layers import Attention

__all__ = ["MODELS", "build_model", "ResNet18", "VGGSmall", "MobileNetSmall", "MLP", "TransformerLM", "ResNet50",
           "MobileNetV2", "GPTDecoder", "BERTEncoder"]


def _conv_bn(in_channels, out_channels, kernel, stride=1, groups=1, activation=nn.ReLU):
    """Conv2d (no bias, padding keeps the size at stride 1), BatchNorm and an in-place ``activation`` (ReLU, or
    MobileNetV2's ReLU6)."""
    return [
        nn.Conv2d(in_channels, out_channels, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_channels),
        activation(inplace=True),
    ]


def _projection(in_channels, out_channels, stride):
    """A residual block's shortcut: None (the identity), or a strided 1x1 projection and BatchNorm where the shape
    changes."""
    if stride == 1 and in_channels == out_channels:
        return None
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride, bias=False), nn.BatchNorm2d(out_channels))


def _add_shortcut(out, x, downsample):
    """ReLU of a block's output plus its shortcut of the block input ``x`` (``_projection``)."""
    out += x if downsample is None else downsample(x)
    return F.relu(out, inplace=True)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with an identity shortcut, or a strided 1x1 projection when the shape changes."""

    def __init__(self, in_channels, out_channels, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = _projection(in_channels, out_channels, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        return _add_shortcut(out, x, self.downsample)


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
    """Self-attention and a feed-forward, every projection an ``nn.Linear`` and the two attention products
    (``attention.scores``: q k^T, ``attention.mix``: weights times v) ``MatMul`` layers, all recorded.

    ``causal``: each position attends to itself and earlier ones only (a decoder); ``prenorm``: LayerNorm
    before each sub-layer (GPT-2) rather than after its residual sum (BERT); ``activation``: the
    feed-forward's nonlinearity, "relu" or "gelu".
    """

    def __init__(self, dim, heads, hidden, activation="relu", causal=True, prenorm=True):
        super().__init__()
        if dim % heads:
            raise RecordError(f"the width {dim} must be a multiple of the {heads} heads")
        self.heads, self.causal, self.prenorm = heads, causal, prenorm
        self.activation = {"relu": F.relu, "gelu": F.gelu}[activation]
        self.norm1 = nn.LayerNorm(dim)
        self.q, self.k, self.v = (nn.Linear(dim, dim) for _ in range(3))
        self.attention = Attention()
        self.out = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn1 = nn.Linear(dim, hidden)
        self.ffn2 = nn.Linear(hidden, dim)

    def _attend(self, h):
        n, t, d = h.shape
        split = lambda y: y.view(n, t, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        attention = self.attention(split(self.q(h)), split(self.k(h)), split(self.v(h)), is_causal=self.causal)
        return self.out(attention.transpose(1, 2).reshape(n, t, d))

    def forward(self, x):
        if not self.prenorm:
            x = self.norm1(x + self._attend(x))
            return self.norm2(x + self.ffn2(self.activation(self.ffn1(x))))
        x = x + self._attend(self.norm1(x))
        return x + self.ffn2(self.activation(self.ffn1(self.norm2(x))))


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


class Bottleneck(nn.Module):
    """ResNet-50's block: 1x1 reduce, 3x3 (strided here, as torchvision's v1.5), 1x1 expand by 4, and a shortcut
    (a strided 1x1 projection where the shape changes)."""

    def __init__(self, in_channels, width, stride):
        super().__init__()
        out_channels = 4 * width
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.downsample = _projection(in_channels, out_channels, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = F.relu(self.bn2(self.conv2(out)), inplace=True)
        out = self.bn3(self.conv3(out))
        return _add_shortcut(out, x, self.downsample)


class ResNet50(nn.Module):
    """ImageNet ResNet-50 (He et al. 2016, torchvision's layout): a 7x7 stride-2 stem and 3x3 stride-2 max-pool, four
    stages of 3, 4, 6 and 3 bottleneck blocks of width 64 to 512 (256 to 2048 channels), average pool, Linear."""

    MIN_SIZE = 32  # it downsamples 32 times: a smaller image leaves the last stages nothing but padding

    def __init__(self, in_channels=3, num_classes=1000, width=64, blocks=(3, 4, 6, 3)):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, channels = [], width
        for i, count in enumerate(blocks):
            stage_width = width * 2**i
            stage = [Bottleneck(channels if b == 0 else 4 * stage_width, stage_width, 2 if b == 0 and i else 1)
                     for b in range(count)]
            stages.append(nn.Sequential(*stage))
            channels = 4 * stage_width
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x)), inplace=True))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion by ``expand`` (none when 1), depthwise 3x3, linear 1x1 projection, and an
    identity shortcut where stride and channels allow it."""

    def __init__(self, in_channels, out_channels, stride, expand):
        super().__init__()
        hidden = in_channels * expand
        layers = _conv_bn(in_channels, hidden, 1, activation=nn.ReLU6) if expand != 1 else []
        layers += _conv_bn(hidden, hidden, 3, stride, groups=hidden, activation=nn.ReLU6)
        layers += [nn.Conv2d(hidden, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels)]
        self.conv = nn.Sequential(*layers)
        self.shortcut = stride == 1 and in_channels == out_channels

    def forward(self, x):
        return x + self.conv(x) if self.shortcut else self.conv(x)


class MobileNetV2(nn.Module):
    """ImageNet MobileNetV2 (Sandler et al. 2018, torchvision's layout): a 3x3 stride-2 stem of 32 channels, 17
    inverted residual blocks (expansion t, channels c, repeats n, first stride s), a 1x1 conv to 1280, average
    pool, dropout 0.2 and a Linear classifier."""

    MIN_SIZE = 32  # it downsamples 32 times
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))  # fmt: skip

    def __init__(self, in_channels=3, num_classes=1000, last_channels=1280, dropout=0.2):
        super().__init__()
        layers, channels = _conv_bn(in_channels, 32, 3, 2, activation=nn.ReLU6), 32
        for expand, out_channels, repeats, stride in self.SETTINGS:
            for i in range(repeats):
                layers.append(InvertedResidual(channels, out_channels, stride if i == 0 else 1, expand))
                channels = out_channels
        layers += _conv_bn(channels, last_channels, 1, activation=nn.ReLU6)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(last_channels, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class GPTDecoder(nn.Module):
    """A GPT-2-style decoder: token and learned position embeddings, ``layers`` pre-norm causal blocks of width
    ``dim``, ``heads`` heads and a GELU feed-forward of ``hidden`` (default 4 x dim), a final LayerNorm and a
    Linear head tied to the token embedding. GPT-2 small: layers=12, dim=768, heads=12, sequences of 1024."""

    def __init__(self, vocab, seq_len, dim=128, heads=4, layers=2, hidden=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(seq_len, dim)
        block = lambda: EncoderBlock(dim, heads, hidden or 4 * dim, activation="gelu")  # noqa: E731
        self.blocks = nn.Sequential(*(block() for _ in range(layers)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        return self.head(self.norm(self.blocks(x)))


class BERTEncoder(nn.Module):
    """A BERT-style encoder for masked language modelling: token and learned position embeddings and a LayerNorm,
    ``layers`` post-norm bidirectional blocks (GELU feed-forward of ``hidden``, default 4 x dim), then BERT's
    prediction head (Linear, GELU, LayerNorm, and a Linear to the vocabulary tied to the token embedding).
    BERT-base: layers=12, dim=768, heads=12, sequences of up to 512."""

    def __init__(self, vocab, seq_len, dim=128, heads=4, layers=2, hidden=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(seq_len, dim)
        self.embed_norm = nn.LayerNorm(dim)
        block = lambda: EncoderBlock(dim, heads, hidden or 4 * dim, activation="gelu", causal=False,  # noqa: E731
                                     prenorm=False)
        self.blocks = nn.Sequential(*(block() for _ in range(layers)))
        self.transform = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        x = self.blocks(self.embed_norm(x))
        return self.head(self.norm(F.gelu(self.transform(x))))


def _options(cls, kwargs, given):
    """``kwargs`` after checking that ``cls`` takes them (``given``: the arguments the data decides)."""
    accepted = [name for name in list(inspect.signature(cls).parameters) if name not in given]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise RecordError(f"model {cls.__name__} takes no argument {unknown[0]!r}; it takes {', '.join(accepted)}")
    return kwargs


def _image_model(cls, min_size=8):
    """Builder for a CNN: ``(sample_shape, num_classes, **kwargs) -> module``; needs [channels, height, width] images
    of at least ``cls.MIN_SIZE`` (else ``min_size``) pixels a side."""
    min_size = getattr(cls, "MIN_SIZE", min_size)

    def build(shape, num_classes, **kwargs):
        if len(shape) != 3 or min(shape[1:]) < min_size:
            raise RecordError(f"{cls.__name__} needs images [channels, height, width] of at least "
                              f"{min_size}x{min_size}, not {list(shape)}")
        return cls(in_channels=shape[0], num_classes=num_classes, **_options(cls, kwargs, ("in_channels",
                                                                                           "num_classes")))

    return build


def _mlp(shape, num_classes, **kwargs):
    return MLP(math.prod(shape), num_classes, **_options(MLP, kwargs, ("in_features", "num_classes")))


def _sequence_model(cls):
    """Builder for a transformer: the vocabulary is the data's token count, the positions its sequence length."""

    def build(shape, num_classes, **kwargs):
        if len(shape) != 1:
            raise RecordError(f"{cls.__name__} needs token sequences, not samples of shape {list(shape)}")
        return cls(vocab=num_classes, seq_len=shape[0], **_options(cls, kwargs, ("vocab", "seq_len")))

    return build


# Model name -> (builder(sample_shape, num_classes, **kwargs), kind of data it takes: "tensors", "tokens" (next-token
# prediction) or "masked" (masked tokens, ``data.DATASETS``)).
MODELS = {
    "resnet18": (_image_model(ResNet18), "tensors"),
    "vgg": (_image_model(VGGSmall), "tensors"),
    "mobilenet": (_image_model(MobileNetSmall), "tensors"),
    "mlp": (_mlp, "tensors"),
    "transformer": (_sequence_model(TransformerLM), "tokens"),
    "resnet50": (_image_model(ResNet50), "tensors"),
    "mobilenetv2": (_image_model(MobileNetV2), "tensors"),
    "gpt": (_sequence_model(GPTDecoder), "tokens"),
    "bert": (_sequence_model(BERTEncoder), "masked"),
}


def build_model(name, sample_shape, num_classes, kind, kwargs=None):
    """Build model ``name`` for samples of ``sample_shape`` and ``num_classes`` classes (vocabulary for tokens), with
    the keyword arguments ``kwargs`` of its class."""
    if name not in MODELS:
        raise RecordError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    builder, wants = MODELS[name]
    if kind != wants:
        raise RecordError(f"model {name!r} takes {wants} data, the chosen data set gives {kind}")
    try:
        return builder(tuple(sample_shape), num_classes, **(kwargs or {}))
    except (TypeError, ValueError) as error:
        if isinstance(error, RecordError):
            raise
        raise RecordError(f"model {name!r} with {kwargs}: {error}") from None
