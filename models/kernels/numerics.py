"""Operand quantization fused in one compiled loop: exactly ``models.numerics.quantize`` on NumPy arrays.

The reference goes through PyTorch (``to(torch.bfloat16)``, then NaN and subnormal fix-ups
and the widening, each a full pass over the tensor with temporaries); the mapper converts
every trace tensor it maps, so here each value is read once and written once, with the
same bit arithmetic: round to nearest even on the fp32 bits (or truncation), every NaN
the canonical quiet NaN, results with a zero exponent field flushed to a zero of their sign.
"""

import numba
import numpy as np

from dashraker.formats import BF16, CANONICAL_NAN_BITS, float_format

__all__ = ["quantize"]

_ROUNDINGS = ("nearest", "truncate")  # bf16 from fp32; fp32 keeps every bit (rounding unused)
_NEAREST, _TRUNCATE, _KEEP = 0, 1, 2


@numba.njit(nogil=True, cache=True)
def _quantize(bits, mode, out):
    """``out[i]``: the fp32 bits of ``bits[i]`` as the operand format holds it (``mode``: _NEAREST, _TRUNCATE, _KEEP).

    Rounding to nearest even adds 0x7FFF plus the lowest kept bit (as ``to(torch.bfloat16)``),
    which never carries out of 32 bits for a non-NaN; a NaN is recognised before rounding, but
    after truncation (an fp32 NaN with only low fraction bits set truncates to Inf, as in the reference).
    """
    for i in range(bits.size):
        value = np.int64(bits[i])
        if mode == _NEAREST:
            kept = (value + 0x7FFF + ((value >> 16) & 1)) & 0xFFFF0000
            tested = value
        else:
            kept = value & 0xFFFF0000 if mode == _TRUNCATE else value
            tested = kept
        if (tested & 0x7FFFFFFF) > 0x7F800000:
            kept = CANONICAL_NAN_BITS
        elif (kept & 0x7F800000) == 0:
            kept &= 0x80000000
        out[i] = kept


def quantize(x, fmt, rounding="nearest"):
    """``models.numerics.quantize(x, fmt, rounding)`` bit for bit, as a new float32 NumPy array of ``x``'s shape."""
    if float_format(fmt) == BF16:
        if rounding not in _ROUNDINGS:
            raise ValueError(f"rounding must be 'nearest' or 'truncate', not {rounding!r}")
        mode = _ROUNDINGS.index(rounding)
    else:
        mode = _KEEP
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    out = np.empty(bits.shape, np.uint32)
    _quantize(bits.reshape(-1), mode, out.reshape(-1))
    return out.view(np.float32)
