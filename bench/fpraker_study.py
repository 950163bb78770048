"""Training-numerics study: the digits CNN trained with FPRaker arithmetic in every matmul vs fp32 and bf16.

Usage: python bench/fpraker_study.py OUT_FOLDER [--steps 150] [--batch 16] [--seed 0]
Writes OUT_FOLDER/fpraker_study.png (loss and test-accuracy curves) and
OUT_FOLDER/fpraker_study.json (the histories), atomically; prints a summary.
"""

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from tqdm import tqdm  # noqa: E402

from dashraker.models.fpraker.training import MODES, train  # noqa: E402
from dashraker.outputs import atomic_write  # noqa: E402

__all__ = ["main"]


def _plot(histories, path):
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(10, 4))
    for mode, history in histories.items():
        loss_ax.plot(history["step"], history["loss"], label=mode, alpha=0.8)
        acc_ax.plot(history["eval_step"], history["accuracy"], label=mode, marker=".")
    loss_ax.set(xlabel="step", ylabel="training loss", title="loss (same seed, batches, init)")
    acc_ax.set(xlabel="step", ylabel="test accuracy (fp32 eval)", title="held-out accuracy")
    for ax in (loss_ax, acc_ax):
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    atomic_write(path, lambda file: fig.savefig(file, format="png", dpi=120))
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for the plot and the histories")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch < 1:
        parser.error(f"--steps and --batch must be positive, got {args.steps} and {args.batch}")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"output folder {args.out} exists and is not a folder")
    args.out.mkdir(parents=True, exist_ok=True)
    histories = {}
    for mode in MODES:
        with tqdm(total=args.steps, desc=mode, unit="step") as bar:
            histories[mode] = train(
                mode, args.steps, args.batch, args.lr, args.seed,
                progress=lambda loss: (bar.set_postfix(loss=f"{loss:.3f}"), bar.update()),
            )
    _plot(histories, args.out / "fpraker_study.png")
    atomic_write(args.out / "fpraker_study.json", lambda file: file.write(json.dumps(histories).encode()))
    tail = max(1, args.steps // 10)
    print(f"{'mode':8} {'final loss (mean of last ' + str(tail) + ')':>30} {'final test acc':>15} {'max |loss - fp32|':>18}")
    for mode, history in histories.items():
        mean_loss = sum(history["loss"][-tail:]) / tail
        gap = max(abs(x - y) for x, y in zip(history["loss"], histories["fp32"]["loss"]))
        print(f"{mode:8} {mean_loss:30.4f} {history['accuracy'][-1]:15.4f} {gap:18.2e}")
    print(f"plot: {args.out / 'fpraker_study.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
