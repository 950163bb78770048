"""Static timing of gate-level netlists with OpenSTA: register-to-register paths; its power report as a cross-check.

The netlist is a Yosys netlist mapped onto a Liberty library (FreePDK45's Nangate cells), hierarchy kept. OpenSTA
(Debian's ``opensta``, 0~20191111gitc018cb2, run as ``sta -no_splash -exit script.tcl``) reads it with the Liberty
file, the clock is ``create_clock -period`` on the clock port (ideal: no clock tree), every other input arrives and
every output is required at 0 external delay on that clock (ideal ports: no driving cell, no external load).

What this OpenSTA version does and does not do, as used here:

* ``report_checks`` takes ``-path_delay``, ``-from``/``-to``, ``-group_count``, ``-endpoint_count``,
  ``-sort_by_slack``, ``-fields {net}`` (the word is ``net``: each driver pin's line is followed by the name of the
  highest hierarchical net it drives and its fanout), ``-digits`` and ``-no_line_splits`` (without it a long start or
  end point name pushes its description onto a line of its own). ``find_timing_paths`` and ``get_property`` of a
  path end (``startpoint``, ``endpoint``, ``slack``) exist; ``report_units`` does not.
* Errors do not stop a script, nor change sta's exit status: each is a line ``Error: ...`` and the script goes on,
  so the log is searched for them (and for an end marker the script writes last).
* ``set_cmd_units -time ns`` makes the commands and reports use nanoseconds whatever the library's ``time_unit``
  (the Nangate library's is 1 ns anyway); ``report_power`` prints watts (SI values, whatever the library's
  ``leakage_power_unit``, 1 nW here).
* Wire load: with no parasitics OpenSTA estimates every net from the Liberty's ``default_wire_load`` (the Nangate
  library names ``5K_hvratio_1_1``) unless another model is set; ``wire_load=None`` sets an all-zero model (read
  from a one-model Liberty file written beside the script), so nets are their pins' capacitance alone. Timing
  defaults to the library's model (``WIRE_LOAD_LIBRARY``: OpenSTA's own behaviour), power to none (so that it
  compares with gate-level switching counted on pin capacitances).
* ``report_power`` and ``report_power -instances`` work (the latter one row per instance: internal, switching,
  leakage and total power, sorted by total, with the instance's hierarchical name). ``set_power_activity -global``
  and ``-input``/``-input_ports`` work; its ``-pins`` does not (the Tcl reads an unset variable), its help spells
  ``-activity`` as ``-activiity``, and there is no ``read_vcd`` or SAIF reader: activities are set, not simulated.

The power model of this version (search/Power.cc), as ``sta_power`` uses it: ``set_power_activity -global
-activity A -duty D`` gives every pin that is not on the clock network the activity A and the duty D, without
propagating anything through the logic. A pin's activity is its number of transitions (rising and falling each
count one) per period of the clock that reaches it; OpenSTA divides it by that clock's period to get transitions per
second. Clock pins have 2 transitions a period and duty 0.5 whatever A is, so the flip-flops' clock-pin internal
power does not scale with A. Switching power is 1/2 C V^2 x transitions per second on each cell output (C its load:
the input pins it drives, plus the wire load if any; the nets of top-level input ports are driven by no cell and
count nothing); internal power is, on each pin and for each of its power arcs, the sum of the arc's rise and fall
energies at the pin's slew and load times the probability of the arc's "when" state (or of its related pin's
switching; 1 for a clock) x transitions per second (``findInternalPower``): twice the mean energy per transition
that today's OpenSTA charges, and over an output's arcs from several related pins their sum, not their weighted
mean (``tests/asic/test_power.py``, ``docs/results/asic.md``); leakage is each cell's ``cell_leakage_power`` (state-independent where the cell has one, as every Nangate
cell does). A pin no clock reaches (a tie cell's output, logic fed only by constants) gets OpenSTA's input default
of 0.1 transitions per second, not per period: nothing, in effect.
"""

import math
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from dashraker.processes import ends_with_parent

__all__ = ["TimingError", "find_sta", "Stage", "RegisterPath", "Timing", "timing", "PowerReport", "sta_power",
           "STA_TIMEOUT_S", "WIRE_LOAD_LIBRARY", "CLOCK_PORT", "DIGITS", "POWER_DIGITS"]

