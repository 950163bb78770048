"""OpenSTA timing and power of tiny netlists mapped onto the Nangate cells: path order, names, figures, refusals."""

import re
from collections import Counter
from pathlib import Path

import pytest

from dashraker.asic import timing as timing_module
from dashraker.asic.libraries import library
from dashraker.asic.synthesis import measure
from dashraker.asic.timing import TimingError, find_sta, sta_power, timing

try:
    find_sta()
except TimingError as error:
    pytest.skip(f"OpenSTA is not installed here ({error})", allow_module_level=True)

LIBERTY = library("nangate45").path("liberty")
PERIOD = 2.0  # ns

# A registered ripple adder: two input registers, the sum's register, and an output that reads the sum through an
# XOR tree (so that the sum register keeps its own name rather than an output port's).
ADDER = """
module adder #(parameter N = 8) (input clk, input [N-1:0] a, input [N-1:0] b, output parity);
  reg [N-1:0] ra, rb, acc;
  always @(posedge clk) begin ra <= a; rb <= b; acc <= ra + rb; end
  assign parity = ^acc;
endmodule
module add8(input clk, input [7:0] a, input [7:0] b, output parity);
  adder #(.N(8)) u_add(.clk(clk), .a(a), .b(b), .parity(parity));
endmodule
module add32(input clk, input [31:0] a, input [31:0] b, output parity);
  adder #(.N(32)) u_add(.clk(clk), .a(a), .b(b), .parity(parity));
endmodule
"""
# The 32-bit sum in two stages: the low half and its carry registered, the high half added a cycle later.
PIPELINED = """
module pipe32(input clk, input [31:0] a, input [31:0] b, output parity);
  reg [31:0] ra, rb, acc;
  reg [16:0] low;
  reg [15:0] high_a, high_b, low_sum;
  always @(posedge clk) begin
    ra <= a; rb <= b;
    low <= ra[15:0] + rb[15:0]; high_a <= ra[31:16]; high_b <= rb[31:16];
    acc <= {high_a + high_b + low[16], low[15:0]};
  end
  assign parity = ^acc;
endmodule
"""
# One register stage between the ports: input-to-register and register-to-output paths, none between registers.
ONE_STAGE = """
module one_stage(input clk, input [7:0] a, input [7:0] b, output [7:0] s);
  reg [7:0] r;
  always @(posedge clk) r <= a + b;
  assign s = r;
endmodule
"""
COMBINATIONAL = "module comb(input [7:0] a, input [7:0] b, output [7:0] s); assign s = a + b; endmodule\n"


def synthesise(verilog, top, folder):
    """The project's ASIC mapping flow (``asic.synthesis``: Yosys, dfflibmap and ABC onto the Liberty cells), its
    netlist's path."""
    measure(verilog, top, library("nangate45"), 1.0, folder, progress=False)
    return folder / "netlist.v"


@pytest.fixture(scope="module")
def netlists(tmp_path_factory):
    root = tmp_path_factory.mktemp("netlists")
    designs = {"add8": ADDER, "add32": ADDER, "pipe32": PIPELINED, "one_stage": ONE_STAGE, "comb": COMBINATIONAL}
    return {top: synthesise(verilog, top, root / top) for top, verilog in designs.items()}


@pytest.fixture(scope="module")
def timing_root(tmp_path_factory):
    return tmp_path_factory.mktemp("timing")


@pytest.fixture(scope="module")
def adder_timings(netlists, timing_root):
    return {top: timing(netlists[top], top, LIBERTY, PERIOD, timing_root / top, paths=3)
            for top in ("add8", "add32", "pipe32")}


@pytest.fixture(scope="module")
def powers(netlists, tmp_path_factory):
    root = tmp_path_factory.mktemp("power")
    return {activity: sta_power(netlists["add8"], "add8", LIBERTY, PERIOD, activity, root / str(activity))
            for activity in (0.0, 0.1, 0.2)}


