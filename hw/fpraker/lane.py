"""The FPRaker lane: one ``a`` operand's in-bound NAF terms, issued most significant first, times the bit-parallel ``b``."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import BF16
from dashraker.hw.checks import check_count
from dashraker.hw.fpraker.bounds import MAX_GUARD_BITS, MAX_SHIFT, SHIFT_AMOUNT_BITS, bounded_lane_layout
from dashraker.hw.fpraker.decoder import B_BITS
from dashraker.hw.fpraker.encoder import TERM_POSITIONS

__all__ = ["LANE_LATENCY", "B_FRACTION_BITS", "CONTRIBUTION_BITS", "Lane"]

LANE_LATENCY = 2  # clock edges from a term's issue to its contribution: picked, shifted
B_FRACTION_BITS = BF16.frac_bits  # b counts units of 2**-7: a shifted term drops these places
# A contribution's bits besides G: |b| < 2**(B_BITS - 1) shifted up to MAX_SHIFT places, less B_FRACTION_BITS, a sign.
CONTRIBUTION_BITS = B_BITS - 1 + MAX_SHIFT - B_FRACTION_BITS + 1


def _highest(digits):
    """The most significant set bit of ``digits`` alone (one-hot), and its position."""
    above = [digits[t + 1:].any() if t + 1 < len(digits) else 0 for t in range(len(digits))]
    onehot = Cat(*(digits[t] & ~above[t] for t in range(len(digits))))
    position = 0
    for bit in range((len(digits) - 1).bit_length()):
        position = position | (Cat(*(onehot[t] for t in range(len(digits)) if t >> bit & 1)).any() << bit)
    return onehot, position


class Lane(wiring.Component):
    """One lane of a PE: each active cycle its next in-bound term of ``a`` times ``b``, in units of ``2**(E - 150 - G)``.

    On ``load`` the lane takes its part of the next step: the in-bound NAF digits of
    ``a`` (the front end dropped the others), the signed ``b`` and ``shift``. Each
    active cycle it issues its most significant remaining digit ``s * 2**t`` and
    removes it; ``LANE_LATENCY`` clock edges later ``contribution`` is
    ``floor(s * b * 2**(t + shift - 7))`` (0 for a cycle without a digit). Picking,
    then shifting, each has its own register: nothing here waits on the accumulator.

    Parameters
    ----------
    guard_bits : int
        G, guard bits of the accumulator's frame.

    Ports
    -----
    step : In(bounded_lane_layout())
        This lane of the next step, taken on ``load``.
    load : In(1)
        Take ``step`` at this clock edge (after this cycle's term).
    active : In(1)
        This cycle issues a term.
    contribution : Out(signed(CONTRIBUTION_BITS + G))
        The term issued ``LANE_LATENCY`` cycles ago, in units of ``2**(E - 150 - G)``.
    """

    def __init__(self, guard_bits):
        check_count("guard_bits", guard_bits, 0, MAX_GUARD_BITS)
        self.guard_bits = guard_bits
        super().__init__({
            "step": In(bounded_lane_layout()),
            "load": In(1),
            "active": In(1),
            "contribution": Out(signed(CONTRIBUTION_BITS + guard_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        plus, minus = Signal(TERM_POSITIONS), Signal(TERM_POSITIONS)  # the digits still to issue
        b = Signal(self.step.b.shape())
        shift = Signal(self.step.shift.shape())
        onehot, position = _highest(plus | minus)

        # picked: the signed b of the issued term (-b of the most negative b needs a bit more) and its left shift
        # plus B_FRACTION_BITS
        term_b = Signal(signed(len(b) + 1))
        amount = Signal(SHIFT_AMOUNT_BITS)
        issued = Signal()
        m.d.sync += [
            term_b.eq(Mux((minus & onehot).any(), -b, b)),
            amount.eq(position + shift),
            issued.eq(self.active & (plus | minus).any()),
        ]
        # shifted: floor(term_b * 2**(amount - B_FRACTION_BITS))
        width = len(self.contribution)
        m.d.sync += self.contribution.eq(
            Mux(issued, (term_b << amount)[B_FRACTION_BITS:B_FRACTION_BITS + width].as_signed(), 0))

        with m.If(self.active):
            m.d.sync += [plus.eq(plus & ~onehot), minus.eq(minus & ~onehot)]
        with m.If(self.load):
            m.d.sync += [plus.eq(self.step.plus), minus.eq(self.step.minus), b.eq(self.step.b),
                         shift.eq(self.step.shift)]
        return m
