"""FPGA reports: Yosys statistics and nextpnr's JSON report read into resources, Fmax and critical path."""

import json

from dashraker.outputs import atomic_write
from dashraker.trace.store import save_json

__all__ = ["flow_report", "synthesis_resources", "hierarchy_breakdown", "stat_modules", "module_totals", "module_instances",
           "fit_problems", "parse_nextpnr_report", "markdown", "summary", "write_report", "ReportError", "RESOURCES"]

RESOURCES = ("lut", "ff", "dsp", "bram")


class ReportError(ValueError):
    """A tool's report lacks what the flow reads from it; the message names the field."""


def _load(text, what):
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ReportError(f"{what}: not JSON ({error})") from None


def _field(obj, key, what):
    if not isinstance(obj, dict) or key not in obj:
        raise ReportError(f"{what}: no field {key!r}")
    return obj[key]


def _name(cell_type):
    return cell_type.lstrip("\\")


def stat_modules(stat):
    """Module name -> {cell type: count} from ``stat -json``."""
    modules = _field(stat, "modules", "Yosys statistics")
    return {_name(name): {_name(t): n for t, n in _field(body, "num_cells_by_type", f"Yosys module {name}").items()}
            for name, body in modules.items()}


def _own_resources(cells, family):
    """Resources of a module's own primitive cells (submodule instances excluded)."""
    totals = dict.fromkeys((*RESOURCES, "lutram"), 0)
    for cell_type, count in cells.items():
        if cell_type in family.cells:
            resource, weight = family.cells[cell_type]
            if resource in totals:
                totals[resource] += weight * count
        elif family.ff_prefix and cell_type.startswith(family.ff_prefix):
            totals["ff"] += count
    return totals


def _add(total, part, times=1):
    for key, value in part.items():
        total[key] = total.get(key, 0) + times * value


def module_totals(modules, own):
    """Module name -> its figures including every submodule instance, recursively; ``own(cells)`` gives a
    module's own figures (a dict) from its cell counts."""
    totals = {}

    def total(name):
        if name not in totals:
            cells = modules[name]
            result = own(cells)
            for child, count in cells.items():
                if child in modules:
                    _add(result, total(child), count)
            totals[name] = result
        return totals[name]

    for name in modules:
        total(name)
    return totals


def synthesis_resources(stat_text, family, top):
    """The whole design's resources after synthesis (LUT4 equivalents, flip-flops, DSP, RAM) and cell counts."""
    modules = stat_modules(_load(stat_text, "Yosys statistics"))
    if top not in modules:
        raise ReportError(f"Yosys statistics: no module {top!r}")
    cells = {}
    for name, count in module_instances(modules, top):
        _add(cells, {t: n for t, n in modules[name].items() if t not in modules}, count)
    totals = module_totals(modules, lambda cells: _own_resources(cells, family))
    return {**totals[top], "cells": dict(sorted(cells.items()))}


def module_instances(modules, top):
    """(module, instance count) for the top and every module instantiated below it."""
    counts = {top: 1}
    order = [top]
    for name in order:
        for child, count in modules[name].items():
            if child in modules:
                if child not in counts:
                    order.append(child)
                    counts[child] = 0
                counts[child] += count * counts[name]
    return [(name, counts[name]) for name in order]


def hierarchy_breakdown(stat_text, family, top):
    """One row per kept module below the top: its instance path, resources in total and of its own logic.

    Amaranth names each module by its instance path (``top.design.pe0_0``), so the
    path below the top is the module name without the top's prefix.
    """
    modules = stat_modules(_load(stat_text, "Yosys statistics"))
    totals = module_totals(modules, lambda cells: _own_resources(cells, family))
    rows = []
    for name, _ in module_instances(modules, top):
        if name == top:
            continue
        own = _own_resources(modules[name], family)
        rows.append({"instance": name.removeprefix(top + "."), **totals[name],
                     **{f"own_{key}": value for key, value in own.items()}})
    return rows


def fit_problems(used, capacity):
    """Lines naming every resource the design needs more of than the device has."""
    names = {"lut": "LUTs", "ff": "flip-flops", "dsp": "DSP blocks", "bram": "block RAMs", "io": "pins"}
    return [f"{used[key]:,} {names[key]} needed, {capacity[key]:,} available"
            for key in names if key in used and used[key] > capacity[key]]


def _instance_of(name, instances):
    """The longest known instance path that prefixes a netlist name (nextpnr keeps Yosys's flattened names)."""
    name = _name(name)
    best = ""
    for path in instances:
        if len(path) > len(best) and name.startswith(path + "."):
            best = path
    return best