def cell_leakage_nw(cells):
    """Each cell's ``cell_leakage_power`` from the Liberty text (nW: the library's leakage_power_unit)."""
    text = LIBERTY.read_text()
    assert re.search(r'leakage_power_unit\s*:\s*"1nW"', text)
    leakage = {}
    for cell in cells:
        match = re.search(rf"\bcell \({re.escape(cell)}\) \{{.*?cell_leakage_power\s*:\s*([\d.eE+-]+)\s*;", text, re.S)
        leakage[cell] = float(match[1])
    return leakage


def netlist_cells(netlist):
    """Cell type of every leaf instance in a Yosys netlist of Liberty cells ("  AND2_X1 _12_ (")."""
    return Counter(re.findall(r"^\s+([A-Z][A-Z0-9]*_X\d+) \S+ \($", netlist.read_text(), re.M))


def test_a_wider_adder_is_slower_from_input_registers_to_the_sum_register(adder_timings):
    narrow, wide = adder_timings["add8"].worst, adder_timings["add32"].worst
    assert wide.delay_ns > narrow.delay_ns + 0.2  # 24 more carry stages, tens of ps each
    for path in (narrow, wide):
        assert re.fullmatch(r"u_add\.r[ab]\[\d+\]", path.start_register), path.start_register
        assert re.fullmatch(r"u_add\.acc\[\d+\]", path.end_register), path.end_register
        assert re.fullmatch(r"u_add\._\d+_", path.start) and re.fullmatch(r"u_add\._\d+_", path.end)
        assert path.fmax_mhz == pytest.approx(1000 / path.delay_ns)
        assert path.delay_ns == pytest.approx(path.arrival_ns + path.setup_ns)
        assert path.slack_ns == pytest.approx(PERIOD - path.delay_ns, abs=2e-4)
        assert 0.01 < path.setup_ns < 0.1 and path.period_ns == PERIOD
        first, *middle, last = path.stages
        assert (first.instance, first.pin, first.net, first.arrival_ns) == (path.start, "CK", None, 0.0)
        assert (last.instance, last.pin, last.cell) == (path.end, "D", "DFF_X1")
        assert last.arrival_ns == pytest.approx(path.arrival_ns)
        assert middle[0].net == path.start_register  # the launching Q pin drives the register's own net
        arrivals = [stage.arrival_ns for stage in path.stages]
        assert arrivals == sorted(arrivals)
        assert sum(stage.delay_ns for stage in path.stages) == pytest.approx(path.arrival_ns, abs=1e-3 * len(arrivals))
    # The 32-bit carry chain runs past the 8-bit one's bits: its worst path ends on a higher sum bit.
    bit = (lambda name: int(re.search(r"\[(\d+)\]", name)[1]))
    assert bit(narrow.end_register) <= 7 < bit(wide.end_register)


def test_paths_are_the_worst_few_to_distinct_end_registers_worst_first(adder_timings):
    result = adder_timings["add32"]
    assert len(result.paths) == 3 and result.paths[0] == result.worst
    assert len({path.end for path in result.paths}) == 3
    slacks = [path.slack_ns for path in result.paths]
    assert slacks == sorted(slacks)
    assert result.fmax_mhz == result.worst.fmax_mhz
    assert result.input_to_register_ns is not None and result.input_to_register_ns < result.worst.delay_ns


def test_a_register_halfway_along_the_carry_chain_makes_the_adder_faster(adder_timings):
    unpipelined, pipelined = adder_timings["add32"].worst, adder_timings["pipe32"].worst
    assert pipelined.delay_ns < 0.85 * unpipelined.delay_ns
    assert re.fullmatch(r"(acc|low|high_[ab]|r[ab])\[\d+\]", pipelined.end_register), pipelined.end_register


