"""Error and work analysis of FPRaker matmuls: error vs an fp64 dot product next to the baseline fp32 tree, terms, cycles."""

from torch.nn import functional as F

from dashraker.models.baseline import accumulate, adder_tree
from dashraker.models.fpraker.golden import encode_terms, tile
from dashraker.models.numerics import bf16_bits_to_fp32, fp32_mul, split, to_bf16_bits

__all__ = ["matmul_report"]


def _steps(matrix, lanes):
    """bf16 patterns of the rows of ``matrix [M, K]`` as [M, steps, lanes], zero-padded."""
    steps = -(-matrix.shape[1] // lanes)
    return F.pad(to_bf16_bits(matrix), (0, steps * lanes - matrix.shape[1])).reshape(len(matrix), steps, lanes)


def _group(steps, size):
    """[M, steps, lanes] -> [passes, size, steps, lanes], padding M with zero rows."""
    count = -(-len(steps) // size)
    return F.pad(steps, (0, 0, 0, 0, 0, count * size - len(steps))).reshape(count, size, *steps.shape[1:])


def matmul_report(x, w, params):
    """Run ``x [M, K] @ w [K, N]`` (x term-serial) on the FPRaker tile of ``params`` (the registry's parameters:
    ``lanes``, ``rows``, ``cols``, ``guard_bits``, ``zero_block_cycles``) and compare with fp64 and with the dense
    fp32 tree.

    Errors are ``|y - y64| / sum_i |x_i w_i|`` per dot product (y64: the fp64 dot product of the
    same bf16 operands), so cancellation does not blow them up. Returns a dict of figures.
    """
    lanes, rows, cols = params["lanes"], params["rows"], params["cols"]
    guard_bits, zero_block_cycles = params["guard_bits"], params["zero_block_cycles"]
    a, b = _steps(x, lanes), _steps(w.T.contiguous(), lanes)  # [M, S, N], [N, S, N]
    m, n = len(a), len(b)
    # every (row, column) pair as its own 1 x 1 pass: the outputs (independent of tiling)
    pairs = tile(a[:, None].expand(m, n, *a.shape[1:]).reshape(m * n, 1, *a.shape[1:]),
                 b[None].expand(m, n, *b.shape[1:]).reshape(m * n, 1, *b.shape[1:]), guard_bits, zero_block_cycles)
    fpraker = pairs.outputs.reshape(m, n)
    av, bv = bf16_bits_to_fp32(a), bf16_bits_to_fp32(b)
    baseline = accumulate(adder_tree(fp32_mul(av[:, None], bv[None])), 1)  # the one-cycle fp32 loop
    exact = (av.double()[:, None] * bv.double()[None]).sum((2, 3))
    scale = (av.double()[:, None] * bv.double()[None]).abs().sum((2, 3)).clamp(min=1e-300)
    errors = {name: ((y.double() - exact).abs() / scale)[scale > 1e-300] for name, y in
              (("fpraker", fpraker), ("baseline", baseline))}
    # cycles on an R x C tile in lockstep
    grouped = tile(_group(a, rows).repeat_interleave(-(-n // cols), 0), _group(b, cols).repeat(-(-m // rows), 1, 1, 1),
                   guard_bits, zero_block_cycles)
    _, _, significand = split(to_bf16_bits(x), "bf16")
    counts = encode_terms(significand)[2].double()
    nonzero = significand != 0
    report = {
        "dot_products": m * n,
        "length": x.shape[1],
        "mean_terms_per_value": counts.mean().item(),
        "mean_terms_per_nonzero": counts[nonzero].mean().item() if nonzero.any() else 0.0,
        "zero_fraction": 1 - nonzero.double().mean().item(),
        "skipped_fraction": (pairs.skipped_terms.sum() / (pairs.terms + pairs.skipped_terms).sum().clamp(min=1)).item(),
        "pe_cycles_per_step": (pairs.cycles.sum() / (m * n * a.shape[1])).item(),
        "tile_cycles_per_step": (grouped.cycles.sum() / grouped.step_cycles.numel()).item(),
        "tile": f"{rows}x{cols}",
    }
    for name, err in errors.items():
        report[f"{name}_error_median"] = err.median().item()
        report[f"{name}_error_max"] = err.max().item()
        report[f"{name}_error_mean"] = err.mean().item()
    return report