def _path_delay(path, what):
    return sum(_field(step, "delay", what) for step in _field(path, "path", what))


def _critical_path(paths, instances, what):
    """Summary of the slowest register-to-register path (any path if there is none).

    Endpoints, total delay split into logic and routing, the logic levels, and the
    instances the path's nets belong to in order: where the path lies in the design.
    """
    clocked = [p for p in paths if "<async>" not in (p.get("from", ""), p.get("to", ""))]
    candidates = clocked or paths
    if not candidates:
        return None
    worst = max(candidates, key=lambda p: _path_delay(p, what))
    steps = _field(worst, "path", what)
    routing = sum(s["delay"] for s in steps if s.get("type") == "routing")
    total = _path_delay(worst, what)
    crossed = []
    for step in steps:
        if "net" in step and not step["net"].startswith("$"):  # "$nextpnr_..." nets are the tool's own
            instance = _instance_of(step["net"], instances) or "(top)"
            if not crossed or crossed[-1] != instance:
                crossed.append(instance)
    first, last = steps[0].get("from", {}), steps[-1].get("to", {})
    return {
        "from": f"{_name(first.get('cell', '?'))}.{first.get('port', '?')}",
        "to": f"{_name(last.get('cell', '?'))}.{last.get('port', '?')}",
        "delay_ns": round(total, 3),
        "logic_ns": round(total - routing, 3),
        "routing_ns": round(routing, 3),
        "logic_levels": sum(1 for s in steps if s.get("type") == "logic"),
        "instances": crossed,
        "start_net": next((_name(s["net"]) for s in steps if "net" in s), None),
        "end_net": next((_name(s["net"]) for s in reversed(steps) if "net" in s), None),
    }


def parse_nextpnr_report(text, family, instances=()):
    """Utilisation (used/available per resource), Fmax of the clock and the critical path from ``--report``."""
    what = "nextpnr report"
    report = _load(text, what)
    utilization = _field(report, "utilization", what)
    utilisation = {}
    for resource, bel in family.bels.items():
        # nextpnr lists only the bel types the part has (no ICESTORM_DSP on an HX8K)
        entry = utilization.get(bel, {"used": 0, "available": 0})
        utilisation[resource] = {"used": _field(entry, "used", f"{what} {bel}"),
                                 "available": _field(entry, "available", f"{what} {bel}")}
    clocks = _field(report, "fmax", what)
    achieved = [_field(clock, "achieved", f"{what} fmax {name}") for name, clock in clocks.items()]
    return {
        "utilisation": utilisation,
        "fmax_mhz": round(min(achieved), 2) if achieved else None,
        "clocks": {name: clock for name, clock in clocks.items()},
        "critical_path": _critical_path(report.get("critical_paths", []), instances, what),
    }


def _percent(used, available):
    return f"{100 * used / available:.1f}%" if available else "-"


def _seeds_note(report):
    """How the Fmax of a run of several placement seeds was chosen (nothing for one seed)."""
    count = len(report["seeds"])
    if count == 1:
        return ""
    return (f"seed {report['seed']}: the median of {count} seeds, "
            f"{report['fmax_min_mhz']:.1f} to {report['fmax_max_mhz']:.1f} MHz")


def summary(report):
    """A few lines for the terminal: utilisation, Fmax against the target, where the critical path is."""
    lines = [f"{report['design']} on {report['device']}:"]
    for resource, entry in report["utilisation"].items():
        lines.append(f"  {resource:<5} {entry['used']:>8,} / {entry['available']:<8,} "
                     f"{_percent(entry['used'], entry['available']):>7}")
    fmax = report["fmax_mhz"]
    verdict = "met" if report["timing_met"] else "NOT met"
    note = _seeds_note(report)
    lines.append(f"  Fmax  {fmax:.1f} MHz (target {report['clock_mhz']:g} MHz: {verdict}){'; ' + note if note else ''}"
                 if fmax else "  Fmax  -")
    path = report["critical_path"]
    if path:
        lines.append(f"  critical path {path['delay_ns']:.2f} ns ({path['logic_levels']} logic levels, "
                     f"{path['routing_ns']:.2f} ns routing) through {' -> '.join(path['instances'])}")
    return "\n".join(lines)


def _nextpnr_note(report):
    """How nextpnr placed and routed: its router and the timing options beyond its defaults."""
    options = [f"placer timing weight {report['timing_weight']}"] if report.get("timing_weight") else []
    options += ["timing-driven rip-up"] if report.get("timing_ripup") else []
    return f"Placed and routed by nextpnr with {report['router']}{''.join(', ' + option for option in options)}."