STA = "/usr/bin/sta"  # Debian's opensta; else `sta` on PATH
STA_TIMEOUT_S = 1800  # a whole tile's netlist takes seconds; an hour would be a hang
WIRE_LOAD_LIBRARY = "library"  # wire_load: the Liberty's default_wire_load, as OpenSTA uses it unless told otherwise
CLOCK_PORT = "clk"
DIGITS = 4  # report_checks digits: 0.1 ps
POWER_DIGITS = 8  # report_power digits (mantissa digits of %e)
_NO_WIRE_LOAD = "dashraker_no_wire_load"  # the zero model's name, and its one-model library's
_END = "@@dashraker done"  # the script's last line of output: a log without it is a script cut short


class TimingError(Exception):
    """OpenSTA missing or failed: one line saying what and where (its log's path)."""


def find_sta() -> str:
    """OpenSTA's executable: /usr/bin/sta, else ``sta`` on PATH."""
    if Path(STA).is_file():
        return STA
    found = shutil.which("sta")
    if found is None:
        raise TimingError("OpenSTA (sta) not found: run `make setup` (Debian package opensta)")
    return found


@dataclass(frozen=True)
class Stage:
    """One line of a path: ``pin`` of ``instance`` (dotted path below the top; "" for a top-level port, whose
    ``cell`` is then OpenSTA's "in" or "out" and ``pin`` the port), the ``net`` it drives (OpenSTA's highest
    hierarchical net above it, dotted; None for a pin that drives nothing on the path: the launching clock pin, the
    end's data pin), its delay and the arrival time there, and whether the transition there is rising."""

    instance: str
    cell: str
    pin: str
    net: str | None
    delay_ns: float
    arrival_ns: float
    rising: bool


@dataclass(frozen=True)
class RegisterPath:
    """A register-to-register path: the start and end flip-flops (``start``/``end``: instances as dotted paths below
    the top, "pe0_0.accumulate._24591_"), the design's names for them (``start_register``/``end_register``: the net
    the flip-flop's Q output drives, as the module holding it names it, "pe0_0.accumulate.segment6[0]"; the
    instance where the flip-flop drives no named net), the data arrival time at the end's data pin, the end's
    setup time, the slack against ``period_ns`` and the stages, launching clock pin first, end's data pin last."""

    start: str
    start_register: str
    end: str
    end_register: str
    arrival_ns: float
    setup_ns: float
    slack_ns: float
    period_ns: float
    stages: tuple

    @property
    def delay_ns(self) -> float:
        """Arrival plus setup: the shortest clock period the path allows (ideal clocks)."""
        return self.arrival_ns + self.setup_ns

    @property
    def fmax_mhz(self) -> float:
        return 1000.0 / self.delay_ns


@dataclass(frozen=True)
class Timing:
    """``timing``'s answer: the ``paths`` worst register-to-register paths at ``period_ns``, worst first, each to
    another end point, ``worst`` the first (None where the design has no register-to-register path), and for
    information the shortest periods that the worst input-to-register and register-to-output paths allow (inputs
    and outputs at 0 external delay; None where there is no such path)."""

    period_ns: float
    worst: RegisterPath | None
    paths: tuple
    input_to_register_ns: float | None
    register_to_output_ns: float | None

    @property
    def fmax_mhz(self) -> float | None:
        """The worst register-to-register path's fmax (None without one)."""
        return None if self.worst is None else self.worst.fmax_mhz


@dataclass(frozen=True)
class PowerReport:
    """OpenSTA's ``report_power`` at one global activity (transitions per clock period of every pin off the clock
    network: see the module's docstring) and clock period: ``total`` {"internal", "switching", "leakage"} in W,
    ``groups`` the same for each of OpenSTA's rows ("Sequential", "Combinational", "Macro", "Pad"), and
    ``instances`` the same for every leaf cell instance (dotted path below the top), from ``report_power
    -instances``."""

    activity: float
    period_ns: float
    total: dict
    groups: dict
    instances: dict
    duty: float = 0.5

    @property
    def total_w(self) -> float:
        return sum(self.total.values())


# --- running OpenSTA ---------------------------------------------------------------------------------------------

def _tcl(text):
    """``text`` as one Tcl word (braced): paths and names with braces, backslashes or line breaks are refused."""
    text = str(text)
    if any(character in text for character in "{}\\\n\r") or not text:
        raise TimingError(f"{text!r} cannot be passed to OpenSTA's Tcl (braces, backslashes or line breaks)")
    return "{" + text + "}"


