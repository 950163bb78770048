"""Energy of a gate-level netlist from its simulated switching, charged from the Liberty tables cell by cell.

For a run of ``cycles`` clock cycles at ``period_ns`` in which net bit b toggled t(b) times:

- internal: each toggle of a cell's output pin costs the mean of the pin's ``rise_power`` and ``fall_power``
  at the library's stated input slew (``Library.slew_ns``) and the net's load; a pin with arcs from several
  related pins weighs each by the toggles of its related pin's net (all alike where none toggled), and the
  ``when`` states of one related pin by their probability with every pin at duty 0.5. An input pin's own
  tables (a flip-flop's clock and data pins) are charged per toggle of its net, the clock's twice a cycle;
- switching: half the load's capacitance times the supply squared per toggle, the load being the input pins
  a net drives (no wire load: the mapping has no placement); the clock net likewise, twice a cycle, with no
  clock tree. Nets driven from outside the tile (its input ports) are reported apart, as ``inputs``;
- leakage: each cell's ``cell_leakage_power`` over the run's time.

This is the method of OpenSTA's ``report_power`` with the slews fixed instead of propagated, and
activities counted instead of propagated; ``docs/results/asic.md`` compares the two on one netlist at
one global activity. Zero-delay simulation has no glitches beyond the two evaluations of a cycle
(``sim.toggles``).
"""

import functools
import itertools
import re
from dataclasses import dataclass, field

from dashraker.asic.liberty import evaluate

__all__ = ["CATEGORIES", "Energy", "charge"]

CATEGORIES = ("internal", "switching", "clock", "leakage")


@dataclass
class Energy:
    """Energy (fJ) of a run by category (``CATEGORIES``), in all, per class of cell (``flip_flops``, ``logic``),
    per part and per instance below the top (``instances``: the first level, the top's own cells under "");
    ``inputs``: the switching of the nets the tile's input ports drive."""

    cycles: int
    period_ns: float
    total: dict = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0.0))
    classes: dict = field(default_factory=dict)
    parts: dict = field(default_factory=dict)
    instances: dict = field(default_factory=dict)
    inputs: float = 0.0

    @property
    def fj(self):
        return sum(self.total.values())

    @property
    def mw(self):
        """Mean power over the run (mW): fJ / ns is uW."""
        return self.fj / (self.cycles * self.period_ns) / 1000 if self.cycles else 0.0

    def as_dict(self):
        return {"cycles": self.cycles, "period_ns": self.period_ns, "fj": self.fj, "mw": self.mw, "total": self.total,
                "classes": self.classes, "parts": self.parts, "instances": self.instances,
                "inputs_fj": self.inputs}


