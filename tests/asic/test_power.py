"""The gate-level netlist of a small circuit mapped onto Nangate45: simulated as the RTL behaves, its toggles counted
as worked out by hand, and its energy charged from the library as OpenSTA charges it at a global activity."""

import pytest

from dashraker.asic.liberty import read_liberty
from dashraker.asic.libraries import library
from dashraker.asic.netlist import Netlist, NetlistError, net_name
from dashraker.asic.power import CATEGORIES, charge
from dashraker.asic.synthesis import flat, measure
from dashraker.sim.toggle_model import ToggleModel

WIDTH = 4
# A counter (bit i toggles 2^(WIDTH-i) times over 2^WIDTH cycles), reset synchronously as Amaranth's registers are,
# and a registered 8-bit sum of two inputs (logic of a width that needs several cells per bit).
COUNTER = f"""
module counter(input clk, input rst, input [7:0] a, input [7:0] b, output [{WIDTH - 1}:0] q, output [8:0] s);
  reg [{WIDTH - 1}:0] count;
  reg [8:0] sum;
  always @(posedge clk) begin
    if (rst) count <= 0; else count <= count + 1;
    sum <= a + b;
  end
  assign q = count;
  assign s = sum;
endmodule
"""
PERIOD_NS = 2.0


@pytest.fixture(scope="module")
def mapped(tmp_path_factory):
    folder = tmp_path_factory.mktemp("counter")
    lib = library("nangate45")
    area = measure(COUNTER, "counter", lib, PERIOD_NS, folder, progress=False)
    liberty = read_liberty(lib.path("liberty"))
    return folder, area, Netlist(flat(folder, "counter", lib, progress=False), "counter", liberty), lib


@pytest.fixture(scope="module")
def model(mapped, tmp_path_factory):
    folder, _, netlist, _ = mapped
    return ToggleModel(netlist.simulation_verilog(), "counter", tmp_path_factory.mktemp("counter_model"))


def _reset(model):
    model.io.rst = 1
    model.tick(2)
    model.io.rst = 0


def test_area_is_the_library_cells(mapped):
    _, area, netlist, _ = mapped
    liberty = netlist.liberty
    assert area["um2"] == pytest.approx(sum(liberty.cells[c.type].area for c in netlist.cells), rel=1e-9)
    flops = [c for c in netlist.cells if liberty.cells[c.type].sequential is not None]
    assert area["flip_flops"] == len(flops) == WIDTH + 9
    assert area["gates"] == pytest.approx(area["um2"] / liberty.cells["NAND2_X1"].area)


def test_the_netlist_counts_and_adds_as_the_rtl(model):
    _reset(model)
    seen = []
    for a, b in ((3, 4), (200, 100), (255, 255), (0, 0), (17, 38)):
        model.io.a, model.io.b = a, b
        model.tick()
        seen.append((int(model.io.q), int(model.io.s), a + b))
    assert [q for q, _, _ in seen] == [1, 2, 3, 4, 5]
    assert [s for _, s, _ in seen] == [want for _, _, want in seen]


def test_counter_bits_toggle_as_worked_out(mapped, model):
    _, _, netlist, _ = mapped
    _reset(model)
    model.io.a = model.io.b = 0
    model.tick(WIDTH)  # the adder's inputs settle; the counter goes on from WIDTH
    model.zero()
    model.tick(2 ** WIDTH)  # a whole count: bit i toggles 2^(WIDTH - i) times
    toggles = {name: bits[0] for name, bits in model.nets().items()}
    for i, bit in enumerate(netlist.ports["q"][1]):
        cell, pin = netlist.drivers[bit]
        assert netlist.liberty.cells[cell.type].sequential is not None, f"q[{i}] is not a flip-flop's output"
        assert toggles[net_name(bit)] == 2 ** (WIDTH - i), f"q[{i}]"
    for bit in netlist.ports["s"][1]:
        assert toggles[net_name(bit)] == 0  # constant inputs: the sum register holds still


def test_a_still_circuit_costs_its_clock_and_leakage_only(mapped):
    _, _, netlist, lib = mapped
    energy = charge(netlist, {}, 100, PERIOD_NS, lib)
    assert energy.total["internal"] == energy.total["switching"] == 0
    leakage_nw = sum(netlist.liberty.cells[c.type].leakage for c in netlist.cells)
    assert energy.total["leakage"] == pytest.approx(leakage_nw * 100 * PERIOD_NS * 1e-3)  # nW x ns = 1e-3 fJ
    assert energy.classes["flip_flops"]["clock"] == energy.total["clock"] > 0
    assert energy.mw == pytest.approx(energy.fj / (100 * PERIOD_NS) / 1e3)


