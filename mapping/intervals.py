"""Confidence intervals of the study's ratios: a two-stage bootstrap over a trace's recorded steps and, within each
step, the groups of samples it was mapped in (SPEC section 6, "Intervals").

``dashraker study`` maps each recorded step's samples as one batch or in groups of them
(``runner.group_samples``); every figure it reports is a ratio of two sums over those (step, group) units (the
reference's cycles over a design's, energies, times), so a bootstrap replicate is a weighted sum of the per-unit
figures, not a new mapping. A replicate draws the steps with replacement, then, for each step drawn, that step's
groups with replacement (the cluster bootstrap of a two-stage sample: steps of training, samples of a step's
batch). The interval is the replicates' percentile interval.
"""

import numpy as np

__all__ = ["LEVEL", "DRAWS", "MIN_UNITS", "Intervals", "ratio_interval", "samples_to_decide"]

LEVEL = 0.95  # the intervals' confidence level
DRAWS = 2000  # bootstrap replicates
# Below this many steps, or groups in a step, a percentile bootstrap's interval is too narrow for its level (its
# replicates take few distinct values); the report says so.
MIN_UNITS = 10


class Intervals:
    """The bootstrap of ``units`` ((step, group) pairs): ``weights`` [draws, units], how many times each unit is
    drawn in each replicate; ``level`` the confidence level; ``groups`` the groups of each step."""

    def __init__(self, units, draws=DRAWS, level=LEVEL, seed=0):
        if not 0 < level < 1:
            raise ValueError(f"confidence level must be between 0 and 1, not {level!r}")
        self.units, self.level = list(units), level
        rng = np.random.default_rng(seed)
        columns = {}
        for k, (step, _) in enumerate(self.units):
            columns.setdefault(step, []).append(k)
        self.groups = {step: len(ks) for step, ks in columns.items()}
        # each step drawn c times (a multinomial over the steps); its groups then drawn c x groups times in all
        times = rng.multinomial(len(columns), [1 / len(columns)] * len(columns), size=draws)
        self.weights = np.zeros((draws, len(self.units)))
        for s, ks in enumerate(columns.values()):
            self.weights[:, ks] = rng.multinomial(times[:, s] * len(ks), [1 / len(ks)] * len(ks))

    def within(self, step):
        """The bootstrap of ``step``'s groups alone: a step's own interval."""
        return Intervals([unit for unit in self.units if unit[0] == step], len(self.weights), self.level)

    def ratio(self, numerators, denominators, scale=1.0):
        """The interval of ``scale * sum(numerators) / sum(denominators)`` (per unit, in ``units`` order): the
        replicates' percentiles; a point where every unit's ratio is the same or there is one unit."""
        num, den = (np.asarray(values, float) for values in (numerators, denominators))
        return ratio_interval(self.weights @ num * scale, self.weights @ den, self.level)


def ratio_interval(numerators, denominators, level=LEVEL):
    """The percentile interval [low, high] at ``level`` of replicate ratios ``numerators / denominators``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.asarray(numerators, float) / np.asarray(denominators, float)
    ratios = ratios[np.isfinite(ratios)]
    if not ratios.size:
        return None
    tail = (1 - level) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return [float(low), float(high)]


def samples_to_decide(samples, value, interval, target):
    """Samples per step that would shrink ``interval`` about ``value`` to clear ``target``, were the spread of the
    samples as it is (an interval's width falls as one over the square root of the samples); None where the value
    sits on the target."""
    half = (interval[1] - interval[0]) / 2
    gap = abs(value - target)
    if not gap > 0:
        return None
    return max(samples + 1, int(np.ceil(samples * (half / gap) ** 2)))
