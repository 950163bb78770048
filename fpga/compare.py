"""``dashraker fpga compare``: every design's tile at equal lanes, area and throughput per LUT."""

import io
import json
import re
from pathlib import Path

from dashraker.cli import CliError

__all__ = ["register", "breakdown", "throughput", "speedups_from_map", "compare_table"]


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


def speedups_from_map(path):
    """Speedup over the dense baseline per design, all operations together, from a mapper's ``map.json``."""
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
    return found


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


def compare_table(rows):
    """The comparison as a Markdown table."""
    header = ("| design | dtype | lanes | tile LUTs | FFs | DSP | PE LUTs | TD muxes / PE | TD muxes+window / tile "
              "| Fmax MHz | speedup | MAC/cycle | MAC/cycle/kLUT | GMAC/s/kLUT |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]

    def number(value, form):
        return "-" if value is None else format(value, form)

    for r in rows:
        lines.append(
            f"| {r['design']} | {r['dtype']} | {r['lanes']} | {r['tile_lut']:,} | {r['tile_ff']:,} | {r['tile_dsp']} "
            f"| {r['pe_lut']:,.0f} | {number(r.get('muxes_of_pe'), '.1%')} | {number(r.get('sparsity_of_tile'), '.1%')} "
            f"| {number(r['fmax_mhz'], '.1f')} | {number(r['speedup'], '.2f')} | {number(r['macs_per_cycle'], '.1f')} "
            f"| {number(r['macs_per_cycle_per_klut'], '.2f')} | {number(r['gmacs_per_klut'], '.3f')} |")
    return "\n".join(lines)


def plot(path, rows):
    """Stacked LUTs per configuration (MAC datapath, TensorDash muxes and window, rest) and throughput per kLUT."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dashraker.outputs import atomic_write

    labels = [f"{r['design']}\n{r['dtype']}" for r in rows]
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
    values = [r["gmacs_per_klut"] or 0 for r in rows]
    speed.bar(labels, values, color="tab:green")
    speed.set_ylabel("GMAC/s per 1000 LUTs at Fmax")
    speed.set_title("throughput per LUT at the mapper's speedups")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    plt.close(figure)
    atomic_write(path, lambda file: file.write(buffer.getvalue()))


def register(designs):
    from dashraker.designs import DESIGNS
    from dashraker.fpga.cli import add_flow_arguments

    parser = designs.add_parser(
        "compare", help="compare the designs' tiles at equal lanes",
        description="Run each design at the same lanes (and tile size) through the FPGA flow, for bf16 and fp32 "
        "where the design takes it, and tabulate LUTs, the TensorDash muxes and scheduler as fractions of "
        "the PE and tile, Fmax and throughput per LUT at the mapper's speedups (compare.json, compare.md, "
        "compare.png). Finished configurations with the same parameters are reused.")
    parser.add_argument("--lanes", type=int, default=16, help="lanes N of every design (default 16)")
    parser.add_argument("--rows", type=int, default=1, help="PE rows of every tile (default 1)")
    parser.add_argument("--cols", type=int, default=1, help="PE columns of every tile (default 1)")
    parser.add_argument("--dtypes", default="bf16,fp32", help="operand formats (default bf16,fp32)")
    parser.add_argument("--designs", default=",".join(DESIGNS), help=f"designs to compare (default {','.join(DESIGNS)})")
    parser.add_argument("--map", type=Path, help="a mapper's map.json: speedups over the baseline per design")
    parser.add_argument("--speedup", action="append", metavar="DESIGN=X",
                        help="a design's speedup over the baseline (overrides --map), e.g. tensordash=1.8")
    add_flow_arguments(parser, "folder for one flow folder per configuration and compare.json/.md/.png")
    parser.set_defaults(func=run)


def _split(value, allowed, option):
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise CliError(f"{option}: unknown {unknown[0] if unknown else 'empty list'!r}; choose from {', '.join(allowed)}")
    return names




def _reusable(out, params, args):
    """A finished report of the same configuration and flow options, if ``out`` holds one."""
    path = out / "report.json"
    if not path.exists():
        return None
    try:
        report = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    same = (report.get("params") == params and report.get("device") == args.device
            and report.get("router", "router1") == args.router
            and report.get("clock_mhz") == args.clock and report.get("wrapper", {}).get("word_bits") == args.word_bits)
    return report if same else None


def _is_compare_output(path):
    """Whether the folder ``path`` holds only a comparison: its reports and one flow folder per configuration."""
    from dashraker.fpga.flow import is_flow_output

    return all(entry.name.startswith("compare.") or (entry.is_dir() and is_flow_output(entry))
               for entry in Path(path).iterdir())


def run(args):
    from dashraker.designs import DESIGNS, reference
    from dashraker.fpga.cli import check_flow_arguments, flow
    from dashraker.outputs import OutputFolder, atomic_write
    from dashraker.trace.store import save_json

    check_flow_arguments(args)
    if args.lanes < 1 or args.rows < 1 or args.cols < 1:
        raise CliError("--lanes, --rows and --cols must be positive integers")
    designs = [DESIGNS[name] for name in _split(args.designs, list(DESIGNS), "--designs")]
    formats = dict.fromkeys(fmt for design in DESIGNS.values() for fmt in design.formats)
    dtypes = _split(args.dtypes, list(formats), "--dtypes")
    speedups = {reference().name: 1.0}
    if args.map:
        speedups.update(speedups_from_map(args.map))
    speedups.update(_parse_speedups(args.speedup))

    with OutputFolder(args.out, "--out", _is_compare_output, "give a new folder or one of an earlier comparison"):
        rows = []
        for dtype in dtypes:
            for design in designs:
                if dtype not in design.formats:
                    print(f"skipping {design.name} {dtype}: "
                          f"{design.name} takes {', '.join(design.formats)} operands only")
                    continue
                try:
                    params = design.params(lanes=args.lanes, rows=args.rows, cols=args.cols, fmt=dtype)
                except ValueError as error:
                    raise CliError(f"{design.name}: {error}") from None
                out = args.out / f"{design.name}-{dtype}-{args.lanes}l-{args.rows}x{args.cols}"
                report = _reusable(out, params, args)
                if report is None:
                    print(f"{design.name} {dtype} ({args.lanes} lanes, {args.rows}x{args.cols}) -> {out}")
                    report = flow(design.tile(params), args, design.name, params, out)
                else:
                    print(f"{design.name} {dtype}: reusing {out / 'report.json'}")
                parts = breakdown(report)
                speedup = speedups.get(design.name)
                macs = args.rows * args.cols * args.lanes * speedup if speedup is not None else None
                per_cycle, per_second = throughput(macs, report["fmax_mhz"], parts["tile_lut"]) if macs else (None, None)
                rows.append({"design": design.name, "dtype": dtype, "lanes": args.lanes, "rows": args.rows,
                             "cols": args.cols, **parts, "fmax_mhz": report["fmax_mhz"], "speedup": speedup, "macs_per_cycle": macs,
                             "macs_per_cycle_per_klut": per_cycle, "gmacs_per_klut": per_second,
                             "critical_path": report["critical_path"], "report": str(out / "report.json")})
        if not rows:
            raise CliError("no configuration to compare")
        table = compare_table(rows)
        print(table)
        args.out.mkdir(parents=True, exist_ok=True)
        save_json(args.out / "compare.json", {"device": args.device, "clock_mhz": args.clock,
                                              "speedups": speedups, "rows": rows})
        note = ("Speedups over the dense baseline: " + ", ".join(f"{k} {v:.2f}" for k, v in speedups.items())
                + " (a design without one has no throughput). LUTs are ECP5 LUT4 equivalents after synthesis.")
        text = f"# FPGA comparison on {args.device}\n\n{table}\n\n{note}\n"
        atomic_write(args.out / "compare.md", lambda file: file.write(text.encode()))
        plot(args.out / "compare.png", rows)
        print(f"wrote {args.out / 'compare.json'}, {args.out / 'compare.md'}, {args.out / 'compare.png'}")
