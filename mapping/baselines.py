"""``dashraker study``'s claims at iso-area judged against each dense baseline (``designs.baseline.BASELINES``: the
fp32 tree, the fused dot product, the fused multiply-add lanes), each in turn the reference (SPEC section 7b), whatever
the configuration's own reference is: each design with such a claim gets as many tiles as fit that baseline's area
(the other designs are not mapped again).

A design's own figures (cycles, energy, leakage, run time) do not depend on the reference, so its runs at a tile count
are shared by every baseline whose budget gives it that count (``study._mapper``).
"""

import dataclasses

from dashraker.designs import DESIGNS, reference
from dashraker.designs.baseline import BASELINES
from dashraker.mapping.accountings import SCENARIOS

__all__ = ["BASELINES", "claims", "configure", "resolve", "summary", "accountings", "requests", "figures"]


def claims():
    """(design name, claim, scenario) of every published claim judged at iso-area."""
    by_key = {s.key: s for s in SCENARIOS}
    return [(d.name, c, by_key[c.scenario]) for d in DESIGNS.values() for c in d.published
            if c.scenario in by_key and by_key[c.scenario].tiles == "iso"]


def configure(configs):
    """Per baseline name, per silicon model of ``configs`` (``study._configs``' dict): the configurations of the
    reference and of each design with a claim at iso-area, with that baseline as their reference (its section
    overridden through the file's checks), or, where the configuration cannot have it (an fp32 array and the fma
    lanes), the one-line reason."""
    from dashraker.mapping.config import ConfigError, apply_overrides

    judged = {reference().name, *(name for name, _, _ in claims())}
    out = {}
    for name, params in BASELINES.items():
        fields = {f"{reference().name}.{key}": value for key, value in params.items()}
        try:
            out[name] = {model: [apply_overrides(c, fields) for c in scoped if c.design.name in judged]
                         for model, scoped in configs.items()}
        except ConfigError as error:
            out[name] = str(error)
    return out


def resolve(against, area_cache, progress, jobs, asic_cache):
    """``against`` (``configure``'s) with each baseline's configurations' silicon resolved and, per silicon model,
    the iso-area tiles each design gets under each scope the claims are judged in; a baseline whose budget a design's
    one tile exceeds becomes the one-line reason."""
    from dashraker.mapping import isoarea
    from dashraker.mapping.cli import with_silicon

    scopes = list(dict.fromkeys(scenario.scope for _, _, scenario in claims()))
    out = {}
    for name, by_model in against.items():
        if isinstance(by_model, str):
            out[name] = by_model
            continue
        try:
            out[name] = {model: _budgets(with_silicon(configs, area_cache, progress, jobs, asic_cache), scopes,
                                         area_cache, progress) for model, configs in by_model.items()}
        except isoarea.AreaMeasureError as error:
            out[name] = str(error)
    return out


def _budgets(configs, scopes, area_cache, progress):
    """``configs`` (resolved) and the iso-area tiles of each under each of ``scopes``."""
    from dashraker.mapping import isoarea

    tiles = {scope: isoarea.budget([dataclasses.replace(c, area_scope=scope) for c in configs], "asic", area_cache,
                                   None, progress).tiles_iso for scope in scopes}
    return {"configs": configs, "tiles": tiles}


def summary(resolved):
    """What the report says of each baseline: its parameters, or why it is not judged; per silicon model its tile's
    area and the iso-area tiles."""
    out = {}
    for name, by_model in resolved.items():
        out[name] = {"params": BASELINES[name], "refused": by_model if isinstance(by_model, str) else None,
                     "silicon": {} if isinstance(by_model, str) else {
                         model: {"tile_area": next(c.tile.area for c in e["configs"] if c.design.reference),
                                 "tiles_iso": e["tiles"]} for model, e in by_model.items()}}
    return out


def accountings(resolved):
    """Every (baseline, silicon model, its entry, claim's accounting, tiles) that ``figures`` maps."""
    scenarios = list(dict.fromkeys(scenario for _, _, scenario in claims()))
    for name, by_model in resolved.items():
        if not isinstance(by_model, str):
            for model, entry in by_model.items():
                for scenario in scenarios:
                    yield name, model, entry, scenario, entry["tiles"][scenario.scope]


def requests(resolved):
    """What ``figures`` maps, as ``(tiles, compression, configurations)``, for one run of them all beforehand."""
    return [(tiles, scenario.compression, entry["configs"]) for _, _, entry, scenario, tiles in accountings(resolved)]


def figures(resolved, rows, whole, bootstrap):
    """Per baseline, per silicon model, per claim's accounting: every design's figures against that baseline
    (``whole(scenario, rows, configs, tiles, reference, bootstrap)``, of the rows ``rows(tiles, compression, label,
    configs)`` maps)."""
    out = {}
    for name, model, entry, scenario, tiles in accountings(resolved):
        mapped = rows(tiles, scenario.compression, f"{scenario.label}, the {name} baseline, {model}", entry["configs"])
        out.setdefault(name, {}).setdefault(model, {})[scenario.key] = whole(
            scenario, mapped, {c.design.name: c for c in entry["configs"]}, tiles, reference().name, bootstrap)
    return out
