"""Co-simulation of a trace's passes: RTL outputs against the golden models, RTL cycles against the mapper.

Passes are the mapper's own (``mapping.dataflow.passes``: same problems, same order,
the sparser operand on the rows). For each pass the RTL's fp32 outputs are compared
bit for bit with the design's golden model, and its cycles with the per-pass cycles
the mapper charges: both come from the design's descriptor (``golden`` and
``cost.cycles``), the very functions the mapper calls. The interval between consecutive results must equal the interval
between the passes' ends in the design's cost model (``Cost.ends``: back to back, their
cycles apart; a two-thread TensorDash tile's interleaved), so a cycle count the RTL
reports is also the time it took.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from dashraker.mapping.dataflow import passes as mapper_passes
from dashraker.mapping.ops import OPS

__all__ = ["CosimReport", "trace_passes", "cosimulate"]


@dataclass
class CosimReport:
    """Agreement of a co-simulation run; ``ok`` when nothing disagrees."""

    design: str
    layer: str
    op: str
    passes: int = 0
    dense_steps: int = 0
    output_mismatches: int = 0  # passes with at least one PE output differing from the golden model
    value_mismatches: int = 0  # PE outputs differing
    cycle_mismatches: int = 0  # passes whose RTL cycles differ from the mapper's (or from the golden model's)
    timing_mismatches: int = 0  # passes whose result interval differs from their cycles
    rtl_cycles: int = 0
    mapper_cycles: int = 0
    sim_cycles: int = 0
    rtl_seconds: float = 0.0
    problems: list = field(default_factory=list)  # the first few mismatches, in words

    @property
    def ok(self):
        return self.passes > 0 and not (self.output_mismatches or self.cycle_mismatches or self.timing_mismatches)

    @property
    def cycles_per_second(self):
        return self.sim_cycles / self.rtl_seconds if self.rtl_seconds else 0.0

    def add(self, other):
        """Fold another report's counts into this one."""
        for name in ("passes", "dense_steps", "output_mismatches", "value_mismatches", "cycle_mismatches",
                     "timing_mismatches", "rtl_cycles", "mapper_cycles", "sim_cycles", "rtl_seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems.extend(other.problems[: max(0, 5 - len(self.problems))])


def trace_passes(layer, tensors, op, rows, cols, lanes, fmt="bf16", rounding="nearest", count=None, start=0):
    """Yield (label, scheduled [P, R, S, N], partner [P, C, S, N]) batches: passes ``start`` to ``start + count``
    of one operation of a layer, as ``mapping.dataflow.passes`` forms them (a batch never spans problems)."""
    if op not in OPS:
        raise ValueError(f"unknown operation {op!r}; expected one of {list(OPS)}")
    stop = None if count is None else start + count
    seen = 0
    for batch in mapper_passes(layer, tensors, op, rows, cols, lanes, fmt, rounding, max_values=1 << 22):
        size = len(batch.scheduled)
        first, last = max(start - seen, 0), size if stop is None else min(stop - seen, size)
        if first < last:
            yield batch.label, batch.scheduled[first:last], batch.partner[first:last]
        seen += size
        if stop is not None and seen >= stop:
            return


def cosimulate(cosim, layer, tensors, op, count=None, start=0, rounding="nearest", chunk=64, progress=None):
    """Run passes of one layer operation on ``cosim`` (a ``Cosim``) and compare them; returns a ``CosimReport``.

    ``chunk`` passes go to the RTL per call; ``progress`` (a tqdm bar or None) is advanced per pass.
    """
    params, design = cosim.params, cosim.design
    report = CosimReport(design.name, layer.name, op)
    for label, scheduled, partner in trace_passes(layer, tensors, op, cosim.tile.rows, cosim.tile.cols,
                                                  cosim.tile.lanes, params["fmt"], rounding, count, start):
        for first in range(0, len(scheduled), chunk):
            a, b = scheduled[first : first + chunk], partner[first : first + chunk]
            began = time.perf_counter()
            run = cosim.run(a, b)
            report.rtl_seconds += time.perf_counter() - began
            want, golden_cycles = design.golden(params, cosim.bits(a), cosim.bits(b))
            charged = design.cost.cycles(params, a, b)
            ends = design.cost.ends(params, run.cycles)
            _compare(report, f"{label} pass {report.passes}", run, want, golden_cycles, charged, ends)
            report.passes += len(a)
            report.dense_steps += a.shape[0] * a.shape[2]
            report.sim_cycles += run.sim_cycles
            if progress is not None:
                progress.update(len(a))
    return report


def _compare(report, where, run, want, golden_cycles, charged, ends):
    differ = (run.outputs != want).reshape(len(want), -1)
    cycles_off = run.cycles != charged
    if golden_cycles is not None:
        cycles_off |= run.cycles != np.asarray(golden_cycles)
    timing_off = np.zeros(len(want), bool)  # each result the cost model's interval after the previous pass's
    timing_off[1:] = np.diff(run.arrivals) != np.diff(ends)
    report.output_mismatches += int(differ.any(axis=1).sum())
    report.value_mismatches += int(differ.sum())
    report.cycle_mismatches += int(cycles_off.sum())
    report.timing_mismatches += int(timing_off.sum())
    report.rtl_cycles += int(run.cycles.sum())
    report.mapper_cycles += int(np.asarray(charged).sum())
    for p in np.flatnonzero(differ.any(axis=1) | cycles_off | timing_off)[: max(0, 5 - len(report.problems))]:
        first = int(np.argmax(differ[p])) if differ[p].any() else None
        text = f"{where} + {p}: RTL {int(run.cycles[p])} cycles, mapper {int(charged[p])}"
        if golden_cycles is not None:
            text += f", golden {int(golden_cycles[p])}"
        if timing_off[p]:
            text += (f", result {int(run.arrivals[p] - run.arrivals[p - 1])} cycles after the previous pass's, "
                     f"model {int(ends[p] - ends[p - 1])}")
        if first is not None:
            text += (f"; {int(differ[p].sum())} outputs differ, first PE {divmod(first, want.shape[2])}: "
                     f"RTL {int(run.outputs.reshape(len(want), -1)[p, first]):#010x}, "
                     f"golden {int(want.reshape(len(want), -1)[p, first]):#010x}")
        report.problems.append(text)
