"""Speedup of TensorDash interconnect patterns over dense execution versus random sparsity (reference model)."""

import argparse

import numpy as np
from tqdm import tqdm

from dashraker.models.interconnect import parse_pattern, pattern_lookahead
from dashraker.models.tensordash import cycles

__all__ = ["PATTERNS", "speedups", "main"]

PATTERNS = {
    "T<2,5>": "T<2,5>",
    "T<2,0> lookahead only": "T<2,0>",
    "T<1,0> lookahead only": "T<1,0>",
    "H=1, 3 lookaside": "(0,0),(1,0),(1,-1),(1,1),(1,2)",
    "H=3, 7 lookaside": "(0,0),(1,0),(2,0),(3,0),(1,-1),(1,1),(1,3),(2,-2),(2,2),(3,-3),(3,3)",
}


def speedups(pattern, sparsities, passes, rows, steps, lanes, seed):
    """Dense steps / TensorDash cycles summed over ``passes`` random passes, per sparsity."""
    rng = np.random.default_rng(seed)
    lookahead = pattern_lookahead(pattern)
    result = []
    for sparsity in sparsities:
        nonzero = rng.random((passes, rows, steps, lanes)) >= sparsity
        result.append(passes * steps / cycles(nonzero, pattern, lookahead).sum())
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passes", type=int, default=2000)
    parser.add_argument("--rows", type=int, default=4, help="tile rows sharing step skipping")
    parser.add_argument("--steps", type=int, default=72, help="dense steps per pass")
    parser.add_argument("--lanes", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", help="write the plot to this PNG file")
    args = parser.parse_args(argv)
    sparsities = [0.0, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.8, 0.9, 0.95, 0.99, 1.0]
    table = {}
    for name, text in tqdm(PATTERNS.items(), desc="patterns"):
        parse_pattern(text)
        table[name] = speedups(text, sparsities, args.passes, args.rows, args.steps, args.lanes, args.seed)
    print(f"speedup (dense steps / cycles), N={args.lanes}, rows={args.rows}, "
          f"{args.steps} steps x {args.passes} passes per point")
    print(f"{'sparsity':>9} " + " ".join(f"{name:>22}" for name in table))
    for i, sparsity in enumerate(sparsities):
        print(f"{sparsity:>9.2f} " + " ".join(f"{values[i]:>22.3f}" for values in table.values()))
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, values in table.items():
            ax.plot(np.array(sparsities) * 100, values, marker="o", label=name)
        ax.set_xlabel("random sparsity of the scheduled operand (%)")
        ax.set_ylabel("speedup over dense")
        ax.set_title(f"TensorDash reference model, N={args.lanes}, {args.rows} rows")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        from dashraker.outputs import atomic_write

        atomic_write(args.plot, lambda file: fig.savefig(file, dpi=120, format="png"))
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
