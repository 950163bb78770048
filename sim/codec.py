"""Stream payloads encoded and decoded from the Amaranth layouts themselves, for many transfers at once.

A payload value is a NumPy integer array (a leaf: a plain shape, or a whole layout
given as raw bits) or, for a ``StructLayout``, a dict of field values; an
``ArrayLayout`` of leaves takes an array with its lengths as extra axes, one of structs
a dict whose arrays have them. Every value has the transfers as its first axis. Bit
order is ``amaranth.lib.data``'s: element 0 and the first field at the least
significant end. Encoded payloads are bit matrices ``uint8 [transfers, layout.size]``,
turned into 32-bit words (co-simulation: as Verilator stores a wide port) or Python
integers (cocotb).
"""

import numpy as np
from amaranth.hdl import Shape
from amaranth.lib import data

__all__ = ["encode", "decode", "to_words", "from_words", "to_ints", "from_ints", "step_transfers"]


def _size(layout):
    return layout.size if isinstance(layout, data.Layout) else Shape.cast(layout).width


def _bit_matrix(values, width):
    """uint8 bits [T, k * width] of ``width``-bit integers [T, k], element 0 and bit 0 first."""
    values = np.asarray(values)
    if width in (8, 16, 32, 64):  # byte-wide values: unpack their little-endian bytes directly
        raw = np.ascontiguousarray(values.astype(f"<u{width // 8}")).view(np.uint8)
        return np.unpackbits(raw, axis=-1, bitorder="little")
    bits = (values.astype(np.uint64)[..., None] >> np.arange(width, dtype=np.uint64)) & np.uint64(1)
    return bits.astype(np.uint8).reshape(*values.shape[:-1], -1)


def _array_dims(layout):
    """Lengths of nested ``ArrayLayout``s and the element layout below them."""
    dims = []
    while isinstance(layout, data.ArrayLayout):
        dims.append(layout.length)
        layout = layout.elem_shape
    return dims, layout


def encode(layout, value, count):
    """Bit matrix uint8 ``[count, layout.size]`` of ``count`` payloads (fields not given are zero)."""
    size = _size(layout)
    if isinstance(value, dict):
        bits = np.zeros((count, size), np.uint8)
        if isinstance(layout, data.ArrayLayout):
            inner = {name: np.asarray(part).reshape(count * layout.length, *np.shape(part)[2:])
                     for name, part in value.items()}
            return encode(layout.elem_shape, inner, count * layout.length).reshape(count, size)
        for name, part in value.items():
            field = layout[name]
            bits[:, field.offset : field.offset + _size(field.shape)] = encode(field.shape, part, count)
        return bits
    dims, leaf = _array_dims(layout)
    values = np.asarray(value)
    expected = (count, *dims)
    if values.shape != expected:
        raise ValueError(f"payload value of shape {values.shape} for a layout of shape {expected}")
    return _bit_matrix(values.reshape(count, -1), _size(leaf))


def decode(layout, bits):
    """The payload values of a bit matrix ``[T, >= layout.size]``: a dict per struct, int64 arrays for leaves.

    A struct is opened field by field, arrays down to their elements; a layout that is
    neither (a float's fields, a plain shape) is a leaf.
    """
    bits = np.asarray(bits)
    count = len(bits)
    dims, leaf = _array_dims(layout)
    if type(leaf) is data.StructLayout:  # a struct, or an array of structs: its fields gain the array's axes
        flat = bits[:, : _size(layout)].reshape(-1, leaf.size)
        return {name: _with_axes(decode(field.shape, flat[:, field.offset : field.offset + _size(field.shape)]),
                                 count, dims) for name, field in leaf}
    width = _size(leaf)
    total = int(np.prod(dims, dtype=np.int64)) * width
    weights = np.uint64(1) << np.arange(width, dtype=np.uint64)
    values = (bits[:, :total].reshape(count, -1, width).astype(np.uint64) * weights).sum(axis=-1, dtype=np.uint64)
    return values.astype(np.int64).reshape(count, *dims)


def _with_axes(value, count, dims):
    if isinstance(value, dict):
        return {name: _with_axes(part, count, dims) for name, part in value.items()}
    return value.reshape(count, *dims, *value.shape[1:])


def to_words(bits):
    """Rows of a bit matrix as uint32 words [T, ceil(size / 32)], the way Verilator stores a wide port."""
    bits = np.asarray(bits, np.uint8)
    padded = np.zeros((len(bits), -(-bits.shape[1] // 32) * 32), np.uint8)
    padded[:, : bits.shape[1]] = bits
    return np.ascontiguousarray(np.packbits(padded, axis=1, bitorder="little").view("<u4"))


def from_words(words, size):
    """Bit matrix [T, size] of uint32 words [T, W]."""
    raw = np.ascontiguousarray(np.asarray(words, np.uint32).astype("<u4")).view(np.uint8)
    return np.unpackbits(raw, axis=1, bitorder="little")[:, :size]


def to_ints(bits):
    """Python integers of the rows of a bit matrix (cocotb's payload values)."""
    packed = np.packbits(np.asarray(bits, np.uint8), axis=1, bitorder="little")
    return [int.from_bytes(row.tobytes(), "little") for row in packed]


def from_ints(values, size):
    """Bit matrix [T, size] of Python integers."""
    raw = np.frombuffer(b"".join(int(v).to_bytes(-(-size // 8), "little") for v in values), np.uint8)
    return np.unpackbits(raw.reshape(len(values), -1), axis=1, bitorder="little")[:, :size]


def step_transfers(layout, rows_bits, cols_bits, sizes=None):
    """The ``steps`` transfers of passes, as a bit matrix.

    ``rows_bits`` [P, R, S, N] (the scheduled side) and ``cols_bits`` [P, C, S, N] (the
    partner side) are operand bit patterns; ``last`` closes each pass. ``layout`` is the
    tile's ``steps`` payload: one step (``rows``, ``cols``, ``last``) per transfer, or a
    group of up to K steps (``steps`` array and ``count``) running across pass
    boundaries, K per transfer or as many as the iterator ``sizes`` says (1..K each).
    """
    rows_bits, cols_bits = np.asarray(rows_bits), np.asarray(cols_bits)
    passes, rows, steps, lanes = rows_bits.shape
    total = passes * steps
    last = np.zeros((passes, steps), np.int64)
    last[:, -1] = 1
    step = {"rows": rows_bits.transpose(0, 2, 1, 3).reshape(total, rows, lanes),
            "cols": cols_bits.transpose(0, 2, 1, 3).reshape(total, cols_bits.shape[1], lanes),
            "last": last.reshape(total)}
    if "count" not in dict(layout.members):
        return encode(layout, step, total)
    group = layout["steps"].shape.length
    counts = []
    while sum(counts) < total:
        size = group if sizes is None else next(sizes)
        if not 1 <= size <= group:
            raise ValueError(f"a transfer holds 1 to {group} steps, not {size}")
        counts.append(min(size, total - sum(counts)))
    slot = np.concatenate([np.arange(c) for c in counts])
    transfer = np.repeat(np.arange(len(counts)), counts)
    grouped = {}
    for name, part in step.items():
        grouped[name] = np.zeros((len(counts), group, *part.shape[1:]), np.int64)
        grouped[name][transfer, slot] = part
    return encode(layout, {"steps": grouped, "count": np.array(counts)}, len(counts))
