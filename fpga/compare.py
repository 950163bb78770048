"""``dashraker fpga compare``: every design's tile at equal lanes, area and throughput per LUT."""

import io
import itertools
import json
import re
from pathlib import Path

from dashraker.errors import CliError
from dashraker.outputs import path_argument

__all__ = ["register", "breakdown", "throughput", "read_map", "speedup_sources", "compare_table"]


def breakdown(report):
    """LUTs of the tile and its parts from a flow report's hierarchy (sums over every instance of a part).

    The parts are the design's ``area_parts`` (every registered design's part names
    appear, 0 where the design has none). Where a PE holds a ``mac`` datapath (TensorDash),
    ``muxes`` is the rest of the PE (operand muxes and their registers) and
    ``sparsity`` the muxes plus the staging ``window``.
    """
    from dashraker.designs import DESIGNS

    rows = {row["instance"]: row for row in report["hierarchy"]}
    if "design" not in rows:
        raise ValueError(f"report of {report['design']}: no 'design' instance in its hierarchy")
    own = DESIGNS[report["design"]].area_parts if report["design"] in DESIGNS else {}
    names = dict.fromkeys(name for design in DESIGNS.values() for name in design.area_parts)
    parts = {name: sum(row["lut"] for path, row in rows.items() if re.fullmatch(rf"design\.{own[name]}", path))
             if name in own else 0 for name in names}
    pes = sum(1 for path in rows if "pe" in own and re.fullmatch(rf"design\.{own['pe']}", path))
    tile = rows["design"]
    result = {"tile_lut": tile["lut"], "tile_ff": tile["ff"], "tile_dsp": tile["dsp"], "tile_bram": tile["bram"],
              "pes": pes, "pe_lut": parts["pe"] / pes if pes else 0, **{f"{k}_lut": v for k, v in parts.items()}}
    if parts.get("mac"):
        muxes = parts["pe"] - parts["mac"]
        result["muxes_lut"] = muxes
        result["sparsity_lut"] = muxes + parts["window"]
        result["muxes_of_pe"] = muxes / parts["pe"]
        result["sparsity_of_tile"] = (muxes + parts["window"]) / tile["lut"]
    return result


def throughput(macs_per_cycle, fmax_mhz, luts):
    """MACs per cycle per 1000 LUTs and GMAC/s per 1000 LUTs at ``fmax_mhz``."""
    per_cycle = 1000 * macs_per_cycle / luts
    return per_cycle, per_cycle * fmax_mhz / 1000