def test_a_design_without_register_to_register_paths_has_no_worst_path(netlists, tmp_path):
    one_stage = timing(netlists["one_stage"], "one_stage", LIBERTY, PERIOD, tmp_path / "one")
    assert one_stage.worst is None and one_stage.paths == () and one_stage.fmax_mhz is None
    assert one_stage.input_to_register_ns > 0.2  # the 8-bit adder before the register
    assert 0 < one_stage.register_to_output_ns < 0.2  # a clock-to-Q
    comb = timing(netlists["comb"], "comb", LIBERTY, PERIOD, tmp_path / "comb")
    assert comb.worst is None and comb.input_to_register_ns is None and comb.register_to_output_ns is None
    assert (tmp_path / "comb" / "timing.tcl").is_file() and (tmp_path / "comb" / "timing.log").is_file()


def test_a_folder_given_relative_to_the_working_directory(netlists, adder_timings, tmp_path, monkeypatch):
    """OpenSTA runs inside the folder: the default ``--build`` (build/asic) is relative to the caller's."""
    monkeypatch.chdir(tmp_path)
    relative = timing(netlists["add8"], "add8", LIBERTY, PERIOD, Path("build") / "add8")
    assert relative.worst == adder_timings["add8"].worst and (tmp_path / "build" / "add8" / "timing.log").is_file()


def test_a_library_of_another_node_and_without_tie_cells(adder_timings, tmp_path):
    """osu018 (0.18 um, 1.8 V, no tie cells): the same adder maps onto its cells, constants stay constants, and its
    carry chain is slower than on the 45 nm cells."""
    from dashraker.asic.liberty import read_liberty

    osu = library("osu018")
    measure(ADDER.replace("ra + rb", "ra + rb + 1"), "add8", osu, 4.0, tmp_path / "osu", progress=False)
    cells = Counter(re.findall(r"^\s+([A-Z][A-Z0-9]*) \S+ \($", (tmp_path / "osu" / "netlist.v").read_text(), re.M))
    assert cells["DFFPOSX1"] == 24 and set(cells) <= set(read_liberty(osu.path("liberty")).cells)
    timed = timing(tmp_path / "osu" / "netlist.v", "add8", osu.path("liberty"), 4.0, tmp_path / "osu_timing")
    assert re.fullmatch(r"u_add\.r[ab]\[\d+\]", timed.worst.start_register)
    assert re.fullmatch(r"u_add\.acc\[\d+\]", timed.worst.end_register)
    assert timed.worst.stages[-1].cell == "DFFPOSX1"
    assert timed.worst.delay_ns > 2 * adder_timings["add8"].worst.delay_ns


def test_power_grows_with_activity_and_leakage_does_not(powers):
    low, high, idle = powers[0.1], powers[0.2], powers[0.0]
    assert high.total["switching"] == pytest.approx(2 * low.total["switching"], rel=0.02)
    assert idle.total["switching"] < 1e-3 * low.total["switching"]
    # The flip-flops' clock pins switch twice a period whatever the activity: internal power is that plus a part
    # proportional to the activity (all of it in the combinational cells).
    assert high.groups["Combinational"]["internal"] == pytest.approx(2 * low.groups["Combinational"]["internal"],
                                                                     rel=0.02)
    assert high.total["internal"] - low.total["internal"] == pytest.approx(low.total["internal"]
                                                                           - idle.total["internal"], rel=0.02)
    assert idle.total["internal"] > 0.5 * low.total["internal"]
    assert high.total_w > low.total_w > idle.total_w
    assert low.total["leakage"] == high.total["leakage"] == idle.total["leakage"] > 0
    assert (low.activity, low.period_ns, low.duty) == (0.1, PERIOD, 0.5)