def _run_script(folder, name, lines, timeout_s, clock):
    """``lines`` written as ``folder/<name>.tcl`` and run (``_run_sta``), the log ``<name>.log`` checked for the
    script's register count line; (its text, the log's path)."""
    script, log = folder / f"{name}.tcl", folder / f"{name}.log"
    script.write_text("\n".join(lines) + "\n")
    text = _run_sta(script, log, timeout_s)
    _registers_line(text, log, clock)
    return text, log


def _run_sta(script_path, log_path, timeout_s):
    """Run OpenSTA on ``script_path``, all its output to ``log_path``; its text. Ended at ``timeout_s`` and on any
    exception in Python (KeyboardInterrupt included); ``TimingError`` where it failed or printed an error."""
    sta = find_sta()
    with open(log_path, "w") as log:
        try:
            process = subprocess.Popen([sta, "-no_splash", "-exit", str(script_path)], cwd=script_path.parent,
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       preexec_fn=ends_with_parent)
        except OSError as error:
            raise TimingError(f"OpenSTA ({sta}) could not start: {error} (log: {log_path})") from None
        try:
            returncode = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise TimingError(f"OpenSTA ran past {timeout_s} s and was stopped (log: {log_path})") from None
        except BaseException:
            process.kill()
            process.wait()
            raise
    text = Path(log_path).read_text(errors="replace")
    errors = [line.strip() for line in text.splitlines() if line.startswith("Error")]
    if errors:
        raise TimingError(f"OpenSTA failed: {errors[0]} (log: {log_path})")
    if returncode != 0:
        raise TimingError(f"OpenSTA failed: exit status {returncode} (log: {log_path})")
    if _END not in text.splitlines():
        raise TimingError(f"OpenSTA stopped before the end of its script (log: {log_path})")
    return text


def _check_inputs(netlist, top, liberty, period_ns, clock):
    netlist, liberty = Path(netlist), Path(liberty)
    if not netlist.is_file():
        raise TimingError(f"netlist {netlist} not found")
    if not liberty.is_file():
        raise TimingError(f"Liberty file {liberty} not found")
    if not (isinstance(period_ns, (int, float)) and not isinstance(period_ns, bool) and period_ns > 0
            and math.isfinite(period_ns)):
        raise TimingError(f"clock period must be a positive number of ns, not {period_ns!r}")
    for what, name in (("top", top), ("clock port", clock)):
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w$.]*", name):
            raise TimingError(f"{what} {name!r} is not a module or port name OpenSTA can be given")
    return netlist.resolve(), liberty.resolve()


def _no_wire_load_library(folder):
    """A Liberty file holding one all-zero wire load model (and no cells), written into ``folder``."""
    path = folder / f"{_NO_WIRE_LOAD}.lib"
    thresholds = "".join(f"  {kind}_threshold_pct_{edge} : {value};\n"
                         for kind, value in (("input", 50), ("output", 50), ("slew_lower", 30), ("slew_upper", 70))
                         for edge in ("rise", "fall"))
    path.write_text(f"library ({_NO_WIRE_LOAD}) {{\n  delay_model : table_lookup;\n  time_unit : \"1ns\";\n"
                    f"  capacitive_load_unit (1,ff);\n  pulling_resistance_unit : \"1kohm\";\n{thresholds}"
                    f"  wire_load (\"{_NO_WIRE_LOAD}\") {{\n    capacitance : 0;\n    resistance : 0;\n"
                    f"    slope : 0;\n    fanout_length (1, 0);\n  }}\n}}\n")
    return path


def _setup_script(netlist, top, liberty, period_ns, folder, wire_load, clock):
    """The Tcl that reads the design and constrains it: clock, ideal ports at 0 external delay, wire load."""
    lines = [f"read_liberty {_tcl(liberty)}"]
    if wire_load is None:
        lines.append(f"read_liberty {_tcl(_no_wire_load_library(folder))}")
    lines += [f"read_verilog {_tcl(netlist)}", f"link_design {_tcl(top)}"]
    if wire_load is None:
        lines.append(f"set_wire_load_model -name {_NO_WIRE_LOAD} -library {_NO_WIRE_LOAD}")
    elif wire_load != WIRE_LOAD_LIBRARY:
        lines.append(f"set_wire_load_model -name {_tcl(wire_load)}")
    lines += [
        "set_cmd_units -time ns",
        f"set clock_ports [get_ports -quiet {_tcl(clock)}]",
        "set registers [llength [all_registers -cells]]",
        'puts "@@registers $registers clock_ports [llength $clock_ports]"',
        "if {[llength $clock_ports]} {",
        f"  create_clock -name {_tcl(clock)} -period {period_ns!r} $clock_ports",
        "  set inputs [delete_from_list [all_inputs] $clock_ports]",
        "} else {",
        f"  create_clock -name {_tcl(clock)} -period {period_ns!r}",
        "  set inputs [all_inputs]",
        "}",
        "set outputs [all_outputs]",
        f"if {{[llength $inputs]}} {{ set_input_delay 0 -clock {_tcl(clock)} $inputs }}",
        f"if {{[llength $outputs]}} {{ set_output_delay 0 -clock {_tcl(clock)} $outputs }}",
    ]
    return lines