def markdown(report):
    """The report as Markdown: resources, timing, critical path, per-instance breakdown, stage times."""
    wrapper = report["wrapper"]
    lines = [
        f"# FPGA report: {report['design']} on {report['device']}",
        "",
        "Parameters: " + ", ".join(f"`{k}={v}`" for k, v in report["params"].items()),
        "",
        f"Top level: {wrapper['pins']} pins, {wrapper['word_bits']}-bit words; a step is {wrapper['step_bits']} bits "
        f"({wrapper['step_words']} words), a result {wrapper['result_bits']} bits ({wrapper['result_words']} words); "
        + (f"the clock on pin {report['clock_pin']}." if report.get("clock_pin") else "every pin placed by nextpnr."),
        "",
        "| resource | used | available | utilisation | after synthesis |",
        "|---|---:|---:|---:|---:|",
    ]
    for resource, entry in report["utilisation"].items():
        synthesised = report["synthesis"].get(resource, "")
        lines.append(f"| {resource} | {entry['used']:,} | {entry['available']:,} | "
                     f"{_percent(entry['used'], entry['available'])} | {synthesised} |")
    fmax = report["fmax_mhz"]
    note = _seeds_note(report)
    lines += ["", f"**Fmax {fmax:.2f} MHz**{f' ({note})' if note else ''} against a target of "
                  f"{report['clock_mhz']:g} MHz "
                  f"({'met' if report['timing_met'] else 'not met'})." if fmax else "No clocked path.",
              "", _nextpnr_note(report), ""]
    if len(report["seeds"]) > 1:
        lines += ["| placement seed | Fmax MHz | LUTs | FFs | critical path ns | place and route s |",
                  "|---:|---:|---:|---:|---:|---:|"]
        for run in report["seeds"]:
            path = run["critical_path"]
            lines.append(f"| {run['seed']} | {run['fmax_mhz'] or 0:.2f} | {run['utilisation']['lut']['used']:,} "
                         f"| {run['utilisation']['ff']['used']:,} | {path['delay_ns'] if path else '-'} "
                         f"| {run['place_route_s']:.1f} |")
        lines += ["", "The utilisation above and the critical path below are the median seed's.", ""]
    path = report["critical_path"]
    if path:
        lines += [
            f"Critical path: {path['delay_ns']:.2f} ns = {path['logic_ns']:.2f} ns logic "
            f"({path['logic_levels']} levels) + {path['routing_ns']:.2f} ns routing, "
            f"from `{path['from']}` to `{path['to']}`.",
            "",
            "Instances crossed: " + " -> ".join(f"`{i}`" for i in path["instances"]),
            "",
        ]
    lines += ["| instance | LUTs | FFs | DSP | BRAM | own LUTs |", "|---|---:|---:|---:|---:|---:|"]
    for row in report["hierarchy"]:
        lines.append(f"| `{row['instance']}` | {row['lut']:,} | {row['ff']:,} | {row['dsp']} | {row['bram']} | "
                     f"{row['own_lut']:,} |")
    lines += ["", "Stage times: " + ", ".join(f"{k} {v:.1f} s" for k, v in report["stages_s"].items()), ""]
    return "\n".join(lines)


def flow_report(design, params, options, clock_pin, wrapper, resources, hierarchy, runs, median, timings):
    """The report of a flow run: the options it ran with, the synthesis, every seed's run and, as the run's, the
    median seed's utilisation, Fmax and critical path, with the lowest and highest Fmax beside it."""
    fmaxes = [run["fmax_mhz"] for run in runs if run["fmax_mhz"] is not None]
    return {
        "design": design,
        "params": params or {},
        "device": options.target.name,
        "clock_mhz": options.clock,
        "router": options.router,
        "timing_weight": options.timing_weight,
        "timing_ripup": options.timing_ripup,
        "clock_pin": clock_pin,
        "keep_depth": options.keep_depth,
        "wrapper": wrapper,
        "synthesis": resources,
        "seed": median["seed"],
        "utilisation": median["utilisation"],
        "fmax_mhz": median["fmax_mhz"],
        "fmax_min_mhz": min(fmaxes, default=None),
        "fmax_max_mhz": max(fmaxes, default=None),
        "timing_met": median["timing_met"],
        "critical_path": median["critical_path"],
        "seeds": runs,
        "hierarchy": hierarchy,
        "stages_s": timings,
        "files": {"verilog": "top.v", "netlist": "netlist.json"},
    }


def write_report(out, report):
    """``report.json`` and ``report.md`` in the folder ``out``, each written atomically."""
    save_json(out / "report.json", report)
    text = markdown(report)
    atomic_write(out / "report.md", lambda file: file.write(text.encode()))
