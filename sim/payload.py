"""Packing of nested operand arrays into the integers that carry stream payloads.

Bit order follows ``amaranth.lib.data``: element 0 of an array and the first field of
a struct sit at the least significant end.
"""

import numpy as np

__all__ = ["pack_array", "unpack_array"]


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
