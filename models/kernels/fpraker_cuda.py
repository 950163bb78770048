"""The FPRaker tile as one CUDA kernel (Numba's CUDA target): ``dashraker.models.fpraker.tile`` bit for bit, on a GPU.

The reference run on a GPU launches a dozen small kernels per step of a pass, one step after
another, and waits on the launches. Here one GPU thread walks the steps of one PE of one pass,
as the CPU kernel (``kernels/fpraker.py``) walks them on a core: alignment, term contributions from
the same two small tables, renormalisation, cycles, term counts, rounding and NaN/Inf. The
scalar helpers are the CPU kernel's own, compiled for the GPU from the same source, so the two
kernels share their arithmetic. A step's cost is the maximum over the PEs of its pass, taken
after the kernel from each PE's cycles.

Numba's CUDA target, not Triton: the block loop is scalar integer code with data-dependent
branches per lane (which table path, out-of-bounds terms, specials), which Triton's block
programs would turn into masked vectors, and Numba compiles the CPU kernel's helpers as they are.
"""

import functools
import types

import numpy as np
import torch
from numba import cuda

from dashraker.models.fpraker.golden import TileResult, checked_arguments
from dashraker.models.kernels import fpraker

__all__ = ["tile", "tile_values"]

_THREADS = 128  # threads per block: one per PE of a pass
_HELPERS = ("_exponent", "_table_lane", "_renormalise", "_lane_special", "_round_window", "_result")


@cuda.jit(device=True)
def _leading_zeros(value):
    """Count-leading-zeros on the GPU (the CPU kernel's is an intrinsic of Numba's CPU target)."""
    return cuda.clz(value)


def _on_gpu(names):
    """The CPU kernel's scalar helpers ``names``, compiled as CUDA device functions from their source: their globals
    are the CPU kernel's, with the helpers themselves and count-leading-zeros the GPU's."""
    scope = {**vars(fpraker), "leading_zeros": _leading_zeros}
    for name in names:
        source = scope[name].py_func
        scope[name] = cuda.jit(device=True)(types.FunctionType(source.__code__, scope, name))
    return (scope[name] for name in names)


_exponent, _table_lane, _renormalise, _lane_special, _round_window, _result = _on_gpu(_HELPERS)
_NONE = fpraker._NONE


@cuda.jit(device=True)
def _pattern(value, shift):
    """The bf16 pattern an operand element holds: its bits shifted right by ``shift`` (16 for fp32 values)."""
    return (np.int64(value) >> shift) & 0xFFFF


@cuda.jit(cache=True)
def _tile(a, b, shift, g, zero_block_cycles, packed, floored, patterns, counts, bits, pe_cycles, terms, live_terms):
    """Thread ``p * R * C + r * C + c`` runs PE (r, c) of pass p: fills ``bits[p, r, c]`` (fp32 pattern),
    ``pe_cycles[p, :, r * C + c]`` (its cost of each step), and its in-bound and live-lane terms."""
    passes, rows, steps, lanes = a.shape
    cols = b.shape[1]
    thread = cuda.grid(1)
    if thread >= passes * rows * cols:
        return
    p, pe = thread // (rows * cols), thread % (rows * cols)
    r, c = pe // cols, pe % cols
    span = 26 + g
    window = np.int64(0)
    acc_exp = _NONE  # while the accumulator is empty
    special = 0
    in_bound = 0
    live = 0
    for s in range(steps):
        top = _NONE
        bottom = -_NONE  # the smallest live product exponent
        for n in range(lanes):
            x, y = _pattern(a[p, r, s, n], shift), _pattern(b[p, c, s, n], shift)
            ex, x_live = _exponent(x)
            ey, y_live = _exponent(y)
            if ex == 255 or ey == 255:
                special |= _lane_special(x, y)
            elif x_live and y_live:
                top = max(top, ex - 127 + ey)
                bottom = min(bottom, ex - 127 + ey)
        if top == _NONE:  # no live lane: the accumulator stays as it is
            pe_cycles[p, s, pe] = zero_block_cycles
            continue
        total = np.int64(0)
        if acc_exp != _NONE:
            top = max(top, acc_exp)
            total = window >> min(top - acc_exp, 63)
        whole = top - bottom <= 9 + g  # every term of every lane whole: the exact products
        most = 1
        for n in range(lanes):
            x, y = _pattern(a[p, r, s, n], shift), _pattern(b[p, c, s, n], shift)
            ex, x_live = _exponent(x)
            ey, y_live = _exponent(y)
            if x_live and y_live:
                partner = (-1 if (x ^ y) >> 15 else 1) * (128 + (y & 0x7F))
                if whole:
                    found = counts[x & 0x7F]
                    total += partner * (128 + (x & 0x7F)) << (9 + g - (top - (ex - 127 + ey)))
                else:
                    entry = (x & 0x7F) * span + min(top - (ex - 127 + ey), span - 1)
                    contribution, found = _table_lane(packed, floored, patterns, entry, partner)
                    total += contribution
                in_bound += found
                live += counts[x & 0x7F]
                most = max(most, found)
        pe_cycles[p, s, pe] = most
        window, carry = _renormalise(total, g)
        acc_exp = top + carry if window != 0 else _NONE
    bits[p, r, c] = _result(window, acc_exp, g, special)
    terms[p, pe] = in_bound
    live_terms[p, pe] = live


