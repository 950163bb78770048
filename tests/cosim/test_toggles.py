"""Toggle counts (``sim.toggles``) checked by hand on small circuits, the generated counters against Verilator's
toggle coverage.

Convention: a toggle is one change of a bit's value, 0 to 1 or 1 to 0.
"""

import numpy as np
import pytest
from amaranth import Elaboratable, Module, Signal

from dashraker.sim.toggle_model import ToggleModel
from dashraker.sim.toggles import counted_nets, counter_code, per_instance


class _Counter(Elaboratable):
    def __init__(self, width):
        self.count = Signal(width)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.count.eq(self.count + 1)
        return m


class _Adder(Elaboratable):
    def __init__(self, width):
        self.x, self.y, self.sum = Signal(width), Signal(width), Signal(width + 1)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.sum.eq(self.x + self.y)
        return m


class _Loaded(Elaboratable):
    """A register loaded from ``data`` each cycle; a counter beside it, as a second instance; an adder of the
    register and its previous value, a third."""

    def __init__(self, width, counter_bits):
        self.data = Signal(width)
        self.q = Signal(width)
        self.count = Signal(counter_bits)

    def elaborate(self, platform):
        m = Module()
        m.submodules.counter = counter = _Counter(len(self.count))
        m.submodules.adder = adder = _Adder(len(self.data))
        held = Signal.like(self.q)  # the register's previous value: both operands change at the clock edge
        m.d.sync += held.eq(self.q)
        m.d.comb += [adder.x.eq(self.q), adder.y.eq(held)]
        m.d.sync += self.q.eq(self.data)
        m.d.comb += self.count.eq(counter.count)
        return m


def _model(component, name, ports, folder, method="counters", per_bit=True):
    from amaranth.back import verilog

    text = verilog.convert(component, name=name, ports=ports, emit_src=False)
    return ToggleModel(text, name, folder / f"{name}-{method}-{per_bit}", method, per_bit)


def _loaded_model(folder, method="counters", per_bit=True, width=8):
    dut = _Loaded(width, counter_bits=5)
    name = "loaded" if width == 8 else f"loaded{width}"  # a process's models of one name must share one layout
    return _model(dut, name, [dut.data, dut.q, dut.count], folder, method, per_bit)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """One small build for every test here, counters per net bit (Verilator and g++ at -O0: about 15 s on a busy
    2-core machine)."""
    return _loaded_model(tmp_path_factory.mktemp("toggles"))


def test_counter_bits(loaded):
    """An n-bit counter over 2^n cycles: bit i toggles 2^(n-i) times (bit 0 the least significant)."""
    n, model = 5, loaded
    model.tick(3)  # anywhere in its cycle: a full period has the same toggles
    model.zero()
    model.tick(1 << n)
    assert model.nets("loaded.counter")["count"] == [1 << (n - i) for i in range(n)]
    model.zero()
    count = int(model.io.count)
    model.tick(1)
    changed = count ^ ((count + 1) % (1 << n))
    assert model.nets("loaded.counter")["count"] == [(changed >> i) & 1 for i in range(n)]


def test_register_alternating_patterns(loaded):
    """A register loaded with 0x55 and 0xAA in turn: every bit of its input and output changes every cycle;
    the same pattern held: nothing changes; a new pattern: the bits that differ, once."""
    model = loaded
    model.io.data = 0x55
    model.tick()
    model.zero()
    cycles = 10
    for cycle in range(cycles):
        model.io.data = 0xAA if cycle % 2 == 0 else 0x55
        model.tick()
    nets = model.nets()
    assert nets["data"] == [cycles] * 8 and nets["q"] == [cycles] * 8
    model.zero()
    model.tick(7)  # 0x55 held
    assert model.nets()["q"] == [0] * 8
    model.io.data = 0x0F
    model.tick()
    # 0x55 = 0101_0101 -> 0x0F = 0000_1111: bits 1 and 3 rise, 4 and 6 fall
    assert model.nets()["q"] == [0, 1, 0, 1, 1, 0, 1, 0]


def test_instances_apart(loaded):
    """The counter instance's nets are counted apart from the top's (per instance, Amaranth's module path), clock
    and reset left out; an instance's toggles and bits are those of its nets."""
    model = loaded
    model.zero()
    model.tick(32)
    counts = model.counts()
    assert set(counts) == {"", "counter", "adder"}
    for name, module in (("counter", "loaded.counter"), ("adder", "loaded.adder"), ("", None)):
        nets = {net: bits for net, bits in model.nets(module).items() if net not in ("clk", "rst")}
        assert counts[name].toggles == sum(map(sum, nets.values())) and counts[name].bits == sum(map(len, nets.values()))
    assert "clk" not in model.nets("loaded.counter")  # charged as clocking instead
    # the counter's register alone: 32 + 16 + 8 + 4 + 2; its next value and the top's copy of it toggle too
    assert counts["counter"].toggles > 62 and counts[""].toggles >= 62


def test_adder_activity_with_random_operands(loaded):
    """The energy table's activity rule: an adder's net bits toggle in about half of the operations with random
    operands (a new random value each cycle, added to the previous one; both registers change at the clock edge)."""
    model, rng, cycles = loaded, np.random.default_rng(1), 2000
    model.zero()
    for value in rng.integers(0, 256, cycles):
        model.io.data = int(value)
        model.tick()
    adder = model.counts()["adder"]
    assert 0.45 < adder.toggles / (adder.bits * cycles) < 0.55


