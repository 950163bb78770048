"""Training-numerics study: the digits CNN trained with a tile's arithmetic in every matmul vs fp32 and bf16.

Usage: python bench/training_study.py OUT_FOLDER [--arithmetic term-serial tree fused] [--steps 150] [--batch 16]
Trains the references fp32 and bf16, then each arithmetic chosen (default: all of ``TILE_MODES``: FPRaker's
tile, the baseline's with the fp32 adder tree, the baseline's with the fused dot product), with the same seed,
batches and initial weights. Writes OUT_FOLDER/training_study.png (loss and test-accuracy curves) and
OUT_FOLDER/training_study.json (the histories and each run's wall time), atomically; prints a summary.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from tqdm import tqdm  # noqa: E402

from dashraker.models.training import REFERENCE_MODES, TILE_MODES, train  # noqa: E402
from dashraker.outputs import atomic_write  # noqa: E402

__all__ = ["main", "summary"]


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


def summary(histories, steps):
    """One row per mode: final test accuracy, mean loss of the last tenth of the steps, the loss curve's
    largest distance from bf16's and fp32's at any step, and the run's wall time."""
    tail = max(1, steps // 10)
    rows = []
    for mode, history in histories.items():
        gaps = {ref: max(abs(x - y) for x, y in zip(history["loss"], histories[ref]["loss"])) for ref in REFERENCE_MODES}
        rows.append({"mode": mode, "accuracy": history["accuracy"][-1], "tail_loss": sum(history["loss"][-tail:]) / tail,
                     **{f"gap_{ref}": gap for ref, gap in gaps.items()}, "seconds": history["seconds"]})
    header = (f"{'mode':8} {'final test acc':>15} {'mean loss of last ' + str(tail):>22} {'max |loss - bf16|':>18} "
              f"{'max |loss - fp32|':>18} {'wall s':>8}")
    lines = [header] + [f"{row['mode']:8} {row['accuracy']:15.4f} {row['tail_loss']:22.4f} {row['gap_bf16']:18.2e} "
                        f"{row['gap_fp32']:18.2e} {row['seconds']:8.1f}" for row in rows]
    return rows, "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for the plot and the histories")
    parser.add_argument("--arithmetic", nargs="+", choices=TILE_MODES, default=list(TILE_MODES),
                        help="tile arithmetics to train with, beside the references fp32 and bf16 (default: all)")
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
    for mode in (*REFERENCE_MODES, *dict.fromkeys(args.arithmetic)):
        start = time.perf_counter()
        with tqdm(total=args.steps, desc=mode, unit="step") as bar:
            histories[mode] = train(
                mode, args.steps, args.batch, args.lr, args.seed,
                progress=lambda loss: (bar.set_postfix(loss=f"{loss:.3f}"), bar.update()),
            )
        histories[mode]["seconds"] = time.perf_counter() - start
    _plot(histories, args.out / "training_study.png")
    atomic_write(args.out / "training_study.json", lambda file: file.write(json.dumps(histories).encode()))
    print(summary(histories, args.steps)[1])
    print(f"plot: {args.out / 'training_study.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