@functools.lru_cache(maxsize=None)  # a library has a few hundred distinct states; a tile, their cells many times
def _when_weight(when):
    """The probability that the state condition ``when`` holds with every pin it reads at duty 0.5."""
    if not when:
        return 1.0
    names = sorted(set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", when)))
    hits = sum(evaluate(when, dict(zip(names, bits))) for bits in itertools.product((0, 1), repeat=len(names)))
    return hits / 2 ** len(names)


def _arc_energy(arcs, load, slew):
    """{related pin: energy per toggle} of a pin's power arcs at ``load`` and ``slew``: rise and fall averaged, the
    ``when`` states weighed by their probability."""
    sums = {}
    for arc in arcs:
        values = [table.lookup(input_transition_time=slew, input_net_transition=slew,
                               total_output_net_capacitance=load) for table in (arc.rise, arc.fall) if table]
        if not values:
            continue
        weight = _when_weight(arc.when)
        energy, total = sums.get(arc.related_pin, (0.0, 0.0))
        sums[arc.related_pin] = (energy + weight * sum(values) / len(values), total + weight)
    return {pin: energy / weight for pin, (energy, weight) in sums.items() if weight}


def _part_of(instance, patterns):
    """The parts (name -> compiled instance-path regex) that hold a cell of module instance ``instance``: those
    matching it or a module above it; "tile_own" for the top's own cells."""
    if not instance:
        return ["tile_own"]
    prefixes = [".".join(instance.split(".")[:depth]) for depth in range(1, instance.count(".") + 2)]
    return [name for name, pattern in patterns.items() if any(pattern.fullmatch(p) for p in prefixes)]


def charge(netlist, toggles, cycles, period_ns, library, area_parts=None):
    """The ``Energy`` of a run of ``netlist`` (``asic.netlist.Netlist``): ``toggles`` {net bit: toggles},
    ``cycles`` clock cycles at ``period_ns``; parts by ``area_parts`` (name -> instance-path regex)."""
    liberty = netlist.liberty
    volts2 = liberty.voltage ** 2
    energy_unit = liberty.internal_energy_fj
    cap_fj = liberty.capacitance_ff  # C [unit] x V^2 in fJ
    leak_fj = liberty.leakage_nw * period_ns * cycles * 1e-3  # nW x ns = 1e-3 fJ
    slew = library.slew_ns / liberty.time_unit_ns
    patterns = {name: re.compile(pattern) for name, pattern in (area_parts or {}).items()}
    result = Energy(cycles, period_ns)
    clock_toggles = 2 * cycles
    arcs_cache, parts_of = {}, {}

    for cell in netlist.cells:
        library_cell = liberty.cells[cell.type]
        figures = dict.fromkeys(CATEGORIES, 0.0)
        figures["leakage"] = library_cell.leakage * leak_fj
        nets = {pin: bit for pin, bit in cell.pins.items() if not isinstance(bit, str)}
        # a flip-flop's outputs all switch with its state, connected or not
        state = max((toggles.get(nets[pin], 0) for pin in library_cell.outputs if pin in nets), default=0) \
            if library_cell.sequential is not None else None
        for pin, info in library_cell.pins.items():
            bit = nets.get(pin)
            if pin in library_cell.outputs:
                count = state if state is not None else toggles.get(bit, 0)
                if not count:
                    continue
                load = netlist.loads.get(bit, 0.0)
                figures["switching"] += 0.5 * load * cap_fj * volts2 * count
                per_pin = _arc_energy(info.internal_power, load, slew)
                if per_pin:
                    weights = {related: toggles.get(nets.get(related), 0) if related else 1 for related in per_pin}
                    if not sum(weights.values()):
                        weights = dict.fromkeys(per_pin, 1)
                    mean = sum(per_pin[r] * w for r, w in weights.items()) / sum(weights.values())
                    figures["internal"] += mean * energy_unit * count
                continue
            if bit is None:
                continue
            if info.internal_power:
                key = (cell.type, pin)
                if key not in arcs_cache:
                    arcs_cache[key] = _arc_energy(info.internal_power, 0.0, slew)
                per_toggle = sum(arcs_cache[key].values()) / len(arcs_cache[key]) if arcs_cache[key] else 0.0
                if bit == netlist.clock:
                    figures["clock"] += per_toggle * energy_unit * clock_toggles
                else:
                    figures["internal"] += per_toggle * energy_unit * toggles.get(bit, 0)
            if bit == netlist.clock:
                figures["clock"] += 0.5 * info.capacitance * cap_fj * volts2 * clock_toggles
        kind = "flip_flops" if library_cell.sequential is not None else "logic"
        if cell.instance not in parts_of:
            parts_of[cell.instance] = _part_of(cell.instance, patterns)
        targets = [result.total, result.classes.setdefault(kind, dict.fromkeys(CATEGORIES, 0.0)),
                   result.instances.setdefault(cell.instance.split(".")[0], dict.fromkeys(CATEGORIES, 0.0)),
                   *(result.parts.setdefault(part, dict.fromkeys(CATEGORIES, 0.0))
                     for part in parts_of[cell.instance])]
        for target in targets:
            for category, value in figures.items():
                target[category] += value
    inputs = {bit for direction, bits in netlist.ports.values() if direction == "input" for bit in bits
              if not isinstance(bit, str) and bit != netlist.clock}
    result.inputs = sum(0.5 * netlist.loads.get(bit, 0.0) * cap_fj * volts2 * toggles.get(bit, 0) for bit in inputs)
    return result
