"""Bring your own model: record a training trace inside your own PyTorch loop, then map it onto the accelerators.

The network (two Conv1d layers, one causal self-attention layer whose two products go through
``dashraker.trace.layers.Attention``, a feed-forward Linear applied twice with shared weights)
and the data (noisy sine waves, classified by frequency) stand for yours. The loop is ordinary
PyTorch: AdamW, bf16 autocast, two micro-batches accumulated per optimizer step. The lines
that matter for dashraker are ``recording(...)`` and ``with recorder.step(step):``.

    python examples/byo_model.py --out build/byo            # about 30 s on 2 cores
    dashraker trace record --model examples.byo_model:make_model --model-arg dim=32 \\
        --data examples.byo_model:make_data --steps 1 --samples 2 --out build/byo-cli   # the same from the CLI
"""

import argparse
import contextlib
import math
import time

import torch
from torch import nn
from torch.nn import functional as F

from dashraker.designs import DESIGNS
from dashraker.mapping.config import load_config
from dashraker.mapping.runner import map_trace, totals
from dashraker.trace import open_trace
from dashraker.trace.layers import Attention
from dashraker.trace.recorder import recording

CLASSES = 4


class WaveNet(nn.Module):
    """Sequences [n, channels, length] -> class logits [n, classes]."""

    def __init__(self, channels=2, dim=32, heads=2, classes=CLASSES):
        super().__init__()
        self.heads = heads
        self.embed = nn.Conv1d(channels, dim, 5, padding=2)
        self.conv = nn.Conv1d(dim, dim, 3, padding=2, dilation=2)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.attention = Attention()
        self.ffn = nn.Linear(dim, dim)  # applied twice: recorded as "ffn" and "ffn#1"
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        h = F.relu(self.conv(F.relu(self.embed(x)))).transpose(1, 2)  # [n, length, dim]
        n, t, d = h.shape
        q, k, v = (y.view(n, t, self.heads, -1).transpose(1, 2) for y in self.qkv(h).chunk(3, dim=-1))
        h = h + self.attention(q, k, v, is_causal=True).transpose(1, 2).reshape(n, t, d)
        h = h + self.ffn(F.relu(self.ffn(h)))
        return self.head(h.mean(1))


class Waves(torch.utils.data.Dataset):
    """``count`` noisy two-channel sine waves of ``length`` samples; the target is the frequency class."""

    def __init__(self, count=512, length=64, seed=0):
        gen = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, CLASSES, (count,), generator=gen)
        phase = torch.rand(count, 2, 1, generator=gen) * 2 * math.pi
        t = torch.arange(length) / length
        frequency = (2 + 2 * self.y.float()).view(-1, 1, 1)
        self.x = torch.sin(2 * math.pi * frequency * t + phase) + 0.3 * torch.randn(count, 2, length, generator=gen)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def make_model(dim=32, heads=2):
    """Factory for ``dashraker trace record --model examples.byo_model:make_model``."""
    return WaveNet(dim=dim, heads=heads)


def make_data(count=512, length=64):
    """Factory for ``--data examples.byo_model:make_data``: a map-style data set of (sample, label) pairs."""
    return Waves(count, length)


def _forever(loader):
    """The loader's batches, epoch after epoch."""
    while True:
        yield from loader


def train_and_record(out, steps=60, record=(1, 60), batch_size=32, samples=2, autocast=True, overwrite=True):
    """Train ``WaveNet`` on ``Waves`` for ``steps`` optimizer steps, recording the steps ``record``; returns losses."""
    torch.manual_seed(0)
    model = make_model()
    loader = torch.utils.data.DataLoader(make_data(), batch_size=batch_size // 2, shuffle=True, drop_last=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses, batches = [], _forever(loader)
    meta = {"model": "examples.byo_model:WaveNet", "data": "Waves", "optimizer": {"name": "AdamW", "lr": 3e-3}}
    with recording(model, out, samples=samples, meta=meta, overwrite=overwrite) as recorder:
        for step in range(1, steps + 1):
            optimizer.zero_grad()
            with recorder.step(step) if step in record else contextlib.nullcontext():
                for _ in range(2):  # two micro-batches per step: each layer is recorded twice (name, name#1 ...)
                    x, y = next(batches)
                    with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
                        loss = F.cross_entropy(model(x), y) / 2
                    loss.backward()
                    losses.append(2 * loss.item())
            optimizer.step()
    return losses


def speedups(trace, designs=tuple(DESIGNS), jobs=1):
    """Map every recorded step of ``trace`` on ``designs`` (default: all); returns ``mapping.runner.totals`` of the rows."""
    configs = [load_config(design=design) for design in designs]
    return totals(map_trace(trace, configs, jobs=jobs, progress=False))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/byo", help="trace folder (replaced if it holds a trace)")
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps (the first and last are recorded)")
    parser.add_argument("--no-autocast", action="store_true", help="train in fp32")
    args = parser.parse_args()
    torch.set_num_threads(1)  # tiny tensors on a shared machine: one thread is fastest
    start = time.perf_counter()
    losses = train_and_record(args.out, args.steps, (1, args.steps), autocast=not args.no_autocast)
    trace = open_trace(args.out)
    names = ", ".join(layer.name for layer in trace.layers[:8])
    print(f"trained {args.steps} steps (loss {losses[0]:.3f} -> {sum(losses[-8:]) / 8:.3f}), recorded steps "
          f"{trace.steps}: {len(trace.layers)} layer entries ({names}, ...)")
    for (design, op), total in speedups(args.out).items():
        print(f"{design:>10} {op:>10}: {total['cycles']:>9,} cycles, speedup {total['speedup']:.3f} over dense")
    print(f"done in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
