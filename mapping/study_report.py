"""``dashraker study``'s report and plot: every sentence and figure read from the study's result (``study.study``).

Nothing here states a fact about the configuration that the result does not carry: the area estimate, the SRAM's
array efficiency, the silicon and energy models, the memory, the sampling each come from what was run, so a sentence
cannot contradict another section.
"""

import platform
import subprocess
import time
from pathlib import Path

from dashraker.designs import DESIGNS
from dashraker.mapping.accountings import AXES, CREDITED, SCENARIOS
from dashraker.mapping.ops import OPS

__all__ = ["report", "plot", "not_modelled", "sampling_lines"]

OP_NAMES = {"fwd": "forward", "bwd_input": "input gradient", "bwd_weight": "weight gradient", "all": "all"}


def _commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _x(value):
    return "-" if value is None else f"{value:.2f}x"


def _interval(figures, metric):
    """The interval of ``figures``' ``metric``, or the value alone (low = high) where it has none."""
    return figures.get("intervals", {}).get(metric) or [figures[metric]] * 2


def _ci(figures, metric):
    """A ratio with its interval: ``1.37x [1.30, 1.44]``."""
    interval = figures.get("intervals", {}).get(metric)
    if interval is None:
        return _x(figures[metric])
    return f"{_x(figures[metric])} [{interval[0]:.2f}, {interval[1]:.2f}]"


def _model(result, model):
    """A silicon model as the report names it."""
    return f"{result['silicon'][model]['library']} library" if model == "liberty" else "transistor estimate"


def _seconds(value):
    """A run time with its unit."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale:
            return f"{value / scale:,.3g} {unit}"
    return f"{value / 1e-9:,.3g} ns"


def _params(params):
    """A design's own parameters as the report names them: ``dot fma, accumulators 1``."""
    return ", ".join(f"{name} {value}" for name, value in params.items())


def _label(key):
    return next(s.label for s in (*SCENARIOS, CREDITED) if s.key == key)