def _registers_line(text, log_path, clock):
    match = re.search(r"^@@registers (\d+) clock_ports (\d+)$", text, re.M)
    if match is None:
        raise TimingError(f"OpenSTA's report has no register count (log: {log_path})")
    if int(match[1]) and not int(match[2]):
        raise TimingError(f"the design has {match[1]} registers but no clock port {clock} (log: {log_path})")


# --- names ---------------------------------------------------------------------------------------------------------

_DIVIDER = re.compile(r"(?<!\\)/")


def _components(name):
    """OpenSTA's hierarchical name (``/`` between levels, ``\\`` escaping) as its levels, escapes removed."""
    return [part.replace("\\", "") for part in _DIVIDER.split(name)]


def _dotted(name):
    return ".".join(_components(name))


def _named(net):
    """Whether a net's name is the design's (not one Yosys or ABC made up: ``_123_``, ``$...``)."""
    local = _components(net)[-1]
    return not (re.fullmatch(r"_\d+_", local) or local.startswith("$"))


def _register_name(instance, outputs):
    """The design's name for a flip-flop: the named net on its Q output, else on another non-inverted output, else
    on any output; the instance (dotted) where none is named."""
    ranked = sorted(outputs, key=lambda pin_net: (pin_net[0] != "Q", pin_net[0].upper().endswith("N"), pin_net[0]))
    for _pin, net in ranked:
        if _named(net):
            return _dotted(net)
    return _dotted(instance)


# --- report_checks -------------------------------------------------------------------------------------------------

_NUMBER = r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?"
_POINT = re.compile(r"^(Startpoint|Endpoint): (\S+)(?: \((.*)\))?$")
_DESCRIPTION = re.compile(r"^\s+\((.*)\)$")
_CLOCK_EDGE = re.compile(rf"^\s*({_NUMBER})\s+({_NUMBER})\s+clock (\S+) \((rise|fall) edge\)$")
_PIN = re.compile(rf"^\s*({_NUMBER})\s+({_NUMBER})\s+([\^v])\s+(\S+) \(([^()]*)\)$")
_CAPTURE_PIN = re.compile(rf"^\s+({_NUMBER})\s+([\^v])\s+(\S+) \(([^()]*)\)$")
_NET = re.compile(r"^\s*(\d+)?\s+(\S+) \(net\)$")
_UNCONNECTED = re.compile(r"^\s*(\d+)?\s+\(unconnected\)$")
_ADJUSTMENT = re.compile(rf"^\s*({_NUMBER})\s+({_NUMBER})\s+([\^v] )?(clock network delay \((?:ideal|propagated)\)|"
                         r"clock reconvergence pessimism|clock uncertainty|input external delay|"
                         r"output external delay|library setup time)$")
_TOTAL = re.compile(rf"^\s+({_NUMBER})\s+(data arrival time|data required time)$")
_SLACK = re.compile(rf"^\s+({_NUMBER})\s+slack \((MET|VIOLATED)\)$")
_DASHES = re.compile(r"^-+$")
_HEADER = re.compile(r"^(Fanout\s+)?Delay\s+Time\s+Description$")


@dataclass(frozen=True)
class _Path:
    """One parsed path of report_checks' full format."""

    start: str
    start_kind: str
    end: str
    end_kind: str
    stages: tuple
    arrival_ns: float
    required_ns: float
    setup_ns: float
    slack_ns: float
    capture_edge_ns: float


def _section(text, name, log_path):
    match = re.search(rf"^@@begin {name}\n(.*?)^@@end {name}$", text, re.M | re.S)
    if match is None:
        raise TimingError(f"OpenSTA's report has no {name} section (log: {log_path})")
    return match[1]


