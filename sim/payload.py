"""Packing of nested operand arrays into the integers that carry stream payloads.

Bit order follows ``amaranth.lib.data``: element 0 of an array and the first field of
a struct sit at the least significant end.
"""

import numpy as np

__all__ = ["pack_array", "unpack_array", "step_payloads"]


def pack_array(values, width):
    """Pack a nested array of unsigned ``width``-bit integers, flattened C-order, element 0 at bit 0."""
    flat = np.asarray(values, dtype=object).reshape(-1)
    packed = 0
    for value in reversed(flat.tolist()):
        packed = (packed << width) | int(value)
    return packed


def unpack_array(packed, width, shape):
    """Inverse of ``pack_array``: an int64 array of ``shape``."""
    count = int(np.prod(shape))
    mask = (1 << width) - 1
    values = [(int(packed) >> (index * width)) & mask for index in range(count)]
    return np.array(values, dtype=np.int64).reshape(shape)


def step_payloads(rows_bits, cols_bits, width):
    """The ``steps`` transfers of one pass in ``hw.baseline.step_layout``: rows, columns, ``last``.

    ``rows_bits`` [R, S, N] and ``cols_bits`` [C, S, N] are operand bit patterns of ``width`` bits.
    """
    rows_bits, cols_bits = np.asarray(rows_bits), np.asarray(cols_bits)
    row_width = rows_bits.shape[0] * rows_bits.shape[2] * width
    col_width = cols_bits.shape[0] * cols_bits.shape[2] * width
    steps = rows_bits.shape[1]
    return [
        pack_array(rows_bits[:, step], width)
        | pack_array(cols_bits[:, step], width) << row_width
        | int(step == steps - 1) << (row_width + col_width)
        for step in range(steps)
    ]