def test_leakage_is_the_liberty_cell_leakage_of_every_instance(powers, netlists):
    cells = netlist_cells(netlists["add8"])
    assert cells["DFF_X1"] == 24 and sum(cells.values()) > 40
    leakage = cell_leakage_nw(cells)
    expected = sum(count * leakage[cell] for cell, count in cells.items()) * 1e-9
    report = powers[0.1]
    assert report.total["leakage"] == pytest.approx(expected, rel=0.01)
    assert len(report.instances) == sum(cells.values())
    assert all(re.fullmatch(r"u_add\._\d+_", name) for name in report.instances)
    for key in ("internal", "switching", "leakage"):
        assert sum(row[key] for row in report.instances.values()) == pytest.approx(report.total[key], rel=1e-3)
    assert sum(group["leakage"] for group in report.groups.values()) == pytest.approx(expected, rel=0.01)
    assert report.groups["Sequential"]["leakage"] == pytest.approx(24 * leakage["DFF_X1"] * 1e-9, rel=0.01)


def test_a_wire_load_model_lengthens_paths_and_adds_switching(adder_timings, powers, netlists, tmp_path):
    # Timing defaults to the library's default_wire_load (5K_hvratio_1_1), power to none.
    bare = timing(netlists["add32"], "add32", LIBERTY, PERIOD, tmp_path / "bare", wire_load=None)
    assert bare.worst.delay_ns < adder_timings["add32"].worst.delay_ns - 0.02
    loaded = sta_power(netlists["add8"], "add8", LIBERTY, PERIOD, 0.1, tmp_path / "loaded", wire_load="5K_hvratio_1_1")
    assert loaded.total["switching"] > 1.1 * powers[0.1].total["switching"]
    assert loaded.total["leakage"] == powers[0.1].total["leakage"]
    assert "set_wire_load_model -name {5K_hvratio_1_1}" in (tmp_path / "loaded" / "power.tcl").read_text()


def test_a_missing_netlist_or_top_is_an_error_naming_it(netlists, tmp_path):
    with pytest.raises(TimingError, match="nowhere.v"):
        timing(tmp_path / "nowhere.v", "add8", LIBERTY, PERIOD, tmp_path / "missing")
    with pytest.raises(TimingError, match=r"no_such_top.*log: .*timing\.log"):
        timing(netlists["add8"], "no_such_top", LIBERTY, PERIOD, tmp_path / "top")
    with pytest.raises(TimingError, match=r"no_such_top.*log: .*power\.log"):
        sta_power(netlists["add8"], "no_such_top", LIBERTY, PERIOD, 0.1, tmp_path / "power")
    with pytest.raises(TimingError, match="registers but no clock port fast_clk"):
        timing(netlists["add8"], "add8", LIBERTY, PERIOD, tmp_path / "clock", clock="fast_clk")


def test_opensta_past_its_time_limit_is_stopped(netlists, tmp_path):
    with pytest.raises(TimingError, match=r"ran past 0.01 s and was stopped \(log: .*timing\.log\)"):
        timing(netlists["add32"], "add32", LIBERTY, PERIOD, tmp_path, timeout_s=0.01)


def test_a_report_that_does_not_parse_is_an_error_naming_the_log(adder_timings, timing_root):
    log = timing_root / "add32" / "timing.log"
    text = log.read_text()
    parsed = timing_module._parse_timing_log(text, log, PERIOD, 3)
    assert parsed == adder_timings["add32"]
    broken = [text.replace("library setup time", "library hold time", 1),  # an unknown line
              text.replace("slack (MET)", "slack (OK)", 1),  # no slack
              re.sub(r"^@@end reg2reg\n", "", text, flags=re.M),  # a section cut short
              re.sub(r"(?m)^(\s+)(\d\.\d{4})(\s+data arrival time)$", r"\g<1>9.9999\3", text, count=1)]  # sum
    for bad in broken:
        assert bad != text
        with pytest.raises(TimingError, match=re.escape(str(log))):
            timing_module._parse_timing_log(bad, log, PERIOD, 3)
    with pytest.raises(TimingError, match="not one period"):  # times read in the wrong unit
        timing_module._parse_timing_log(text, log, PERIOD * 1000, 3)


def test_no_sta_is_an_error_saying_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setattr(timing_module, "STA", str(tmp_path / "no-sta"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TimingError, match=r"OpenSTA \(sta\) not found: run `make setup` \(Debian package opensta\)"):
        find_sta()
