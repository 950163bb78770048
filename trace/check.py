"""Checks every file of a trace (presence, size, dtype, shape, NaN/Inf) and measures the sparsity of every tensor."""

from dataclasses import dataclass, field

import numpy as np

from dashraker.trace.errors import TraceError
from dashraker.trace.reader import open_trace
from dashraker.trace.store import TENSORS, unrecorded_message

__all__ = ["TensorStats", "CheckResult", "check_trace", "format_sparsity", "format_summary"]


@dataclass(frozen=True)
class TensorStats:
    """One tensor of one layer at one step: element count and how many are exactly zero."""

    step: int
    layer: str
    tensor: str
    size: int
    zeros: int

    @property
    def sparsity(self):
        return self.zeros / self.size


@dataclass
class CheckResult:
    """What ``check_trace`` found: problems (one line each, naming the file), warnings (layers the mapper and
    co-simulation cannot take, and why) and per-tensor statistics."""

    trace: object = None
    problems: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    stats: list = field(default_factory=list)

    @property
    def ok(self):
        return not self.problems


def check_trace(path, progress=False, strict=False):
    """Check the trace folder ``path`` file by file, collecting every problem rather than stopping at the first.

    Modules with parameters that the recorder saw but did not record (the manifest's ``unrecorded_layers``) are a
    warning, or a problem with ``strict``."""
    result = CheckResult()
    try:
        result.trace = trace = open_trace(path)
    except TraceError as error:
        result.problems.append(str(error))
        return result
    result.warnings = [f"layer {layer.name!r}: {layer.reason}; not mapped or co-simulated "
                       "(dashraker map --skip-unsupported maps the other layers)" for layer in trace.unsupported]
    if trace.unrecorded:
        (result.problems if strict else result.warnings).append(f"{trace.path}: {unrecorded_message(trace.unrecorded)}")
    jobs = [(step, layer) for step in trace.steps for layer in trace.layers]
    if progress:
        from dashraker.progress import bar as progress_bar

        jobs = progress_bar(jobs, desc="checking", unit="layer")
    for step, layer in jobs:
        for tensor in trace.tensor_names(layer):
            try:
                array = trace.load_tensor(layer.name, step, tensor)
            except TraceError as error:
                result.problems.append(str(error))
                continue
            zeros = array.size - int(np.count_nonzero(array))
            result.stats.append(TensorStats(step, layer.name, tensor, array.size, zeros))
    return result


def _percent(stat):
    return "-" if stat is None else f"{100 * stat.sparsity:5.1f}"


def format_sparsity(stats):
    """A text table: one row per step and layer, the percentage of zeros in each tensor."""
    table = {}
    for stat in stats:
        table.setdefault((stat.step, stat.layer), {})[stat.tensor] = stat
    width = max([len("layer"), *(len(layer) for _, layer in table)])
    lines = [f"{'step':>6}  {'layer':<{width}}  " + "  ".join(f"{t:>11}" for t in TENSORS) + "   (% zeros)"]
    for (step, layer), row in table.items():
        lines.append(f"{step:>6}  {layer:<{width}}  " + "  ".join(f"{_percent(row.get(t)):>11}" for t in TENSORS))
    return "\n".join(lines)


def format_summary(stats):
    """Per step, the share of zeros over all layers of each tensor kind (weighted by element count)."""
    totals = {}
    for stat in stats:
        size, zeros = totals.get((stat.step, stat.tensor), (0, 0))
        totals[stat.step, stat.tensor] = size + stat.size, zeros + stat.zeros
    steps = sorted({step for step, _ in totals})
    lines = [f"{'step':>6}  " + "  ".join(f"{t:>11}" for t in TENSORS) + "   (% zeros, all layers)"]
    for step in steps:
        cells = []
        for tensor in TENSORS:
            size, zeros = totals.get((step, tensor), (0, 0))
            cells.append(f"{100 * zeros / size:11.1f}" if size else f"{'-':>11}")
        lines.append(f"{step:>6}  " + "  ".join(cells))
    return "\n".join(lines)