class _PathReader:
    """A cursor over the lines of one report_checks section (full format, -fields {net}): each read fails with a
    ``TimingError`` naming the log for a line that does not parse."""

    def __init__(self, lines, what, log_path):
        self.lines, self.index, self.what, self.log_path = lines, 0, what, log_path

    @property
    def done(self):
        return self.index >= len(self.lines)

    def fail(self, problem):
        raise TimingError(f"OpenSTA's {self.what} report does not parse: {problem} (log: {self.log_path})")

    def number(self, text):
        value = float(text)
        if not math.isfinite(value):
            self.fail(f"{text} is not a finite time")
        return value

    def point(self, expected):
        """(name, description) of a ``Startpoint``/``Endpoint`` line (a long name's description on the next)."""
        match = None if self.done else _POINT.match(self.lines[self.index])
        if match is None or match[1] != expected:
            self.fail(f"expected {expected}, found {self.lines[self.index]!r}" if not self.done else f"no {expected}")
        self.index += 1
        kind = match[3]
        if kind is None:
            description = None if self.done else _DESCRIPTION.match(self.lines[self.index])
            if description is None:
                self.fail(f"no description for {expected} {match[2]}")
            kind, self.index = description[1], self.index + 1
        return match[2], kind

    def header(self):
        """(start, its kind, end, its kind) of the next path, through its column header."""
        start, start_kind = self.point("Startpoint")
        end, end_kind = self.point("Endpoint")
        for prefix in ("Path Group: ", "Path Type: max"):
            if self.done or not self.lines[self.index].startswith(prefix):
                self.fail(f"expected {prefix.strip()!r} after the endpoint {end}")
            self.index += 1
        lines, at = self.lines, self.index
        if at + 1 >= len(lines) or not _HEADER.match(lines[at].strip()) or not _DASHES.match(lines[at + 1]):
            self.fail(f"no column header for the path to {end}")
        self.index += 2
        return start, start_kind, end, end_kind

    def body(self, end):
        """The path's stages (dicts of ``Stage``'s fields), clock edges, totals, setup, slack and capture time, up to
        its slack line."""
        stages, edges, totals, setup, slack, capture = [], [], {}, 0.0, None, None
        while slack is None:
            if self.done:
                self.fail(f"the path to {end} has no slack")
            line = self.lines[self.index]
            self.index += 1
            arrived = "data arrival time" in totals
            if match := _CLOCK_EDGE.match(line):
                edges.append(self.number(match[2]))
            elif match := _SLACK.match(line):
                slack = self.number(match[1])
            elif match := _TOTAL.match(line):
                totals.setdefault(match[2], self.number(match[1]))
            elif match := _ADJUSTMENT.match(line):
                if match[4] == "library setup time":
                    setup = -self.number(match[1])
            elif (match := _PIN.match(line)) and not arrived:
                stages.append(self.stage(match))
            elif (match := _NET.match(line)) and stages and not arrived:
                stages[-1]["net"] = _dotted(match[2])
            elif _UNCONNECTED.match(line) and stages and not arrived:
                pass
            elif (match := _CAPTURE_PIN.match(line)) and arrived:
                capture = self.number(match[1])
            elif not _DASHES.match(line):
                self.fail(f"unexpected line {line.strip()!r} in the path to {end}")
        return stages, edges, totals, setup, slack, capture

    def stage(self, match):
        """A pin line's ``Stage`` fields (a port's, where the cell column names a direction, has no instance)."""
        parts = _components(match[4])
        port = match[5] in ("in", "out", "inout")
        return dict(instance="" if port else ".".join(parts[:-1]), cell=match[5],
                    pin=".".join(parts) if port else parts[-1], net=None, delay_ns=self.number(match[1]),
                    arrival_ns=self.number(match[2]), rising=match[3] == "^")

    def path(self, period_ns):
        """The next path, its figures checked against each other and against one clock period."""
        start, start_kind, end, end_kind = self.header()
        stages, edges, totals, setup, slack, capture = self.body(end)
        if not stages:
            self.fail(f"the path to {end} has no stages")
        if "data arrival time" not in totals or "data required time" not in totals:
            self.fail(f"the path to {end} has no arrival or required time")
        if len(edges) != 2:
            self.fail(f"the path to {end} has {len(edges)} clock edges, not a launch and a capture edge")
        arrival, required = totals["data arrival time"], totals["data required time"]
        tolerance = 2.5 * 10 ** -DIGITS
        if abs(stages[-1]["arrival_ns"] - arrival) > tolerance:
            self.fail(f"the path to {end} arrives at {arrival} but its last stage at {stages[-1]['arrival_ns']}")
        if abs(required - arrival - slack) > tolerance:
            self.fail(f"the path to {end}: required {required} - arrival {arrival} is not the slack {slack}")
        if abs(edges[1] - edges[0] - period_ns) > tolerance:
            self.fail(f"the path to {end} is captured {edges[1] - edges[0]} ns after its launch, not one period of "
                      f"{period_ns} ns (time units?)")
        return _Path(start, start_kind, end, end_kind, tuple(Stage(**stage) for stage in stages), arrival, required,
                     setup, slack, edges[1] if capture is None else capture)


