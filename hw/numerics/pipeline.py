"""Pipeline registers at a unit's chosen cut points, and register chains beside a pipeline."""

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
    chosen : iterable of str
        The names of the cuts that hold registers.
    """

    def __init__(self, m, chosen):
        self.m, self.chosen = m, frozenset(chosen)

    def cross(self, cut, **values):
        """``values`` (name -> value or view) as seen after ``cut``, in the order given."""
        if cut not in self.chosen:
            return tuple(values.values())
        registers = []
        for name, value in values.items():
            register = Signal(value.shape(), name=f"{cut}_{name}")
            self.m.d.sync += register.eq(value)
            registers.append(register)
        return tuple(registers)


def delayed(m, value, cycles, name):
    """``value`` as it was ``cycles`` cycles ago: a chain of registers beside a pipeline."""
    for stage in range(cycles):
        register = Signal(value.shape(), name=f"{name}{stage}")
        m.d.sync += register.eq(value)
        value = register
    return value