def report(result):
    """The study as Markdown: how it was made, the clocks, the silicon, per trace the papers beside ours and every
    accounting with intervals, per operation, layer and step, the gap axis by axis, and what is not modelled."""
    from dashraker.fpga.area import ESTIMATES
    from dashraker.mapping.config import CLOCK_SOURCES

    ref, models = result["reference"], result["silicon_models"]
    designs = [name for name in result["designs"] if name != ref]
    named = {model: _model(result, model) for model in models}
    lines = ["# Study: the seed papers' comparison points on recorded traces", "",
             f"Made by `dashraker study` at commit {_commit()} on {platform.node()} ({platform.machine()}, "
             f"Python {platform.python_version()}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"{result.get('wall_s', 0):.0f} s wall. Configuration `{result['config']}` (preset "
             f"`{result['preset']}`), energy table `{result['energy_table']}`; reference design: {ref} "
             f"({_params(result['reference_params'])}); silicon: {' and '.join(named.values())}.", "",
             "## Clocks", "",
             "| design | clock | from | its tile's timing | worst register path | reference tile's clock |",
             "|---|---|---|---|---|---|"]
    for name, clock in result["clocks"].items():
        timing = "-" if clock["fmax_mhz"] is None else f"{clock['fmax_mhz']:,.0f} MHz on {clock['library']}"
        lines.append(f"| {name} | {clock['mhz']:,.0f} MHz | {CLOCK_SOURCES[clock['source']]} | {timing} | "
                     f"{clock['path'] or '-'} | {clock['reference_mhz']:,.0f} MHz |")
    estimate = result["area_estimate"]
    lines += ["", "Each design's run time is its cycles at its clock, or its DRAM time where that is longer; leakage "
              "is charged over that time.", "", "## Silicon", ""]
    for model in models:
        silicon = result["silicon"][model]
        lines += [f"### {named[model]}", "",
                  "| design | lanes | tile area | tile leakage | configured tiles | compute-scope area | chip-scope area "
                  "| iso-area tiles (compute / chip) |", "|---|---|---|---|---|---|---|---|"]
        for name, d in silicon["designs"].items():
            lines.append(f"| {name} | {result['designs'][name]['params']['lanes']} | {d['tile_area']:,.0f} | "
                         f"{d['tile_leakage_nw'] / 1e3:,.1f} uW | {result['designs'][name]['tiles']} | "
                         f"{d['area']['compute']:,.0f} | {d['area']['chip']:,.0f} "
                         f"| {silicon['tiles_iso']['compute'][name]} / {silicon['tiles_iso']['chip'][name]} |")
        lines += ["", f"Areas in {silicon['unit']} (SRAM of equal area: the energy table's `silicon` figures); tiles: "
                  f"the {estimate} area estimate ({ESTIMATES[estimate]}).", ""]
    lines += ["Leakage is charged in every accounting on the scope's silicon. \"Configured tiles\" gives each design "
              "its configuration's tiles of its own lanes (the table's lanes column), not equal lanes.", ""]
    for entry in result["traces"]:
        lines += _trace_lines(entry, result, named, designs)
    lines += ["", "## Plots", "", "![speedup and energy efficiency in every accounting](study.png)", "",
              "## What is not modelled", "", *(f"- {sentence}" for sentence in not_modelled(result)), ""]
    return "\n".join(lines)


def not_modelled(result):
    """The report's assumptions, each sentence from the configuration and models the study ran."""
    table = result["table_silicon"]
    sentences = []
    if result["area_estimate"] == "asic":
        sentences.append(f"Memories of at least {table['register_file_min_bits']:,} bits in the tiles are costed as "
                         f"register files of {table['register_file_bit_cell_um2']} um2 per bit cell over an array "
                         f"efficiency of {table['sram_array_efficiency']}, smaller ones as the flip-flops the RTL has.")
    else:
        sentences.append("Every queue and FIFO is costed as the flip-flops the RTL has (the generated area "
                         "estimate); an ASIC would hold the larger ones in register files (`--area-estimate asic`).")
    if any(s.compression == "zvc" for s in (*SCENARIOS, CREDITED)):
        sentences.append("Results (the PEs' sums and the result tensors, which the trace does not hold) move dense "
                         "under ZVC.")
    sentences.append(f"The SRAM's periphery is an assumed array efficiency of {table['sram_array_efficiency']} "
                     "(energy table rule `sram_periphery`), and SRAM leaks per area as logic does.")
    if "transistors" in result["silicon_models"]:
        sentences.append("The transistor estimate is Yosys's generic synthesis, not mapped onto cells.")
    if "liberty" in result["silicon_models"] or any(c["source"] != "configured" for c in result["clocks"].values()):
        sentences.append("The library's tiles and their timing have no wires and an ideal clock.")
    sentences.append(f"Energy comes from {' and '.join(result['energy_models'])} alone; the RTL's own switching "
                     "activity (`dashraker energy`) is not run by the study, so no verdict here is the activity's.")
    if result["group_size"] is not None:
        sentences.append(f"Each step's samples are mapped in groups of {result['group_size']} as batches of their "
                         "own (passes, lanes and rows filled, tile spread and pipeline fill per group), the weights' "
                         "DRAM traffic shared among a step's groups.")
    return sentences


def sampling_lines(entry, result):
    """How the intervals were made, and where the trace holds too few steps or samples for them."""
    from dashraker.mapping.intervals import DRAWS, MIN_UNITS

    level, groups = result["confidence"], entry["groups"]
    grouped = "one batch" if result["group_size"] is None else f"groups of {result['group_size']} sample(s)"
    lines = [f"Intervals: {level:.0%} percentile bootstrap ({DRAWS:,} replicates) over the {len(groups)} recorded "
             f"step(s) and, within each, its samples mapped as {grouped} "
             f"(groups: {', '.join(f'step {s}: {g}' for s, g in groups.items())}): each replicate draws the steps with "
             "replacement, then each drawn step's groups with replacement."]
    few = [f"{len(groups)} step(s)"] if len(groups) < MIN_UNITS else []
    if result["group_size"] is not None and min(groups.values()) < MIN_UNITS:
        few.append(f"{min(groups.values())} group(s) in a step")
    if few:
        lines.append(f"**Too few samples for the claimed precision:** {' and '.join(few)}, under the {MIN_UNITS} a "
                     "percentile bootstrap needs to hold its level: the intervals are too narrow (a single unit gives "
                     "none). Record more steps (`trace record --steps`) or samples (`--samples`, then "
                     "`--group-size`).")
    return lines


def _claim_lines(entry, result, named):
    """The papers' claims beside ours, each judged against our interval under every silicon model."""
    from dashraker.mapping.intervals import samples_to_decide

    models, scenarios = result["silicon_models"], entry["scenarios"]
    lines = ["### The papers beside ours", "",
             f"Each claim is judged against our {result['confidence']:.0%} interval: \"holds\" where all of it "
             "reaches the claim, \"does not hold\" where none of it does, else \"undecided\". Speedups are "
             "judged in cycles, as the papers count them, the speedup in time beside; energy comes from "
             f"{' and '.join(result['energy_models'])}.", "",
             "| design | claim | paper | stated in | accounting | "
             + " | ".join(f"ours ({named[m]}) | verdict" for m in models) + " |",
             "|---|---|---|---|---|" + "---|---|" * len(models)]
    notes = []
    samples = min(entry["samples"].values())
    for name, claim in ((design.name, claim) for design in DESIGNS.values() for claim in design.published):
        if name not in scenarios[models[0]][claim.scenario]:
            continue
        cells = []
        for model in models:
            figures = scenarios[model][claim.scenario][name]
            value = figures[claim.metric]
            interval = _interval(figures, claim.metric)
            verdict = claim.verdict(*interval)
            shown = f"{value:+.1%}" if claim.metric == "area_overhead" else _ci(figures, claim.metric)
            if claim.metric == "speedup":
                shown += f"; in time {_ci(figures, 'time_speedup')}"
            cells.append(f"{shown} | {verdict}")
            needed = samples_to_decide(samples, value, interval, claim.target) if verdict == "undecided" else None
            if needed:
                notes.append(f"- {name}, {claim.claim} ({named[model]}): undecided; about {needed} samples per step "
                             f"would decide it, were their spread as these {samples}'.")
        lines.append(f"| {name} | {claim.claim} | {claim.figure} | {claim.source} | {_label(claim.scenario)} | "
                     f"{' | '.join(cells)} |")
    return lines + ([""] + notes if notes else [])


def _baseline_lines(entry, result, named):
    """The claims at iso-area judged against each dense baseline in turn, with the area budget it sets."""
    from dashraker.mapping.baselines import claims

    ref, models = result["reference"], result["silicon_models"]
    lines = ["### The iso-area claims against each baseline", "",
             "Each dense baseline in turn is the reference: a design with a claim at iso-area gets as many tiles as fit "
             f"in the budget, the area of the {ref}'s configured tiles with that baseline's parameters, and is judged as "
             f"above. The study's own reference: {ref} ({_params(result['reference_params'])}).", "",
             "| design | claim | paper | baseline | accounting | silicon | budget | tiles | ours | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, claim, scenario in claims():
        for baseline, about in result["baselines"].items():
            if about["refused"]:
                lines.append(f"| {name} | {claim.claim} | {claim.figure} | {baseline} ({_params(about['params'])}) "
                             f"| - | - | - | - | not judged: {about['refused']} | - |")
                continue
            for model in models:
                f = entry["baselines"][baseline][model][scenario.key]
                lines.append(f"| {name} | {claim.claim} | {claim.figure} | {baseline} ({_params(about['params'])}) | "
                             f"{scenario.label} | {named[model]} | {f[ref]['area']:,.0f} "
                             f"({result['silicon'][model]['unit']}) | {f[name]['tiles']} | {_ci(f[name], claim.metric)} "
                             f"| {claim.verdict(*_interval(f[name], claim.metric))} |")
    return lines


def _trace_lines(entry, result, named, designs):
    """One trace's sections of the report."""
    from dashraker.trace.store import unrecorded_message

    models, scenarios = result["silicon_models"], entry["scenarios"]
    steps = ", ".join(f"{step} ({entry['samples'][step]} samples)" for step in entry["samples"])
    unrecorded = [(layer["name"], layer["type"]) for layer in entry.get("unrecorded_layers") or ()]
    whole = [f"Not the whole network: {unrecorded_message(unrecorded)}; every figure below is of the recorded layers "
             "alone.", ""] if unrecorded else []
    lines = [f"## {_title(entry)}", "", f"Trace `{entry['trace']}`, steps {steps}.", "", *whole,
             *sampling_lines(entry, result), "", *_claim_lines(entry, result, named), "",
             *_baseline_lines(entry, result, named), "",
             "### Every accounting", "",
             "| accounting | silicon | design | tiles | time | speedup (cycles) | speedup (time) | energy eff. | "
             "without leakage | compute energy eff. | perf/area | clocking share | leakage share |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for scenario in (*SCENARIOS, CREDITED):
        for name in designs:
            for model in models:
                f = scenarios[model][scenario.key][name]
                lines.append(f"| {scenario.label} | {named[model]} | {name} | {f['tiles']} | {_seconds(f['time_s'])} | "
                             f"{_ci(f, 'speedup')} | {_ci(f, 'time_speedup')} | {_ci(f, 'energy_efficiency')} | "
                             f"{_ci(f, 'energy_efficiency_no_leakage')} | {_ci(f, 'core_energy_efficiency')} | "
                             f"{_ci(f, 'throughput_per_area')} | {f['clock_pj'] / f['energy_pj']:.1%} | "
                             f"{f['leakage_pj'] / f['energy_pj']:.1%} |")
    lines += _part_lines(entry, result, named, designs) + _gap_lines(entry, result, named, designs)
    return lines + _breakdown_lines(entry)


def _part_lines(entry, result, named, designs):
    """Per operation and per step in every accounting, per layer in the first."""
    models, scenarios = result["silicon_models"], entry["scenarios"]
    head = "| speedup (cycles) | speedup (time) | energy eff. |"
    lines = []
    tables = (("ops", "Per operation", "operation", OP_NAMES.__getitem__), ("steps", "Per step", "step", str))
    for key, title, column, label in tables:
        lines += ["", f"### {title}", "", f"| accounting | silicon | design | {column} {head}",
                  "|---|---|---|---|---|---|---|"]
        for scenario in (*SCENARIOS, CREDITED):
            for name in designs:
                for model in models:
                    for part, f in scenarios[model][scenario.key][name][key].items():
                        lines.append(f"| {scenario.label} | {named[model]} | {name} | {label(part)} | "
                                     f"{_ci(f, 'speedup')} | {_ci(f, 'time_speedup')} | {_ci(f, 'energy_efficiency')} |")
    first, model = SCENARIOS[0], models[0]
    lines += ["", f"### Per layer ({first.label}, {named[model]})", "",
              f"| layer | operation | design {head}", "|---|---|---|---|---|---|"]
    layers = scenarios[model][first.key][designs[0]]["layers"]
    for layer in layers:
        for op in (*OPS, "all"):
            for name in designs:
                f = scenarios[model][first.key][name]["layers"][layer].get(op)
                if f is not None:
                    lines.append(f"| {layer} | {OP_NAMES[op]} | {name} | {_ci(f, 'speedup')} | "
                                 f"{_ci(f, 'time_speedup')} | {_ci(f, 'energy_efficiency')} |")
    return lines


def _gap_lines(entry, result, named, designs):
    """How each accounting choice moves each design's verdict."""
    models, scenarios = result["silicon_models"], entry["scenarios"]
    lines = ["", "### The gap, axis by axis", "",
             "How each accounting choice moves each design's verdict (speedup and energy efficiency over the "
             "reference in the same accounting):", "",
             "| design | silicon | axis | speedup (cycles) | speedup (time) | energy efficiency |", "|---|---|---|---|---|---|"]
    for name in designs:
        for model in models:
            figures = scenarios[model]
            for axis, before, after in AXES:
                a, b = figures[before][name], figures[after][name]
                if axis.startswith("leakage"):
                    moved = f"{_x(a['energy_efficiency_no_leakage'])} -> {_x(b['energy_efficiency'])}"
                    lines.append(f"| {name} | {named[model]} | {axis} | {_x(a['speedup'])} (unchanged) | "
                                 f"{_x(a['time_speedup'])} (unchanged) | {moved} |")
                else:
                    lines.append(f"| {name} | {named[model]} | {axis} | {_x(a['speedup'])} -> {_x(b['speedup'])} | "
                                 f"{_x(a['time_speedup'])} -> {_x(b['time_speedup'])} | "
                                 f"{_x(a['energy_efficiency'])} -> {_x(b['energy_efficiency'])} |")
        if len(models) == 2:
            for key in ("equal", "iso", "iso_chip"):
                a, b = (scenarios[model][key][name] for model in models)
                lines.append(f"| {name} | {named[models[0]]} -> {named[models[1]]} | silicon model ({_label(key)}) | "
                             f"{_x(a['speedup'])} -> {_x(b['speedup'])} | "
                             f"{_x(a['time_speedup'])} -> {_x(b['time_speedup'])} | "
                             f"{_x(a['energy_efficiency'])} -> {_x(b['energy_efficiency'])} |")
    return lines


def _breakdown_lines(entry):
    """Where a term-serial design's cycles go, per operation, at its configured tiles."""
    lines = []
    for name, ops in entry["cycle_breakdown"].items():
        lines += ["", f"### Where {name}'s cycles go (configured tiles)", "",
                  "Per operation, cycles per tile at the mean in-bound term count of a lane, the extra of each "
                  "PE's maximum over its lanes and of the tile's lockstep, the busiest tile's excess and the fill "
                  "(adding up to the cycles), and the terms skipped out of bounds:", "",
                  "| operation | mean terms | lane maximum | lockstep | tile imbalance | fill | cycles | skipped terms |",
                  "|---|---|---|---|---|---|---|---|"]
        for op, b in ops.items():
            total = b["mean_terms"] + b["lane_max"] + b["lockstep"] + b["tile_imbalance"] + b["fill"]
            lines.append(f"| {OP_NAMES[op]} | {b['mean_terms']:,.0f} | {b['lane_max']:,.0f} | {b['lockstep']:,.0f} | "
                         f"{b['tile_imbalance']:,.0f} | {b['fill']:,} | {total:,.0f} | {b['skipped_terms']:,} |")
    return lines


def _title(entry):
    """What a trace is, from its manifest: the network, its data and the steps."""
    steps = ", ".join(map(str, entry["samples"]))
    return f"{entry['model']} on {entry['data']}, step{'s' if len(entry['samples']) > 1 else ''} {steps}"


PANELS = (("speedup", "speedup (cycles)"), ("time_speedup", "speedup (time)"), ("energy_efficiency", "energy efficiency"))


def plot(path, result):
    """Speedup in cycles and in time and energy efficiency of each design in each accounting under each silicon
    model, with their intervals as error bars, their values and the papers' claims drawn (one row of panels per
    trace); a PNG at ``path`` and an SVG beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dashraker.mapping.palette import design_colour
    from dashraker.mapping.report import save_figures

    traces = result["traces"]
    figure, axes = plt.subplots(len(traces), len(PANELS), figsize=(18, 5 * len(traces)), squeeze=False,
                                layout="constrained")
    for row, entry in zip(axes, traces):
        for ax, (metric, title) in zip(row, PANELS):
            _panel(ax, entry, result, metric, design_colour)
            ax.set_title(f"{_title(entry)}: {title}", fontsize=9)
    save_figures(figure, path)


def _panel(ax, entry, result, metric, colour):
    """One metric's bars: per accounting (x), per design and silicon model, error bars and claims."""
    ref, models = result["reference"], result["silicon_models"]
    scenarios = (*SCENARIOS, CREDITED)
    bars = [(name, model) for name in result["designs"] if name != ref for model in models]
    width = 0.8 / max(len(bars), 1)
    for k, (name, model) in enumerate(bars):
        figures = [entry["scenarios"][model][s.key][name] for s in scenarios]
        xs = [i + (k - (len(bars) - 1) / 2) * width for i in range(len(scenarios))]
        values = [f[metric] for f in figures]
        low = [v - _interval(f, metric)[0] for v, f in zip(values, figures)]
        high = [_interval(f, metric)[1] - v for v, f in zip(values, figures)]
        label = f"{name} ({_model(result, model)})" if len(models) > 1 else name
        ax.bar(xs, values, width, yerr=[low, high], capsize=2, label=label, color=colour(name),
               hatch="//" if models.index(model) else None, edgecolor="white", linewidth=0.5)
        for x, v, h in zip(xs, values, high):
            ax.text(x, v + h, f"{v:.2f}", ha="center", va="bottom", fontsize=6, rotation=90)
        for claim in DESIGNS[name].published:
            if claim.metric == metric and models.index(model) == 0:
                i = [s.key for s in scenarios].index(claim.scenario)
                ax.hlines(claim.target, i - 0.45, i + 0.45, colors=colour(name), linestyles="--", linewidth=1.2)
                ax.text(i + 0.45, claim.target, f" paper: {claim.figure}", color=colour(name), fontsize=6,
                        va="center")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(scenarios)), [s.label.replace(", ", "\n") for s in scenarios], fontsize=6)
    ax.set_ylabel(f"over {ref} ({result['confidence']:.0%} intervals)")
    ax.legend(fontsize=7)
