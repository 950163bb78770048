"""The FPRaker PE: exponent unit, per-lane term shifters, integer adder tree and the accumulator window."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.fpraker.encoder import TERM_POSITIONS, leading_term
from dashraker.hw.fpraker.rounder import EXPONENT_BITS
from dashraker.models.fpraker.golden import window_width

__all__ = ["lane_layout", "block_layout", "window_layout", "ExponentUnit", "PE"]


def lane_layout():
    """One lane of a block as the PE receives it: the terms of ``a``, the signed ``b``, the product exponent."""
    return data.StructLayout({
        "plus": TERM_POSITIONS,  # NAF +1 digits of a's significand
        "minus": TERM_POSITIONS,  # NAF -1 digits
        "b": signed(9),  # b's significand with the product's sign applied
        "exponent": signed(EXPONENT_BITS),  # ea + eb - 127
        "live": 1,  # both operands finite and non-zero
    })


def block_layout(lanes):
    """A block for one PE: its lanes, the maximum product exponent over live lanes, whether any is live."""
    return data.StructLayout({
        "lanes": data.ArrayLayout(lane_layout(), lanes),
        "max_exponent": signed(EXPONENT_BITS),
        "any_live": 1,
    })


def window_layout(guard_bits):
    """The renormalised accumulator window: ``S`` (25 + G signed bits), ``Ea``, non-empty flag."""
    return data.StructLayout({"window": signed(25 + guard_bits), "exponent": signed(EXPONENT_BITS), "nonempty": 1})


class ExponentUnit(wiring.Component):
    """Block alignment (combinational): ``M = max(max_exponent, Ea)`` over what exists, and each lane's distance.

    Ports
    -----
    max_exponent : In(signed(12)), any_live : In(1)
        The block's maximum product exponent and whether any lane is live.
    acc_exponent : In(signed(12)), acc_nonempty : In(1)
        The accumulator's reference exponent and whether it holds a value.
    exponents : In(ArrayLayout(signed(12), lanes))
        Per-lane product exponents.
    top : Out(signed(12))
        M; the accumulator's exponent when the block has no live lane.
    distances : Out(ArrayLayout(signed(14), lanes))
        ``M - exponent`` per lane.
    """

    def __init__(self, lanes):
        self.lanes = lanes
        super().__init__({
            "max_exponent": In(signed(EXPONENT_BITS)),
            "any_live": In(1),
            "acc_exponent": In(signed(EXPONENT_BITS)),
            "acc_nonempty": In(1),
            "exponents": In(data.ArrayLayout(signed(EXPONENT_BITS), lanes)),
            "top": Out(signed(EXPONENT_BITS)),
            "distances": Out(data.ArrayLayout(signed(EXPONENT_BITS + 2), lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        acc_larger = self.acc_nonempty & (~self.any_live | (self.acc_exponent > self.max_exponent))
        m.d.comb += self.top.eq(Mux(acc_larger, self.acc_exponent, self.max_exponent))
        for lane in range(self.lanes):
            m.d.comb += self.distances[lane].eq(self.top - self.exponents[lane])
        return m


def _shift_term(m, value, amount, guard_bits):
    """``floor(value * 2**amount)`` for ``amount`` in -7 .. 17 + G: the lane's barrel shifter."""
    width = 26 + guard_bits
    shifted = Signal(signed(width))
    m.d.comb += shifted.eq((value << (amount + 7).as_unsigned()[:5])[7:7 + width].as_signed())
    return shifted


def _tree_sum(values):
    """Balanced binary sum (adder tree) of signed values."""
    while len(values) > 1:
        values = [values[i] + values[i + 1] if i + 1 < len(values) else values[i] for i in range(0, len(values), 2)]
    return values[0]