def _parse_paths(section, log_path, period_ns, what):
    """The paths of one report_checks section (full format, -fields {net}); ``TimingError`` naming the log for any
    line that does not parse or figures that do not add up."""
    lines = [line.rstrip() for line in section.splitlines()]
    lines = [line for line in lines if line.strip()]
    if lines == ["No paths found."]:
        return []
    reader = _PathReader(lines, what, log_path)
    paths = []
    while not reader.done:
        paths.append(reader.path(period_ns))
    return paths


def _register_outputs(text, log_path):
    """Instance (OpenSTA's name) -> [(output pin, net)] from the script's @@output lines."""
    outputs = {}
    for line in text.splitlines():
        if line.startswith("@@register "):
            outputs.setdefault(line.split(" ", 1)[1], [])
        elif line.startswith("@@output "):
            fields = line.split(" ")
            if len(fields) != 4:
                raise TimingError(f"OpenSTA's register outputs do not parse: {line!r} (log: {log_path})")
            outputs.setdefault(fields[1], []).append((fields[2], fields[3]))
    return outputs


def _register_path(path, outputs, period_ns, log_path):
    for kind in (path.start_kind, path.end_kind):
        if "port" in kind or "clocked by" not in kind:
            raise TimingError(f"OpenSTA's register-to-register path {path.start} -> {path.end} does not run "
                              f"between clocked registers ({kind}) (log: {log_path})")
    names = {}
    for which in (path.start, path.end):
        if which not in outputs:
            raise TimingError(f"OpenSTA listed no outputs for the register {which} (log: {log_path})")
        names[which] = _register_name(which, outputs[which])
    return RegisterPath(start=_dotted(path.start), start_register=names[path.start], end=_dotted(path.end),
                        end_register=names[path.end], arrival_ns=path.arrival_ns, setup_ns=path.setup_ns,
                        slack_ns=path.slack_ns, period_ns=period_ns, stages=path.stages)


def _parse_timing_log(text, log_path, period_ns, paths):
    """``Timing`` from a log of the script ``timing`` writes."""
    reg2reg = _parse_paths(_section(text, "reg2reg", log_path), log_path, period_ns, "register-to-register")
    outputs = _register_outputs(_section(text, "registers", log_path), log_path)
    worst_first, ends = [], set()
    for path in sorted(reg2reg, key=lambda path: path.slack_ns):
        if path.end not in ends:
            ends.add(path.end)
            worst_first.append(_register_path(path, outputs, period_ns, log_path))
    worst_first = tuple(worst_first[:paths])
    figures = []
    for name, what in (("in2reg", "input-to-register"), ("reg2out", "register-to-output")):
        found = _parse_paths(_section(text, name, log_path), log_path, period_ns, what)
        figures.append(max((round(period_ns - path.slack_ns, DIGITS) for path in found), default=None))
    return Timing(period_ns=period_ns, worst=worst_first[0] if worst_first else None, paths=worst_first,
                  input_to_register_ns=figures[0], register_to_output_ns=figures[1])