def test_switching_is_half_cv2_of_each_toggled_net(mapped):
    _, _, netlist, lib = mapped
    bit = netlist.ports["q"][1][0]
    energy = charge(netlist, {bit: 10}, 100, PERIOD_NS, lib)
    flop, _ = netlist.drivers[bit]  # its outputs all switch with its state
    outputs = [b for pin, b in flop.pins.items() if pin in netlist.liberty.cells[flop.type].outputs]
    pins = [netlist.liberty.cells[cell.type].pins[pin].capacitance for b in outputs for cell, pin in netlist.fanout[b]]
    assert energy.total["switching"] == pytest.approx(0.5 * sum(pins) * 1.1 ** 2 * 10)
    assert energy.total["internal"] > 0  # the driving flip-flop's output arcs
    assert energy.fj == pytest.approx(sum(energy.total[c] for c in CATEGORIES))


@pytest.fixture(scope="module")
def opensta(mapped, tmp_path_factory):
    """OpenSTA's report_power of the netlist at a global activity (its own activity is right when every net switches
    alike) and at none (the clock pins alone), beside the charge of the same activity."""
    timing = pytest.importorskip("dashraker.asic.timing")
    try:
        timing.find_sta()
    except timing.TimingError as error:
        pytest.skip(str(error))
    folder, _, netlist, lib = mapped
    cycles, activity = 1000, 0.2
    bits = (set(netlist.drivers) | set(netlist.fanout)) - {netlist.clock}
    ours = charge(netlist, dict.fromkeys(bits, activity * cycles), cycles, PERIOD_NS, lib)
    reports = [timing.sta_power(folder / "netlist.v", "counter", lib.path("liberty"), PERIOD_NS, a,
                                tmp_path_factory.mktemp(f"sta{a}")) for a in (activity, 0.0)]
    to_fj = cycles * PERIOD_NS * 1e-9 * 1e15  # W over the run, in fJ
    return ours, [{key: watts * to_fj for key, watts in report.total.items()} for report in reports], reports, \
        dict.fromkeys(bits, activity * cycles), cycles


def test_leakage_and_switching_are_openstas(opensta):
    ours, (theirs, _), *_ = opensta
    assert ours.total["leakage"] == pytest.approx(theirs["leakage"], rel=0.01)
    # OpenSTA charges a net's switching to its driving cell: the nets the input ports drive have none
    assert ours.total["switching"] == pytest.approx(theirs["switching"], rel=0.01)
    assert ours.inputs > 0


def test_clock_pins_are_openstas(mapped, opensta):
    """At no activity OpenSTA's internal power is the clock pins' alone; the charge's clock also holds the clock net's
    switching (a port's net, which OpenSTA charges to no cell)."""
    _, _, netlist, _ = mapped
    ours, (_, still), *_ = opensta
    clock_net = 0.5 * netlist.loads[netlist.clock] * 1.1 ** 2 * 2 * 1000
    assert ours.total["clock"] - clock_net == pytest.approx(still["internal"], rel=0.01)


def test_single_arc_cells_are_openstas_halved(mapped, opensta):
    """Where an output has one power arc (inverters, buffers) the charge per toggle is the arc's mean of rise and fall
    energy, as today's OpenSTA has it; this OpenSTA (Debian's, of 2019: search/Power.cc, findInternalPower) charges
    each transition the sum of both, twice as much (and over several arcs, the sum of each arc's rise and fall at the
    probability of its state: docs/results/asic.md). It reads the tables at the slews it propagates, the charge at
    the library's stated slew."""
    import copy

    _, _, netlist, lib = mapped
    _, _, (report, _), toggles, cycles = opensta
    single = [c for c in netlist.cells if c.type.startswith(("INV_", "BUF_"))]
    assert single, "the mapping has no inverter or buffer to compare"
    for cell in single:
        alone = copy.copy(netlist)
        alone.cells = [cell]
        ours = charge(alone, toggles, cycles, PERIOD_NS, lib).total["internal"]
        theirs = report.instances[cell.name]["internal"] * cycles * PERIOD_NS * 1e6  # W x ns in fJ
        assert 2 * ours == pytest.approx(theirs, rel=0.1), cell


def test_a_netlist_without_a_clock_port_is_refused(mapped, tmp_path):
    folder, _, netlist, _ = mapped
    text = (folder / "flat.json").read_text().replace('"clk"', '"clock"')
    (tmp_path / "flat.json").write_text(text)
    with pytest.raises(NetlistError, match="no one-bit clock port 'clk'"):
        Netlist(tmp_path / "flat.json", "counter", netlist.liberty)