def read_map(path):
    """A mapper's ``map.json``, read once: the speedup over the dense baseline per design, all operations
    together, and the parameters each design was mapped with (its ``configs``; {} for none)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise CliError(f"--map {path}: cannot read the mapper's JSON ({error})") from None
    totals = data.get("totals") if isinstance(data, dict) else None
    if not isinstance(totals, list):
        raise CliError(f"--map {path}: no 'totals' list (write it with 'dashraker map')")
    found = {}
    for entry in totals:
        if isinstance(entry, dict) and entry.get("op") == "all" and "speedup" in entry and "design" in entry:
            found[entry["design"]] = float(entry["speedup"])
    if not found:
        raise CliError(f"--map {path}: 'totals' has no entry with op 'all' and a speedup")
    configs = data.get("configs")
    return found, {config["design"]: config for config in configs or ()
                   if isinstance(config, dict) and "design" in config}


def _parse_speedups(values):
    from dashraker.designs import DESIGNS

    found = {}
    for value in values or ():
        name, _, number = value.partition("=")
        if name not in DESIGNS:
            raise CliError(f"--speedup {value!r}: unknown design {name!r}; choose from {', '.join(DESIGNS)}")
        try:
            found[name] = float(number)
        except ValueError:
            raise CliError(f"--speedup {value!r}: expected DESIGN=NUMBER, e.g. tensordash=1.8") from None
        if not found[name] > 0:
            raise CliError(f"--speedup {value!r}: the speedup must be positive")
    return found


def _number(value, form):
    return "-" if value is None else format(value, form)


def speedup_sources(maps, given):
    """Speedups over the dense baseline per design, by source: ``"map"`` (the mappers' ``maps``, each as
    ``read_map`` gives it, for each design the first that has it) and ``"--speedup"`` (the ``DESIGN=X`` values of
    ``given`` over the mappers'), each where given, else ``"dense"`` (the baseline's alone)."""
    from dashraker.designs import reference

    dense = {reference().name: 1.0}
    mapped = None
    for speedups, _ in maps:
        mapped = {**speedups, **(mapped or {})}
    given = _parse_speedups(given)
    sources = {}
    if mapped is not None:
        sources["map"] = {**dense, **mapped}
    if given:
        sources["--speedup"] = {**dense, **(mapped or {}), **given}
    return sources or {"dense": dense}


def _map_speedup(maps, design, params, chosen):
    """The whole-step speedup of the first of ``maps`` (``read_map``'s speedups and parameters) whose ``design`` was mapped with the parameters ``--set`` gives this row
    (``chosen``; a map that does not name one was mapped with its default); None where no map was. The dense
    baseline's is 1.0 whatever its parameters."""
    from dashraker.designs import reference

    if design is reference():
        return 1.0
    defaults = design.params()
    for speedups, parameters in maps:
        config = parameters.get(design.name, {})
        if design.name in speedups and all(config.get(name, defaults[name]) == params[name] for name in chosen):
            return speedups[design.name]
    return None


def _throughputs(rows, sources):
    """Each row's throughput per LUT at each source's speedups (the map's: the row's own, ``_map_speedup``), also as
    a multiple of the baseline's at its format (the first baseline row of that format: its defaults unless ``--set``
    gave it others)."""
    from dashraker.designs import reference

    for row in rows:
        row["throughput"] = {}
        for source, speedups in sources.items():
            speedup = row["map_speedup"] if source == "map" else speedups.get(row["design"])
            macs = row["rows"] * row["cols"] * row["lanes"] * speedup if speedup is not None else None
            per_cycle, per_second = throughput(macs, row["fmax_mhz"], row["tile_lut"]) if macs else (None, None)
            row["throughput"][source] = {"speedup": speedup, "macs_per_cycle": macs,
                                         "macs_per_cycle_per_klut": per_cycle, "gmacs_per_klut": per_second}
    for row in rows:
        base = next((other for other in rows if other["design"] == reference().name
                     and other["dtype"] == row["dtype"]), None)
        for source, figures in row["throughput"].items():
            base_figure = base["throughput"][source]["gmacs_per_klut"] if base else None
            figures["gmacs_per_klut_vs_baseline"] = (figures["gmacs_per_klut"] / base_figure
                                                     if figures["gmacs_per_klut"] and base_figure else None)


def compare_table(rows):
    """The comparison as two Markdown tables: area and Fmax; throughput per LUT at each set of speedups.

    The second table has four columns per set of speedups (``speedup_sources``): the speedup, MACs
    per cycle and GMAC/s per 1000 LUTs, and GMAC/s per 1000 LUTs as a multiple of the dense
    baseline's at the same format, lanes and tile.
    """
    header = ("| design | dtype | lanes | tile | tile LUTs | FFs | DSP | PE LUTs | TD muxes / PE "
              "| TD muxes+window / tile | Fmax MHz | Fmax min-max | seeds |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {_label(r['design'], r.get('variant'))} | {r['dtype']} | {r['lanes']} | {r['rows']}x{r['cols']} "
            f"| {r['tile_lut']:,} "
            f"| {r['tile_ff']:,} | {r['tile_dsp']} | {r['pe_lut']:,.0f} | {_number(r.get('muxes_of_pe'), '.1%')} "
            f"| {_number(r.get('sparsity_of_tile'), '.1%')} | {_number(r['fmax_mhz'], '.1f')} "
            f"| {_number(r['fmax_min_mhz'], '.1f')}-{_number(r['fmax_max_mhz'], '.1f')} | {len(r['seeds'])} |")
    sources = list(rows[0]["throughput"])
    header = "| design | dtype | lanes | tile | Fmax MHz |" + "".join(
        f" speedup ({source}) | MAC/cycle/kLUT | GMAC/s/kLUT | vs baseline |" for source in sources)
    lines += ["", header, "|" + "---|" * (header.count("|") - 1)]
    for r in rows:
        line = (f"| {_label(r['design'], r.get('variant'))} | {r['dtype']} | {r['lanes']} | {r['rows']}x{r['cols']} "
                f"| {_number(r['fmax_mhz'], '.1f')} |")
        for source in sources:
            t = r["throughput"][source]
            line += (f" {_number(t['speedup'], '.2f')} | {_number(t['macs_per_cycle_per_klut'], '.2f')} "
                     f"| {_number(t['gmacs_per_klut'], '.3f')} | {_number(t['gmacs_per_klut_vs_baseline'], '.2f')} |")
        lines.append(line)
    return "\n".join(lines)


def _label(design, variant):
    """A row's name: its design, with the parameters ``--set`` gives it where it has any."""
    return f"{design} ({variant})" if variant else design


def plot(path, rows):
    """Stacked LUTs per configuration (MAC datapath, TensorDash muxes and window, rest) and throughput per kLUT."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dashraker.outputs import atomic_write

    labels = [f"{_label(r['design'], r.get('variant'))}\n{r['dtype']}" for r in rows]
    stacks = {
        "PEs (TensorDash: MAC datapath)": [r["mac_lut"] or r["pe_lut"] * r["pes"] for r in rows],
        "TensorDash operand muxes": [r.get("muxes_lut", 0) for r in rows],
        "TensorDash staging window + schedulers": [r["window_lut"] for r in rows],
        "FPRaker encoders + rounders": [r["encoder_lut"] + r["rounder_lut"] for r in rows],
    }
    listed = [sum(values) for values in zip(*stacks.values())]
    stacks["rest of the tile"] = [max(r["tile_lut"] - done, 0) for r, done in zip(rows, listed)]
    figure, (area, speed) = plt.subplots(1, 2, figsize=(12, 4.5))
    bottom = [0] * len(rows)
    for name, values in stacks.items():
        if any(values):
            area.bar(labels, values, bottom=bottom, label=name)
            bottom = [b + v for b, v in zip(bottom, values)]
    area.set_ylabel("LUT4s (ECP5 LUT equivalents)")
    area.set_title(f"tile area at {rows[0]['lanes']} lanes")
    area.legend(fontsize=7)
    sources = list(rows[0]["throughput"])
    width = 0.8 / len(sources)
    for index, source in enumerate(sources):
        values = [r["throughput"][source]["gmacs_per_klut"] or 0 for r in rows]
        speed.bar([i + (index - (len(sources) - 1) / 2) * width for i in range(len(rows))], values, width,
                  label=f"speedups: {source}")
    speed.set_xticks(range(len(rows)), labels)
    speed.set_ylabel("GMAC/s per 1000 LUTs at the median Fmax")
    speed.set_title("throughput per LUT")
    speed.legend(fontsize=7)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    plt.close(figure)
    atomic_write(path, lambda file: file.write(buffer.getvalue()))


def register(designs):
    from dashraker.designs import DESIGNS
    from dashraker.fpga.options import add_flow_arguments

    parser = designs.add_parser(
        "compare", help="compare the designs' tiles at equal lanes",
        description="Run each design at the same lanes (and tile size) through the FPGA flow, for bf16 and fp32 "
        "where the design takes it, and tabulate LUTs, the TensorDash muxes and scheduler as fractions of "
        "the PE and tile, Fmax (the median of --seeds placement seeds) and throughput per LUT at the mapper's "
        "speedups and at those --speedup gives, beside the baseline's (compare.json, compare.md, compare.png). "
        "Finished configurations and seeds with the same parameters are reused.")
    parser.add_argument("--lanes", type=int, default=16, help="lanes N of every design (default 16)")
    parser.add_argument("--rows", type=int, default=1, help="PE rows of every tile (default 1)")
    parser.add_argument("--cols", type=int, default=1, help="PE columns of every tile (default 1)")
    parser.add_argument("--dtypes", default="bf16,fp32", help="operand formats (default bf16,fp32)")
    parser.add_argument("--designs", default=",".join(DESIGNS), help=f"designs to compare (default {','.join(DESIGNS)})")
    parser.add_argument("--map", type=path_argument, action="append",
                        help="a mapper's map.json: speedups over the baseline per design; repeated, each row takes "
                             "the first map of its design mapped with the parameters --set gives the row")
    parser.add_argument("--speedup", action="append", metavar="DESIGN=X",
                        help="a design's speedup over the baseline, e.g. tensordash=2: throughput columns of their own, "
                             "beside those at --map's speedups")
    parser.add_argument("--set", action="append", metavar="DESIGN.KEY=VALUE",
                        help="a design parameter other than its default, by its flag's name, e.g. "
                             "tensordash.scheduler=separable1 or baseline.dot=fused; repeated, every combination of "
                             "the values given is a row of its own")
    add_flow_arguments(parser, "folder for one flow folder per configuration and compare.json/.md/.png")
    parser.set_defaults(func=run)


# Set for every design by compare's own options.
_SHARED_KEYS = ("lanes", "rows", "cols", "dtype")


def _parse_settings(values, designs):
    """``--set`` values per design name: every combination of the values given per parameter (Python names),
    each value of its parameter's type; [{}] (the defaults) for a design with none. The values are checked
    against their parameters when the design's parameters are made."""
    given = {design.name: {} for design in designs}
    for value in values or ():
        target, equals, text = value.partition("=")
        name, dot, key = target.partition(".")
        if not (equals and dot and key and text):
            raise CliError(f"--set {value!r}: expected DESIGN.KEY=VALUE, e.g. tensordash.scheduler=separable1")
        if name not in given:
            raise CliError(f"--set {value!r}: {name!r} is not among the designs compared ({', '.join(given)})")
        design = next(design for design in designs if design.name == name)
        keys = {parameter.key: parameter for parameter in design.parameters if parameter.key not in _SHARED_KEYS}
        if key not in keys:
            raise CliError(f"--set {value!r}: {name} has no parameter {key!r} to set here; choose from "
                           f"{', '.join(keys)} (lanes, rows, cols and dtypes have options of their own)")
        parameter = keys[key]
        kind = parameter.kind if parameter.choices is None else type(parameter.choices[0])
        try:
            typed = kind(text)
        except ValueError:
            raise CliError(f"--set {value!r}: {key} must be {parameter.describe()}") from None
        values = given[name].setdefault(parameter.name, [])
        values += [typed] if typed not in values else []
    return {name: [dict(zip(values, chosen)) for chosen in itertools.product(*values.values())]
            for name, values in given.items()}


def _variant(design, params, overrides):
    """The parameters ``--set`` gives other than their defaults, as ``key=value`` words (empty for none)."""
    defaults = design.params()
    return ",".join(f"{design.parameter(name).key}={params[name]}" for name in overrides
                    if params[name] != defaults[name])


def _configurations(args, designs, dtypes, overrides, maps):
    """Every configuration to run, each checked and built before any runs: (design, dtype, params, tile, variant,
    flow folder, speedup from the ``maps``)."""
    configurations = []
    for dtype in dtypes:
        for design in designs:
            if dtype not in design.formats:
                print(f"skipping {design.name} {dtype}: {design.name} takes {', '.join(design.formats)} operands only")
                continue
            for chosen in overrides[design.name]:
                try:
                    params = design.params(lanes=args.lanes, rows=args.rows, cols=args.cols, fmt=dtype, **chosen)
                    component = design.tile(params)
                except ValueError as error:
                    raise CliError(str(error) if str(error).startswith(design.name) else f"{design.name}: {error}") \
                        from None
                variant = _variant(design, params, chosen)
                name = f"{design.name}-{dtype}-{args.lanes}l-{args.rows}x{args.cols}" + "".join(
                    f"-{word.replace('=', '-')}" for word in variant.split(",") if word)
                map_speedup = _map_speedup(maps, design, params, chosen) if maps else None
                if maps and map_speedup is None:
                    print(f"{_label(design.name, variant)} {dtype}: no --map has {design.name} mapped with "
                          f"{variant or 'its defaults'}, so no throughput at a mapped speedup")
                configurations.append((design, dtype, params, component, variant,
                                       args.out / re.sub(r"[^\w.-]", "_", name), map_speedup))
    return configurations


def _split(value, allowed, option):
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise CliError(f"{option}: unknown {unknown[0] if unknown else 'empty list'!r}; choose from {', '.join(allowed)}")
    return names


def _is_compare_output(path):
    """Whether the folder ``path`` holds only a comparison: its reports and one flow folder per configuration."""
    from dashraker.fpga.flow import is_flow_output

    return all(entry.name.startswith("compare.") or (entry.is_dir() and is_flow_output(entry))
               for entry in Path(path).iterdir())


def run(args):
    from dashraker.designs import DESIGNS
    from dashraker.fpga.options import flow, flow_options
    from dashraker.fpga.flow import kept_seeds, reusable
    from dashraker.outputs import OutputFolder, atomic_write
    from dashraker.trace.store import save_json

    options = flow_options(args)
    if args.lanes < 1 or args.rows < 1 or args.cols < 1:
        raise CliError("--lanes, --rows and --cols must be positive integers")
    designs = [DESIGNS[name] for name in _split(args.designs, list(DESIGNS), "--designs")]
    formats = dict.fromkeys(fmt for design in DESIGNS.values() for fmt in design.formats)
    dtypes = _split(args.dtypes, list(formats), "--dtypes")
    maps = [read_map(path) for path in args.map or ()]
    sources = speedup_sources(maps, args.speedup)
    overrides = _parse_settings(args.set, designs)
    seeds = options.seed_list

    configurations = _configurations(args, designs, dtypes, overrides, maps)
    with OutputFolder(args.out, "--out", _is_compare_output, "give a new folder or one of an earlier comparison"):
        rows = []
        for design, dtype, params, component, variant, out, map_speedup in configurations:
            label = _label(design.name, variant)
            previous = reusable(out, component, design.name, params, options)
            kept = kept_seeds(previous, options)
            if len(kept) == len(seeds):
                print(f"{label} {dtype}: reusing {out / 'report.json'}")
            else:
                reused = f" (reusing its synthesis{''.join(f', seed {seed}' for seed in kept)})" if previous else ""
                print(f"{label} {dtype} ({args.lanes} lanes, {args.rows}x{args.cols}) -> {out}{reused}")
            report = flow(component, options, design.name, params, out, previous, progress=not args.no_progress)
            rows.append({"design": design.name, "variant": variant, "dtype": dtype, "lanes": args.lanes,
                         "map_speedup": map_speedup,
                         "rows": args.rows, "cols": args.cols, **breakdown(report), "fmax_mhz": report["fmax_mhz"],
                         "fmax_min_mhz": report["fmax_min_mhz"], "fmax_max_mhz": report["fmax_max_mhz"],
                         "seed": report["seed"],
                         "seeds": [{"seed": run["seed"], "fmax_mhz": run["fmax_mhz"]} for run in report["seeds"]],
                         "critical_path": report["critical_path"], "report": str(out / "report.json")})
        if not rows:
            raise CliError("no configuration to compare")
        _throughputs(rows, sources)
        table = compare_table(rows)
        print(table)
        args.out.mkdir(parents=True, exist_ok=True)
        save_json(args.out / "compare.json", {"device": args.device, "clock_mhz": args.clock, "speedups": sources,
                                              "rows": rows})
        note = ("Fmax: the median of the placement seeds " + ", ".join(map(str, seeds)) + " (min-max beside it); "
                "LUTs are ECP5 LUT4 equivalents after synthesis (one synthesis for every seed). Speedups over the "
                "dense baseline: " + "; ".join(f"{source}: " + ", ".join(f"{k} {v:.2f}" for k, v in speedups.items())
                                             for source, speedups in sources.items())
                + " (a design without one has no throughput).")
        text = f"# FPGA comparison on {args.device}\n\n{table}\n\n{note}\n"
        atomic_write(args.out / "compare.md", lambda file: file.write(text.encode()))
        plot(args.out / "compare.png", rows)
        print(f"wrote {args.out / 'compare.json'}, {args.out / 'compare.md'}, {args.out / 'compare.png'}")