def timing(netlist, top, liberty, period_ns, folder, paths=5, *, clock=CLOCK_PORT, wire_load=WIRE_LOAD_LIBRARY,
           timeout_s=STA_TIMEOUT_S) -> Timing:
    """Static timing of ``netlist`` (top module ``top``, cells of ``liberty``) with a clock of ``period_ns`` on the
    port ``clock``: the ``paths`` worst register-to-register paths (``report_checks -path_delay max -from
    [all_registers -clock_pins] -to [all_registers -data_pins] -group_count paths -endpoint_count 1``), and the
    worst input-to-register and register-to-output paths. ``wire_load``: ``WIRE_LOAD_LIBRARY`` (the Liberty's
    default model, OpenSTA's default), None (none: pin capacitances only) or a model of the library by name.
    Writes ``folder``/timing.tcl and timing.log; ``TimingError`` if OpenSTA is missing, fails, runs past
    ``timeout_s`` or writes a report that does not parse. A design without the clock port must have no registers.
    """
    netlist, liberty = _check_inputs(netlist, top, liberty, period_ns, clock)
    if not (isinstance(paths, int) and not isinstance(paths, bool) and paths >= 1):
        raise TimingError(f"paths must be a positive integer, not {paths!r}")
    folder = Path(folder).resolve()  # OpenSTA runs in it: every path the script names is absolute
    folder.mkdir(parents=True, exist_ok=True)
    checks = f"-path_delay max -digits {DIGITS} -no_line_splits -fields {{net}}"
    lines = _setup_script(netlist, top, liberty, period_ns, folder, wire_load, clock) + [
        "set reg_clock [all_registers -clock_pins]",
        "set reg_data [all_registers -data_pins]",
        'puts "@@begin reg2reg"',
        "if {[llength $reg_clock] && [llength $reg_data]} {",
        f"  report_checks {checks} -from $reg_clock -to $reg_data -group_count {paths} -endpoint_count 1 "
        "-sort_by_slack",
        "} else { puts \"No paths found.\" }",
        'puts "@@end reg2reg"',
        # The outputs of the registers on those paths, for the design's names of them.
        'puts "@@begin registers"',
        "if {[llength $reg_clock] && [llength $reg_data]} {",
        f"  foreach path_end [find_timing_paths -path_delay max -from $reg_clock -to $reg_data -group_count {paths} "
        "-endpoint_count 1 -sort_by_slack] {",
        "    foreach which {startpoint endpoint} {",
        "      set cell [get_cells -of_objects [get_property $path_end $which]]",
        "      set name [get_full_name $cell]",
        "      if {[info exists listed($name)]} { continue }",
        "      set listed($name) 1",
        '      puts "@@register $name"',
        "      foreach pin [get_pins -of_objects $cell] {",
        '        if {[get_property $pin direction] != "output"} { continue }',
        "        set net [get_nets -of_objects $pin]",
        '        if {$net == "NULL"} { continue }',
        '        puts "@@output $name [get_property $pin lib_pin_name] [get_full_name $net]"',
        "      }",
        "    }",
        "  }",
        "}",
        'puts "@@end registers"',
        'puts "@@begin in2reg"',
        "if {[llength $inputs] && [llength $reg_data]} {",
        f"  report_checks {checks} -from $inputs -to $reg_data -group_count 1 -endpoint_count 1",
        "} else { puts \"No paths found.\" }",
        'puts "@@end in2reg"',
        'puts "@@begin reg2out"',
        "if {[llength $reg_clock] && [llength $outputs]} {",
        f"  report_checks {checks} -from $reg_clock -to $outputs -group_count 1 -endpoint_count 1",
        "} else { puts \"No paths found.\" }",
        'puts "@@end reg2out"',
        f'puts "{_END}"',
    ]
    text, log = _run_script(folder, "timing", lines, timeout_s, clock)
    return _parse_timing_log(text, log, float(period_ns), paths)


# --- report_power --------------------------------------------------------------------------------------------------

_POWER_KEYS = ("internal", "switching", "leakage")
# OpenSTA sums powers in single precision: over a tile's 30k cells the groups miss their total by some 1e-5.
_SUM_TOLERANCE = 1e-3
_GROUPS = ("Sequential", "Combinational", "Macro", "Pad")
_E = r"-?\d+\.\d+e[-+]\d+"
_POWER_ROW = re.compile(rf"^(\w+)\s+({_E})\s+({_E})\s+({_E})\s+({_E})\s+\S+%$")
_INSTANCE_ROW = re.compile(rf"^\s*({_E})\s+({_E})\s+({_E})\s+({_E})\s+(\S+)$")


def _power_values(match, offset, what, log_path):
    values = [float(match[offset + i]) for i in range(4)]
    if not all(math.isfinite(value) for value in values):
        raise TimingError(f"OpenSTA's power report has a value that is not finite for {what} (log: {log_path})")
    *parts, total = values
    if not math.isclose(sum(parts), total, rel_tol=_SUM_TOLERANCE, abs_tol=1e-20):
        raise TimingError(f"OpenSTA's power for {what} does not add up to its total (log: {log_path})")
    return dict(zip(_POWER_KEYS, parts))


