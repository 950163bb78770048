"""The colours of every mapper plot: one per design, one per energy component, one per operation, the same in every
panel and every figure (a reader matches a bar across plots by its colour)."""

__all__ = ["design_colour", "component_colour", "operation_colour"]


def _colour(names, name, colours):
    """``name``'s colour: its place among ``names`` in ``colours`` (a Matplotlib qualitative colour map's list)."""
    names = list(names)
    return colours[(names.index(name) if name in names else len(names)) % len(colours)]


def design_colour(name):
    """A design's colour, by its place in the registry (the reference, then the others)."""
    from matplotlib import colormaps

    from dashraker.designs import DESIGNS

    return _colour(DESIGNS, name, colormaps["Dark2"].colors)


def component_colour(name):
    """An energy component's colour, by its place among every design's components, the clocking and the leakage."""
    from matplotlib import colormaps

    from dashraker.mapping.components import CLOCK, STATIC, components

    return _colour((*components(), *CLOCK, *STATIC), name, colormaps["tab20"].colors)


def operation_colour(op):
    """A training operation's colour (forward, input gradient, weight gradient)."""
    from matplotlib import colormaps

    from dashraker.mapping.dataflow import OPS

    return _colour(OPS, op, colormaps["Set2"].colors)
