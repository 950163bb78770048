"""How far each deciding assumption moves the study's verdicts: a one-at-a-time sweep over a documented range each.

Each assumption (``ASSUMPTIONS``) is a configuration field and a low and a high value, with where they come from
(docs/guides/study.md, Sensitivity). The trace is mapped at the configuration as it is and at each end of each range
(``mapping.sweep``), every design at each point; a verdict is a design's figure against the reference (dense)
design's at the same point, as the study's equal-lanes accounting compares them: speedup in time and energy
efficiency. The result says, per verdict, its value as configured and at each end of each range, and a tornado plot
draws it (SPEC section 9).
"""

import dataclasses
import tempfile
from pathlib import Path

__all__ = ["Assumption", "ASSUMPTIONS", "VERDICTS", "PLOTS", "sensitivity", "for_study", "report_lines", "plot"]

PLOTS = ("sensitivity.png", "sensitivity.svg")  # the tornado plot
VERDICTS = {"time_speedup": "speedup (time)", "energy_efficiency": "energy efficiency"}
# DRAM energy per 64 bits of HBM2: 3.9 pJ/bit (O'Connor et al., "Fine-Grained DRAM", MICRO 2017, Table 1).
HBM2_PJ_PER_64B = 3.9 * 64


@dataclasses.dataclass(frozen=True)
class Assumption:
    """A deciding assumption: its configuration ``key``, the ``low`` and ``high`` ends of its range (a value, or a
    function of the configured value), their ``source``; ``key`` "dram_pj" is the energy table's DRAM entry."""

    name: str
    key: str
    low: object
    high: object
    source: str


