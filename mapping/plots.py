"""The look every plot of the mapper and the study shares: one colour per design, a figure saved as PNG and SVG."""

import io

from dashraker.outputs import atomic_write

__all__ = ["DESIGN_COLOURS", "design_colour", "save_figure"]

# One colour per design in every plot (the Okabe-Ito palette, told apart by colour-blind readers too), in the
# registry's order; a design registered later takes the next one.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")


def _colours():
    from dashraker.designs import DESIGNS

    return {name: PALETTE[k % len(PALETTE)] for k, name in enumerate(DESIGNS)}


DESIGN_COLOURS = _colours()


def design_colour(name):
    """The colour of design ``name`` in every plot."""
    return DESIGN_COLOURS[name]


def save_figure(figure, path, vector=True):
    """``figure`` as a PNG at ``path`` and (``vector``) as an SVG beside it, each written atomically."""
    formats = ("png", "svg") if vector else ("png",)
    for fmt in formats:
        buffer = io.BytesIO()
        figure.savefig(buffer, format=fmt, dpi=150, bbox_inches="tight")
        atomic_write(path.with_suffix(f".{fmt}"), lambda file, data=buffer.getvalue(): file.write(data))
