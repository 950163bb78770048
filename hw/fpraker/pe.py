"""The FPRaker PE: exponent unit, term-serial lanes, integer adder tree and the accumulator window."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.designs import FPRAKER
from dashraker.hw.fpraker.exponent_unit import ExponentUnit
from dashraker.hw.fpraker.lane import Lane, lane_layout
from dashraker.hw.fpraker.rounder import EXPONENT_BITS, accumulator_layout
from dashraker.models.fpraker.golden import window_width

__all__ = ["specials_layout", "pe_step_layout", "window_layout", "pe_control_signature", "PE"]


def specials_layout():
    """Special products of a step (or of a pass so far): a NaN, an Inf of either sign."""
    return data.StructLayout({"nan": 1, "pos_inf": 1, "neg_inf": 1})


def pe_step_layout(lanes):
    """A step for one PE: its lanes, the maximum product exponent over live lanes, whether any is live,
    and its special products."""
    return data.StructLayout({
        "lanes": data.ArrayLayout(lane_layout(), lanes),
        "max_exponent": signed(EXPONENT_BITS),
        "any_live": 1,
        "specials": specials_layout(),
    })


def window_layout(guard_bits):
    """The renormalised accumulator window: ``S`` (25 + G signed bits), ``Ea``, non-empty flag."""
    return data.StructLayout({"window": signed(25 + guard_bits), "exponent": signed(EXPONENT_BITS), "nonempty": 1})


def pe_control_signature():
    """The sequencer's strobes to every PE, as the sequencer drives them (a PE takes it flipped):

    ``load`` latches the next step (the next active cycle is its first); ``active``: this
    cycle issues terms; ``first``: this cycle is the step's first; ``finish``: the step
    ends at this clock edge (the window takes the renormalised sum); ``pass_end``: the
    pass ends at this clock edge (the accumulator empties after ``result`` was taken).
    """
    return wiring.Signature({name: Out(1) for name in ("load", "active", "first", "finish", "pass_end")})


def _tree_sum(values):
    """Balanced binary sum (adder tree) of signed values."""
    while len(values) > 1:
        values = [values[i] + values[i + 1] if i + 1 < len(values) else values[i] for i in range(0, len(values), 2)]
    return values[0]


def _renormalise(m, total, top, guard_bits):
    """The window a step's exact sum leaves: the smallest arithmetic right shift ``c`` of ``total`` that fits
    25 + G signed bits, with the exponent ``top + c``; empty when ``total`` is 0."""
    fit = 25 + guard_bits
    carry = Signal(range(len(total) - fit + 1))
    for c in reversed(range(len(total) - fit + 1)):  # smaller shifts take priority
        head = total[fit - 1 + c:]
        with m.If((head == 0) | (head == (1 << len(head)) - 1)):
            m.d.comb += carry.eq(c)
    window = Signal(window_layout(guard_bits))
    m.d.comb += [
        window.window.eq(total >> carry),
        window.exponent.eq(top + carry),
        window.nonempty.eq(total != 0),  # a floor shift that was needed never reaches 0
    ]
    return window


class PE(wiring.Component):
    """One FPRaker PE: N lanes of ``a`` terms times bit-parallel ``b`` into a fixed-point window.

    Each active cycle every lane issues its next in-bound term, most significant
    first (``Lane``), and an integer adder tree adds them into the running step
    sum. In a step's first cycle the exponent unit aligns the step to the
    accumulator (``M``, each lane's distance) and the accumulator, shifted to ``M``,
    starts the sum. At the step's end the sum is renormalised into 25 + G signed
    bits (a floor shift; ``Ea`` grows by it). The PE also gathers the pass's
    special products. The tile's sequencer runs the PEs in lockstep.

    Parameters
    ----------
    lanes : int
        N.
    guard_bits : int
        G (0..7).

    Ports
    -----
    step : In(pe_step_layout(lanes))
        The next step, latched on ``control.load``.
    control : In(pe_control_signature())
        ``load``, ``active``, ``first``, ``finish``, ``pass_end`` strobes (1 bit each) from the sequencer.
    more : Out(1)
        A lane still has an in-bound term after this cycle's.
    result : Out(accumulator_layout(guard_bits))
        The window as ``finish`` will leave it, and the pass's special products including this step's.
    """

    def __init__(self, lanes, guard_bits):
        FPRAKER.params(lanes=lanes, guard_bits=guard_bits)
        self.lanes, self.guard_bits = lanes, guard_bits
        super().__init__({
            "step": In(pe_step_layout(lanes)),
            "control": In(pe_control_signature()),
            "more": Out(1),
            "result": Out(accumulator_layout(guard_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        control = self.control
        current = Signal(data.StructLayout({  # the step in process, besides what its lanes hold
            "max_exponent": signed(EXPONENT_BITS), "any_live": 1, "specials": specials_layout()}))
        window = Signal(window_layout(self.guard_bits))
        specials = Signal(specials_layout())  # the pass's before this step

        m.submodules.exponent_unit = unit = ExponentUnit(self.lanes)
        m.d.comb += [
            unit.max_exponent.eq(current.max_exponent),
            unit.any_live.eq(current.any_live),
            unit.acc_exponent.eq(window.exponent),
            unit.acc_nonempty.eq(window.nonempty),
        ]
        total, top = self._step_sum(m, unit, window, self._lanes(m, unit))
        renormalised = _renormalise(m, total, top, self.guard_bits)
        merged = Signal(specials_layout())
        m.d.comb += merged.as_value().eq(specials.as_value() | current.specials.as_value())
        for part in (renormalised, merged):
            for name, _ in part.shape():
                m.d.comb += self.result[name].eq(part[name])

        with m.If(control.finish):
            m.d.sync += [window.eq(renormalised), specials.eq(merged)]
        with m.If(control.pass_end):
            m.d.sync += [window.nonempty.eq(0), specials.eq(0)]
        with m.If(control.load):
            m.d.sync += [
                current.max_exponent.eq(self.step.max_exponent),
                current.any_live.eq(self.step.any_live),
                current.specials.eq(self.step.specials),
            ]
        return m

    def _lanes(self, m, unit):
        """The lanes, aligned by ``unit``; drives ``more`` and returns this cycle's contributions."""
        lanes = []
        for n in range(self.lanes):
            lane = m.submodules[f"lane{n}"] = Lane(self.guard_bits)
            m.d.comb += [
                lane.step.eq(self.step.lanes[n]),
                lane.load.eq(self.control.load),
                lane.active.eq(self.control.active),
                lane.first.eq(self.control.first),
                unit.exponents[n].eq(lane.exponent),
                lane.distance.eq(unit.distances[n]),
            ]
            lanes.append(lane)
        m.d.comb += self.more.eq(Cat(*(lane.more for lane in lanes)).any())
        return [lane.contribution for lane in lanes]

    def _step_sum(self, m, unit, window, contributions):
        """The running step sum after this cycle's terms, and the step's alignment exponent ``M``."""
        fit = 25 + self.guard_bits
        width = window_width(self.lanes, self.guard_bits)
        first = self.control.first
        top = Signal(signed(EXPONENT_BITS))  # M after the step's first cycle
        running = Signal(signed(width))
        shift = Signal(range(fit + 1))
        m.d.comb += shift.eq(Mux(unit.top - window.exponent > fit, fit, unit.top - window.exponent))
        aligned = Mux(window.nonempty, window.window >> shift, 0)
        total = Signal(signed(width))
        m.d.comb += total.eq(Mux(first, aligned, running) + _tree_sum(contributions))
        with m.If(self.control.active):
            m.d.sync += running.eq(total)
            with m.If(first):
                m.d.sync += top.eq(unit.top)
        return total, Mux(first, unit.top, top)
