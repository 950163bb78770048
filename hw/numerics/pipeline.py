"""Pipeline registers at a unit's chosen cut points, all advancing with one enable."""

from amaranth.hdl import Signal

__all__ = ["Cuts", "delayed"]


class Cuts:
    """The cut points of one unit that hold registers; ``cross`` carries values over a cut.

    A unit writes its logic once, in order, and passes the values that later logic
    reads through ``cross`` at each of its cut points: a cut that is not chosen
    leaves them as they are, so every stage count computes the same bits.

    Parameters
    ----------
    m : Module
        The unit's module.
    en : Value
        The registers advance while high.
    chosen : iterable of str
        The names of the cuts that hold registers.
    """

    def __init__(self, m, en, chosen):
        self.m, self.en, self.chosen = m, en, frozenset(chosen)

    def cross(self, cut, **values):
        """``values`` (name -> value or view) as seen after ``cut``, in the order given."""
        if cut not in self.chosen:
            return tuple(values.values())
        registers = []
        for name, value in values.items():
            register = Signal(value.shape(), name=f"{cut}_{name}")
            with self.m.If(self.en):
                self.m.d.sync += register.eq(value)
            registers.append(register)
        return tuple(registers)


def delayed(m, en, value, cycles, name):
    """``value`` as it was ``cycles`` enabled cycles ago: a chain of registers beside a pipeline."""
    for stage in range(cycles):
        register = Signal(value.shape(), name=f"{name}{stage}")
        with m.If(en):
            m.d.sync += register.eq(value)
        value = register
    return value