def test_per_instance_reads_points():
    points = [("t", "clk", 8), ("t", "a[0]", 3), ("t", "a[1]", 1), ("t.u", "b", 2), ("t.u", "rst", 1),
              ("other", "c", 5), ("tt.u", "d", 1)]  # another model's modules (one coverage context per process)
    counts = per_instance(points, "t")
    assert (counts[""].toggles, counts[""].bits) == (4, 2)
    assert (counts["u"].toggles, counts["u"].bits) == (2, 1)
    assert np.sum([c.toggles for c in counts.values()]) == 6


def test_counted_nets_of_a_header():
    """The counters' nets from a model header: scalars, wide vectors and unpacked arrays below the top, per scope;
    the model's ports, clock, reset and Verilator's own variables left out; the scalars counted from tables."""
    header = """
    VL_IN8(clk,0,0);
    VL_OUT8(q,7,0);
    CData/*7:0*/ t__DOT__q;
    CData/*0:0*/ t__DOT__clk;
    SData/*8:0*/ t__DOT__u__DOT____024signal;
    QData/*39:0*/ t__DOT__u__DOT__x;
    VlWide<3>/*69:0*/ t__DOT__u__DOT__v__DOT__w;
    VlUnpacked<IData/*31:0*/, 5> t__DOT__fifo__DOT__storage;
    IData/*31:0*/ t__DOT__fifo__DOT___0_;
    IData/*31:0*/ t__DOT__fifo__DOT____Vlvbound_h1__0;
    CData/*0:0*/ __VactContinue;
"""
    nets = counted_nets(header, "t")
    assert [(n.instance, n.name.split("__DOT__")[-1], n.bits, n.words, n.elements) for n in nets] == [
        ("t", "q", 8, 1, 1), ("t.u", "__024signal", 9, 1, 1), ("t.u", "x", 40, 1, 1), ("t.u.v", "w", 70, 3, 1),
        ("t.fifo", "storage", 32, 1, 5)]
    code = counter_code(nets, "Vt", "Vt___024root")
    assert "static uint64_t cosim_toggle_counts[5];" in code and "cosim_toggle_last[11];" in code  # 1+1+1+3+5
    assert "for (int w = 0; w < 3; ++w)" in code and "for (int e = 0; e < 5; ++e)" in code
    # the scalars from tables of their offsets, one per C type, in counter and slot order (wide w took slots 3-5)
    assert "cosim_toggle_CData[1] = {\n    {offsetof(Vt___024root, t__DOT__q), 0, 8, 0}," in code
    assert "cosim_toggle_SData[1] = {\n    {offsetof(Vt___024root, t__DOT__u__DOT____024signal), 1, 9, 1}," in code
    assert "cosim_toggle_QData[1] = {\n    {offsetof(Vt___024root, t__DOT__u__DOT__x), 2, 40, 2}," in code
    assert "r->t__DOT__q" not in code and "r->t__DOT__u__DOT__v__DOT__w[w]" in code
    assert "cosim_toggle_counts[287];" in counter_code(nets, "Vt", "Vt___024root", per_bit=True)  # 8+9+40+70+32x5


@pytest.mark.slow  # three small Verilator builds: about 45 s on a busy 2-core machine
def test_counters_agree_with_coverage(tmp_path):
    """The generated counters (per net, as co-simulation builds them, and per net bit) count what Verilator's toggle
    coverage counts, per instance and per net bit, on random register loads."""
    models = {(method, per_bit): _loaded_model(tmp_path, method, per_bit)
              for method, per_bit in (("counters", False), ("counters", True), ("coverage", True))}
    data = np.random.default_rng(2).integers(0, 256, 300)
    counts, nets = {}, {}
    for key, model in models.items():
        model.tick(3)
        model.zero()
        for value in data:
            model.io.data = int(value)
            model.tick()
        counts[key] = {name: (c.toggles, c.bits) for name, c in model.counts().items()}
        if key[1]:
            nets[key] = {module: {net: bits for net, bits in model.nets(module).items() if net not in ("clk", "rst")}
                         for module in ("loaded", "loaded.counter", "loaded.adder")}
    assert counts[("counters", False)] == counts[("counters", True)] == counts[("coverage", True)]
    assert nets[("counters", True)] == nets[("coverage", True)]
    assert counts[("coverage", True)]["adder"][0] > 0


@pytest.mark.slow  # two small Verilator builds: about 30 s on a busy 2-core machine
def test_wide_nets_beside_scalars_by_hand(tmp_path):
    """Wide nets (counted by a statement each) beside scalars (counted from tables of their offsets), per net bit and
    per net: a 70-bit register loaded with random words toggles, bit by bit, where consecutive words differ; the
    register holding its previous value one word later; the 5-bit counter beside them as over any 32 cycles."""
    width, n = 70, 5
    rng = np.random.default_rng(3)
    words = [int.from_bytes(rng.bytes(16), "little") % (1 << width) for _ in range((1 << n) + 1)]
    models = [_loaded_model(tmp_path, "counters", per_bit, width) for per_bit in (True, False)]
    for model in models:
        model.io.data = words[0]
        model.tick(3)  # q and the held copy both words[0]
        model.zero()
        for word in words[1:]:
            model.io.data = word
            model.tick()

    def changes(sequence):
        return [sum((a ^ b) >> bit & 1 for a, b in zip(sequence, sequence[1:])) for bit in range(width)]

    nets = models[0].nets("loaded70")
    assert nets["q"] == changes(words) and nets["held"] == changes(words[:-1])
    assert models[0].nets("loaded70.counter")["count"] == [1 << (n - i) for i in range(n)]
    per_bit, per_net = ({name: (c.toggles, c.bits) for name, c in model.counts().items()} for model in models)
    assert per_net == per_bit and per_bit[""][0] > 0