@functools.lru_cache(maxsize=None)
def _tables(guard_bits, device):
    """The CPU kernel's lane tables, on ``device``."""
    packed, floored, patterns, counts = fpraker._lane_tables(guard_bits)
    return torch.from_numpy(packed).to(device), torch.from_numpy(floored).to(device), patterns, \
        torch.from_numpy(counts).to(device)


def tile(a_bits, b_bits, guard_bits=3, zero_block_cycles=1, device="cuda"):
    """Run passes of an R x C FPRaker tile on a CUDA ``device``: the reference ``tile``'s arguments, checks and
    ``TileResult`` (on ``device``).

    ``a_bits``: bf16 patterns [passes, rows, steps, lanes] (term-serial, shared along rows);
    ``b_bits``: [passes, cols, steps, lanes] (bit-parallel, shared along columns); ints (torch or numpy).
    """
    a, b = checked_arguments(a_bits, b_bits, guard_bits, zero_block_cycles)
    return _run(a.to(device), b.to(device), 0, guard_bits, zero_block_cycles)


def tile_values(a_values, b_values, guard_bits=3, zero_block_cycles=1):
    """``tile`` of float32 torch tensors on a CUDA GPU holding bf16 values (the mapper's operands), read in place.

    A value's bf16 pattern is the upper half of its fp32 bits (the lower half is ignored).
    """
    a, b = checked_arguments(a_values, b_values, guard_bits, zero_block_cycles, _fp32_bits)
    return _run(a, b, 16, guard_bits, zero_block_cycles)


def _fp32_bits(values, name):
    """The fp32 bit patterns of a float32 CUDA tensor [passes, rows|cols, steps, lanes], as an int32 view."""
    if not (isinstance(values, torch.Tensor) and values.is_cuda and values.dtype == torch.float32 and values.dim() == 4):
        raise TypeError(f"{name} must be a float32 CUDA tensor [passes, rows|cols, steps, lanes], not {values!r:.60}")
    return values.view(torch.int32)


def _run(a, b, shift, guard_bits, zero_block_cycles):
    """The kernel on CUDA tensors whose bf16 patterns are their elements shifted right by ``shift``."""
    passes, rows, steps, _ = a.shape
    cols = b.shape[1]
    on = {"device": a.device}
    bits = torch.zeros((passes, rows, cols), dtype=torch.int32, **on)
    pe_cycles = torch.zeros((passes, steps, rows * cols), dtype=torch.int8, **on)
    terms = torch.zeros((passes, rows * cols), dtype=torch.int64, **on)
    live_terms = torch.zeros((passes, rows * cols), dtype=torch.int64, **on)
    threads = passes * rows * cols
    if threads:
        arguments = (a, b, shift, guard_bits, zero_block_cycles, *_tables(guard_bits, a.device), bits, pe_cycles, terms,
                     live_terms)  # fmt: skip
        with cuda.gpus[a.device.index]:  # launched on torch's stream, so ordered with its work on the tensors
            stream = cuda.external_stream(torch.cuda.current_stream(a.device).cuda_stream)
            _tile[-(-threads // _THREADS), _THREADS, stream](
                *(cuda.as_cuda_array(x, sync=False) if isinstance(x, torch.Tensor) else x for x in arguments))
    step_cycles = pe_cycles.amax(-1).to(torch.int64)
    terms, live_terms = terms.sum(-1), live_terms.sum(-1)
    return TileResult(bits.view(torch.float32), step_cycles.sum(-1), terms, live_terms - terms, step_cycles)