class PE(wiring.Component):
    """One FPRaker PE: N lanes of ``a`` terms times bit-parallel ``b`` into a fixed-point window.

    Each active cycle every lane issues its next in-bound term, most significant
    first: ``b`` shifted by ``t + 9 + G - d`` (floor), summed by an integer adder
    tree into the running block sum. A lane's next term is picked from its digits
    alone and issued if in bounds (``d <= t + 16 + G``); an out-of-bounds term ends
    the lane, as every later term is out of bounds too. In a block's first cycle the
    exponent unit aligns the block to the accumulator and the accumulator is shifted
    into the running sum. At the block's end the sum is renormalised into 25 + G
    signed bits. The tile sequences the PEs in lockstep.

    Parameters
    ----------
    lanes : int
        N.
    guard_bits : int
        G.

    Ports
    -----
    block : In(block_layout(lanes))
        The next block, latched on ``load``.
    load : In(1)
        Latch ``block``; the next cycle is its first.
    active : In(1)
        This cycle processes a term of the current block.
    first : In(1)
        This cycle is the block's first.
    finish : In(1)
        The block ends at this clock edge: the window takes the renormalised sum.
    clear : In(1)
        The pass ends at this clock edge: the window empties (after ``result`` was taken).
    more : Out(1)
        A lane still has in-bound terms after this cycle's.
    result : Out(window_layout(guard_bits))
        The window as ``finish`` will leave it.
    """

    def __init__(self, lanes, guard_bits):
        self.lanes, self.guard_bits = lanes, guard_bits
        super().__init__({
            "block": In(block_layout(lanes)),
            "load": In(1),
            "active": In(1),
            "first": In(1),
            "finish": In(1),
            "clear": In(1),
            "more": Out(1),
            "result": Out(window_layout(guard_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        g, lanes = self.guard_bits, self.lanes
        fit = 25 + g
        run_width = window_width(lanes, g)
        current = Signal(block_layout(lanes))  # the block in process, as loaded
        plus = [Signal(TERM_POSITIONS, name=f"plus{n}") for n in range(lanes)]  # remaining terms
        minus = [Signal(TERM_POSITIONS, name=f"minus{n}") for n in range(lanes)]
        distance = [Signal(signed(EXPONENT_BITS + 2), name=f"distance{n}") for n in range(lanes)]
        top = Signal(signed(EXPONENT_BITS))
        running = Signal(signed(run_width))
        window = Signal(window_layout(g))

        m.submodules.exponent_unit = unit = ExponentUnit(lanes)
        m.d.comb += [
            unit.max_exponent.eq(current.max_exponent),
            unit.any_live.eq(current.any_live),
            unit.acc_exponent.eq(window.exponent),
            unit.acc_nonempty.eq(window.nonempty),
        ]
        top_now = Mux(self.first, unit.top, top)
        contributions, more = [], []
        for n in range(lanes):
            lane = current.lanes[n]
            m.d.comb += unit.exponents[n].eq(lane.exponent)
            d = Signal(signed(EXPONENT_BITS + 2), name=f"d{n}")
            m.d.comb += d.eq(Mux(self.first, unit.distances[n], distance[n]))
            # the next term is picked from the digits alone, in parallel with the alignment
            digits = plus[n] | minus[n]
            position, present = leading_term(m, digits)
            issue = Signal(name=f"issue{n}")
            m.d.comb += issue.eq(present & (d <= position + 16 + g))  # in bounds
            rest = Signal(TERM_POSITIONS, name=f"rest{n}")
            m.d.comb += rest.eq(digits & ~(Const(1, TERM_POSITIONS) << position))
            following, follows = leading_term(m, rest)
            more.append(issue & follows & (d <= following + 16 + g))
            negative = minus[n].bit_select(position, 1)
            term_b = Mux(negative, -lane.b, lane.b)
            value = _shift_term(m, term_b, position + 9 + g - d, g)
            contributions.append(Mux(issue, value, 0))
            issued = Signal(TERM_POSITIONS, name=f"issued{n}")
            m.d.comb += issued.eq(Mux(issue, Const(1, TERM_POSITIONS) << position, 0))
            with m.If(self.active):
                m.d.sync += [plus[n].eq(plus[n] & ~issued), minus[n].eq(minus[n] & ~issued)]
                with m.If(self.first):
                    m.d.sync += distance[n].eq(d)
            with m.If(self.load):
                live = self.block.lanes[n].live.replicate(TERM_POSITIONS)
                m.d.sync += [plus[n].eq(self.block.lanes[n].plus & live), minus[n].eq(self.block.lanes[n].minus & live)]
        m.d.comb += self.more.eq(Cat(*more).any())

        shift = Signal(range(fit + 1))
        m.d.comb += shift.eq(Mux(unit.top - window.exponent > fit, fit, unit.top - window.exponent))
        aligned = Mux(window.nonempty, window.window >> shift, 0)
        base = Mux(self.first, aligned, running)
        total = Signal(signed(run_width))
        m.d.comb += total.eq(base + _tree_sum(contributions))

        # renormalise: the smallest arithmetic right shift that fits 25 + G signed bits
        carry = Signal(range(run_width - fit + 1))
        for c in reversed(range(run_width - fit + 1)):  # smaller shifts take priority
            head = total[fit - 1 + c:]
            with m.If((head == 0) | (head == (1 << len(head)) - 1)):
                m.d.comb += carry.eq(c)
        renormalised = Signal(signed(fit))
        m.d.comb += [
            renormalised.eq(total >> carry),
            self.result.window.eq(renormalised),
            self.result.exponent.eq(top_now + carry),
            self.result.nonempty.eq(total != 0),  # a floor shift that was needed never reaches 0
        ]

        with m.If(self.active):
            m.d.sync += running.eq(total)
            with m.If(self.first):
                m.d.sync += top.eq(unit.top)
        with m.If(self.finish):
            m.d.sync += window.eq(self.result)
        with m.If(self.clear):
            m.d.sync += window.nonempty.eq(0)
        with m.If(self.load):
            m.d.sync += current.eq(self.block)
        return m
