"""An energy table fitted jointly to measured tile energy: the per-action entries and the clocking's per-flip-flop
per-cycle entry at once (SPEC section 7, ``dashraker asic --calibrate``).

Each measured run of passes on a tile gives one equation in the table's entries, the mapper's own model of it:

    measured energy (leakage left out) = sum over actions of count x entry + flip-flops x cycles x flip_flop_clock

The fit is non-negative least squares (``scipy.optimize.nnls``) over every run of every design, in pJ (the runs
that hold more energy weigh more, as they do in a design's total). Non-negative, not plain least squares: in real
passes several actions move together (a dense tile's multiplies and adds are equal in every pass, a term-serial
tile's terms and encodings nearly so), so plain least squares has no unique answer and returns energies below zero,
which a table charging other mixes of actions cannot use. Where actions are collinear only their sum is fixed by
the measurement: which of them carries it is the solver's choice (``identified`` says how many directions the
runs fix).
"""

import dataclasses

import numpy as np

from dashraker.mapping.components import CLOCK_ENTRY, MEMORY, components, table_entry

__all__ = ["Run", "Fit", "action_entries", "charged_pj", "fit_table", "table_energy_pj"]


@dataclasses.dataclass(frozen=True)
class Run:
    """One measured run of passes on a design's tile: its energy (pJ, leakage left out), the mapper's action
    ``counts`` of the passes, the cycles the tile was clocked and its flip-flops."""

    design: str
    layer: str
    op: str
    energy_pj: float
    counts: dict
    cycles: int
    flip_flops: float
    macs: int = 0


@dataclasses.dataclass(frozen=True)
class Fit:
    """The fitted entries (pJ), the runs they were fitted to (of operand format ``fmt``), and how many directions of
    the entries those runs fix (the rank of the counts; below ``len(entries)`` where actions move together)."""

    entries: dict
    runs: tuple
    fmt: str
    identified: int

    def residual(self, run):
        """The table's energy of ``run`` over its measured energy, minus 1."""
        return table_energy_pj(run, self.entries, self.fmt) / run.energy_pj - 1


def action_entries(counts, fmt):
    """{entry: count} of the core actions (the memory system's left out) in the mapper's ``counts``, each at its
    energy-table entry (the multiplier's by operand format ``fmt``)."""
    per_entry = {}
    for component in components():
        if component not in MEMORY and counts.get(component):
            name = table_entry(component, fmt)
            per_entry[name] = per_entry.get(name, 0) + counts[component]
    return per_entry


def _row(counts, cycles, flip_flops, fmt):
    """{entry: what it is charged for}: the actions of ``counts`` and ``flip_flops`` x ``cycles`` of clocking."""
    return {**action_entries(counts, fmt), CLOCK_ENTRY: flip_flops * cycles}


def charged_pj(counts, cycles, flip_flops, entries, fmt):
    """The core energy a table of ``entries`` ({entry: pJ}) charges passes of the mapper's action ``counts`` that
    clocked a tile of ``flip_flops`` for ``cycles``: their actions and their clocking, as the mapper charges them."""
    return sum(value * entries[name] for name, value in _row(counts, cycles, flip_flops, fmt).items())


def table_energy_pj(run, entries, fmt):
    """``charged_pj`` of a ``Run``."""
    return charged_pj(run.counts, run.cycles, run.flip_flops, entries, fmt)


def fit_table(runs, fmt):
    """The entries that charge ``runs`` (``Run``s of one operand format ``fmt``) their measured energy, by
    non-negative least squares; only entries some run uses are fitted. Raises ``ValueError`` without runs."""
    from scipy.optimize import nnls

    runs = tuple(runs)
    rows = [_row(run.counts, run.cycles, run.flip_flops, fmt) for run in runs]
    names = sorted({name for row in rows for name, value in row.items() if value})
    if not runs or not names:
        raise ValueError("no measured run charges an action or a clocked flip-flop")
    matrix = np.array([[row.get(name, 0) for name in names] for row in rows], float)
    scale = np.linalg.norm(matrix, axis=0)  # unit columns: counts and flip-flop cycles differ by orders of magnitude
    solution, _ = nnls(matrix / scale, np.array([run.energy_pj for run in runs], float))
    return Fit(dict(zip(names, (solution / scale).tolist())), runs, fmt, int(np.linalg.matrix_rank(matrix / scale)))