ASSUMPTIONS = (
    Assumption("DRAM bandwidth (GB/s)", "memory.dram_gbps", 25.6, 900.0,
               "one DDR4-3200 channel (64 bit x 3.2 GT/s) to the four HBM2 stacks of a V100 (NVIDIA V100 whitepaper, "
               "2017) or a TPUv3 (Norrie et al., IEEE Micro 2021)"),
    Assumption("clock (MHz)", "clock_mhz", 700.0, 1530.0,
               "TPUv2's 700 MHz (Norrie et al., IEEE Micro 2021) to a V100's 1,530 MHz boost clock (NVIDIA V100 "
               "whitepaper, 2017)"),
    Assumption("DRAM energy (pJ per 64 bits)", "dram_pj", HBM2_PJ_PER_64B, None,
               "HBM2's 3.9 pJ/bit (O'Connor et al., MICRO 2017) to the energy table's own entry (Horowitz, ISSCC 2014)"),
    Assumption("tiles' area estimate (leakage)", "area_estimate", "generated", "asic",
               "the RTL as generated (queues in flip-flops) or queues as register files (SPEC section 7b)"),
    Assumption("memory compression", "memory.compression", "none", "zvc",
               "dense values or zero-value compressed buffers and DRAM (SPEC section 7)"),
    Assumption("tiles", "tiles", lambda tiles: max(1, tiles // 2), lambda tiles: tiles * 2,
               "half to twice the configured tiles (the TensorDash paper's 16, MICRO 2020)"),
)


def _ends(assumption, configured):
    """The assumption's (low, high) values for a configuration whose value is ``configured``."""
    return tuple(end(configured) if callable(end) else configured if end is None else end
                 for end in (assumption.low, assumption.high))


def _table(config, pj, folder):
    """A copy of ``config``'s energy table with DRAM at ``pj`` per 64 bits, written in ``folder``; its path."""
    import yaml

    data = yaml.safe_load(Path(config.energy.path).read_text())
    data["entries"]["dram_64b"]["pj"] = float(pj)
    path = Path(folder) / f"dram_{pj:g}pj.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _ranges(config, folder):
    """Per assumption: its (low, high) ends, the field the sweep sets and, per end, the value it sets (None where the
    end is the configured value: the configuration as it is)."""
    from dashraker.mapping.config import field_value

    ranges = {}
    for assumption in ASSUMPTIONS:
        dram = assumption.key == "dram_pj"
        configured = config.energy.entries["dram_64b"] if dram else field_value(config, assumption.key)
        ends = _ends(assumption, configured)
        values = [None if end == configured else _table(config, end, folder) if dram else end for end in ends]
        ranges[assumption] = (ends, "energy_table" if dram else assumption.key, values)
    return ranges


def _verdicts(point, reference):
    """Each design's verdicts at a mapped point, against the reference design's figures at the same point."""
    ref = point.totals[reference, "all"]
    return {c.design.name: {"time_speedup": ref["time_s"] / point.totals[c.design.name, "all"]["time_s"],
                            "energy_efficiency": ref["energy_pj"] / point.totals[c.design.name, "all"]["energy_pj"]}
            for c in point.configs if c.design.name != reference}


def sensitivity(trace, config=None, steps=None, jobs=None, dask=None, progress=True, area_cache="build/area",
                asic_cache="build/asic", base=None, groups=1):
    """The verdicts of every design on ``trace`` as configured and at each end of each assumption's range; ``base``:
    overrides of every point (the study's area scope); ``groups``: each step's samples mapped as that many batches,
    as the study maps them (a group is a batch of its own: its figures are not the whole batch's). Returns
    ``{"trace", "groups", "reference", "base": {design: {verdict: value}}, "assumptions": [{"name", "key", "low",
    "high", "source", "figures": {design: {verdict: {"low", "high"}}}}]}``."""
    from dashraker.designs import DESIGNS, reference
    from dashraker.mapping.config import apply_overrides, field_value, load_config
    from dashraker.mapping.sweep import sweep

    ref = reference().name
    configured = load_config(config, ref)
    configured = apply_overrides(configured, base) if base else configured
    with tempfile.TemporaryDirectory(prefix="dashraker-sensitivity-") as folder:
        ranges = _ranges(configured, folder)
        axes = {}
        for _, key, values in ranges.values():
            axes.setdefault(key, []).extend(value for value in values if value is not None)
        first = next(iter(axes))
        axes[first].insert(0, field_value(configured, first))  # the configuration as it is
        built = sweep(trace, axes, designs=list(DESIGNS), config=config, steps=steps, jobs=jobs, dask=dask,
                      progress=progress, area_cache=area_cache, asic_cache=asic_cache, base=base,
                      max_points=2 * len(ASSUMPTIONS) + 1, groups=groups)
    by_point = {next(iter(point.overrides.items())): _verdicts(point, ref) for point in built}
    at_base = by_point[first, axes[first][0]]
    result = {"trace": str(trace), "groups": groups, "reference": ref, "base": at_base, "assumptions": []}
    for assumption, ((low, high), key, values) in ranges.items():
        at = [at_base if value is None else by_point[key, value] for value in values]
        figures = {design: {verdict: {"low": at[0][design][verdict], "high": at[1][design][verdict]}
                            for verdict in VERDICTS} for design in at_base}
        result["assumptions"].append({"name": assumption.name, "key": assumption.key, "low": low, "high": high,
                                      "source": assumption.source, "figures": figures})
    return result


def for_study(args, steps, groups):
    """The sensitivity of the study's first trace with the study's options (``args``), at compute scope, its samples
    in the study's ``groups``; a ``CliError`` for what the sweep refuses."""
    from dashraker.errors import CliError
    from dashraker.mapping.silicon import SiliconError
    from dashraker.mapping.sweep import SweepError

    base = {"area_scope": "compute", **({"area_estimate": args.area_estimate} if args.area_estimate else {})}
    try:
        return sensitivity(args.traces[0], args.config, steps, args.jobs, args.dask, not args.no_progress,
                           args.area_cache, args.asic_cache, base, groups)
    except (SweepError, SiliconError, ValueError) as error:
        raise CliError(f"sensitivity: {error}") from None


def _text(value):
    return f"{value:,.4g}" if isinstance(value, float) else str(value)


def report_lines(result):
    """The sensitivity section of the study's report (Markdown)."""
    lines = ["## Sensitivity", "",
             f"Trace `{result['trace']}`. Each deciding assumption moved alone over its range, the rest as configured; "
             f"each verdict against the {result['reference']} design at the same point (equal lanes, compute scope, "
             f"with leakage), each step's samples mapped {_grouping(result['groups'])}, as in the study's "
             "accountings:", "",
             "| assumption | low | high | source |", "|---|---|---|---|"]
    lines += [f"| {a['name']} | {_text(a['low'])} | {_text(a['high'])} | {a['source']} |"
              for a in result["assumptions"]]
    lines += ["", "| design | verdict | configured | assumption | at low | at high | spread |",
              "|---|---|---|---|---|---|---|"]
    for design, base in result["base"].items():
        for verdict, label in VERDICTS.items():
            for a in sorted(result["assumptions"], key=lambda a: -_spread(a, design, verdict)):
                f = a["figures"][design][verdict]
                lines.append(f"| {design} | {label} | {base[verdict]:.2f}x | {a['name']} | {f['low']:.2f}x | "
                             f"{f['high']:.2f}x | {_spread(a, design, verdict):.2f}x |")
    lines += ["", f"![how far each assumption moves each verdict]({PLOTS[0]})", ""]
    return lines


def _grouping(groups):
    return "as one batch" if groups == 1 else f"as {groups} batches of their own"


def _spread(assumption, design, verdict):
    figures = assumption["figures"][design][verdict]
    return abs(figures["high"] - figures["low"])


def plot(path, result):
    """A tornado plot per design and verdict: each assumption's bar from its low end's verdict to its high end's,
    widest on top, about the configured verdict."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dashraker.mapping.palette import design_colour
    from dashraker.mapping.report import save_figures

    designs = list(result["base"])
    figure, axes = plt.subplots(len(designs), len(VERDICTS), figsize=(6.2 * len(VERDICTS), 0.5 * len(
        result["assumptions"]) * len(designs) + 1.5), squeeze=False, layout="constrained")
    for row, design in zip(axes, designs):
        for ax, (verdict, label) in zip(row, VERDICTS.items()):
            ordered = sorted(result["assumptions"], key=lambda a: _spread(a, design, verdict))
            base = result["base"][design][verdict]
            for k, a in enumerate(ordered):
                f = a["figures"][design][verdict]
                for end, hatch in (("low", None), ("high", "//")):
                    ax.barh(k, f[end] - base, left=base, color=design_colour(design), hatch=hatch,
                            alpha=0.9 if end == "low" else 0.5, edgecolor="black", linewidth=0.5,
                            label=f"{end} end of the range" if k == 0 else None)
                # one label per bar, past its right end, so that ends close together do not overprint
                ax.text(max(f["low"], f["high"], base), k, f"  {f['low']:.2f}x / {f['high']:.2f}x", va="center",
                        fontsize=7, ha="left")
            ax.margins(x=0.3)
            ax.axvline(base, color="black", linewidth=0.8)
            ax.axvline(1.0, color="grey", linewidth=0.6, linestyle=":")
            ax.set_yticks(range(len(ordered)), [f"{a['name']}\n{_text(a['low'])} .. {_text(a['high'])}"
                                                for a in ordered], fontsize=7)
            ax.set_xlabel(f"{label} over {result['reference']} (configured: {base:.2f}x)")
            ax.set_title(f"{design}: {label}", fontsize=9)
            ax.ticklabel_format(axis="x", useOffset=False, style="plain")
            ax.legend(fontsize=7)
    save_figures(figure, Path(path))
