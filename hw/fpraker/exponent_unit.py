"""The FPRaker exponent unit: the running maximum of a pass's product exponents, the steps' alignment exponent."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.fpraker.decoder import EXPONENT_BITS, NO_EXPONENT

__all__ = ["maximum", "ExponentUnit"]


def maximum(values):
    """Balanced tree of comparators over signed ``values``."""
    while len(values) > 1:
        values = [Mux(values[i] > values[i + 1], values[i], values[i + 1]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


class ExponentUnit(wiring.Component):
    """A PE's alignment exponent ``E``: the largest product exponent of the pass so far, this step's included.

    ``E`` depends on the operands alone, never on the sum, so it is computed here, in the
    tile's front end, steps ahead of the PE's accumulator. ``exponent = max(previous,
    maxima...)`` is taken into the state when ``take`` is high; ``previous`` is
    ``NO_EXPONENT`` at a pass's first step. The state is compared with every candidate
    at once, so the one-cycle loop is one 12-bit comparison and a multiplexer.

    Parameters
    ----------
    candidates : int
        How many partial maxima of the step's lane exponents come in (1 or 2).

    Ports
    -----
    maxima : In(ArrayLayout(signed(12), candidates))
        The step's lane exponents reduced to ``candidates`` maxima (``NO_EXPONENT`` for no live lane).
    take : In(1)
        The step enters at this clock edge: ``exponent`` becomes the state.
    last : In(1)
        The step closes its pass: the next one starts from ``NO_EXPONENT``.
    exponent : Out(signed(12))
        ``E`` after the step (``NO_EXPONENT`` while the pass has no live lane).
    previous : Out(signed(12))
        ``E`` before the step.
    """

    def __init__(self, candidates):
        if candidates not in (1, 2):
            raise ValueError(f"candidates must be 1 or 2, not {candidates!r}")
        self.candidates = candidates
        super().__init__({
            "maxima": In(data.ArrayLayout(signed(EXPONENT_BITS), candidates)),
            "take": In(1),
            "last": In(1),
            "exponent": Out(signed(EXPONENT_BITS)),
            "previous": Out(signed(EXPONENT_BITS)),
        })

    def elaborate(self, platform):
        m = Module()
        state = Signal(signed(EXPONENT_BITS), init=NO_EXPONENT)
        fresh = Signal(init=1)  # the next step starts a pass
        # the state against each candidate and the candidates among themselves, all at once: one comparison deep
        keep = ~fresh
        for candidate in self.maxima:
            keep = keep & (state >= candidate)
        m.d.comb += [
            self.previous.eq(Mux(fresh, NO_EXPONENT, state)),
            self.exponent.eq(Mux(keep, state, maximum(list(self.maxima)))),
        ]
        with m.If(self.take):
            m.d.sync += [state.eq(self.exponent), fresh.eq(self.last)]
        return m