def _parse_power_log(text, log_path, activity, period_ns, duty):
    """``PowerReport`` from a log of the script ``sta_power`` writes."""
    def fail(problem):
        raise TimingError(f"OpenSTA's power report does not parse: {problem} (log: {log_path})")

    rows = {}
    for line in _section(text, "power", log_path).splitlines():
        if (match := _POWER_ROW.match(line.strip())) and match[1] in (*_GROUPS, "Total"):
            if match[1] in rows:
                fail(f"two {match[1]} rows")
            rows[match[1]] = _power_values(match, 2, match[1], log_path)
        elif line.strip() and not (re.fullmatch(r"Group\s+Internal\s+Switching\s+Leakage\s+Total", line.strip())
                                   or re.fullmatch(r"(Power\s+){3}Power", line.strip())
                                   or _DASHES.match(line.strip())
                                   or re.fullmatch(r"(\S+%\s*){3}", line.strip())):
            fail(f"unexpected line {line.strip()!r}")
    if set(rows) != {*_GROUPS, "Total"}:
        fail(f"rows {sorted(rows)}, not {', '.join(_GROUPS)} and Total")
    total = rows.pop("Total")
    for key in _POWER_KEYS:
        if not math.isclose(sum(row[key] for row in rows.values()), total[key], rel_tol=_SUM_TOLERANCE,
                            abs_tol=1e-20):
            fail(f"the groups' {key} power does not add up to the total")
    count = re.search(r"^@@leaves (\d+)$", text, re.M)
    if count is None:
        fail("no leaf instance count")
    instances = {}
    for line in _section(text, "instances", log_path).splitlines():
        if match := _INSTANCE_ROW.match(line):
            name = _dotted(match[5])
            if name in instances:
                fail(f"instance {name} twice")
            instances[name] = _power_values(match, 1, name, log_path)
        elif line.strip() and not (re.fullmatch(r"Internal\s+Switching\s+Leakage\s+Total", line.strip())
                                   or re.fullmatch(r"(Power\s+){3}Power", line.strip())
                                   or _DASHES.match(line.strip())):
            fail(f"unexpected line {line.strip()!r}")
    if len(instances) != int(count[1]):
        fail(f"{len(instances)} instance rows for {count[1]} leaf instances")
    return PowerReport(activity=float(activity), period_ns=float(period_ns), total=total, groups=rows,
                       instances=instances, duty=float(duty))


def sta_power(netlist, top, liberty, period_ns, activity, folder, duty=0.5, *, clock=CLOCK_PORT, wire_load=None,
              timeout_s=STA_TIMEOUT_S) -> PowerReport:
    """OpenSTA's own power estimate of ``netlist`` (``report_power`` and ``report_power -instances``) with a clock
    of ``period_ns`` on ``clock`` and ``set_power_activity -global -activity activity -duty duty``: ``activity``
    transitions (rising or falling) per clock period on every pin off the clock network, ``duty`` the fraction of
    the time each is 1 (the module's docstring says how OpenSTA uses them). No wire load unless ``wire_load`` names
    one (``timing``'s argument). Writes ``folder``/power.tcl and power.log; ``TimingError`` as ``timing``'s.
    """
    netlist, liberty = _check_inputs(netlist, top, liberty, period_ns, clock)
    for name, value, high in (("activity", activity, math.inf), ("duty", duty, 1.0)):
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= high):
            raise TimingError(f"{name} must be a number in [0, {high}], not {value!r}")
    folder = Path(folder).resolve()  # OpenSTA runs in it: every path the script names is absolute
    folder.mkdir(parents=True, exist_ok=True)
    lines = _setup_script(netlist, top, liberty, period_ns, folder, wire_load, clock) + [
        f"set_power_activity -global -activity {float(activity)!r} -duty {float(duty)!r}",
        'puts "@@begin power"',
        f"report_power -digits {POWER_DIGITS}",
        'puts "@@end power"',
        "set leaves {}",
        "foreach inst [get_cells -hierarchical *] {",
        '  if {[get_property $inst liberty_cell] != "NULL"} { lappend leaves $inst }',
        "}",
        'puts "@@leaves [llength $leaves]"',
        'puts "@@begin instances"',
        f"if {{[llength $leaves]}} {{ report_power -instances $leaves -digits {POWER_DIGITS} }}",
        'puts "@@end instances"',
        f'puts "{_END}"',
    ]
    text, log = _run_script(folder, "power", lines, timeout_s, clock)
    return _parse_power_log(text, log, activity, period_ns, duty)
