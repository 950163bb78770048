"""The dataflow of SPEC section 5: a layer's forward, input-gradient and weight-gradient operations as tile passes.

An operation becomes one or more *problems*: independent sets of row streams and
column streams of equal length (``steps`` x ``lanes``), one per convolution group,
input-gradient stride phase (the s*s sub-kernels) or weight-gradient kernel offset.
A *pass* pairs a set of R row streams with a set of C column streams. The operand
with more zeros (after conversion to the operand format) goes on the rows, the
scheduled side. Streams are gathered on demand, one ``np.take`` of index arrays per batch
(never a Python loop per value), so only a batch of passes is in memory at a time.

A transposed convolution (``conv_transpose2d``) with weight W is the adjoint of the convolution with the
same W, stride, padding, dilation and groups whose input is the transposed layer's output: its forward is
that convolution's input gradient, its input gradient that convolution's forward, and its weight
gradient that convolution's weight gradient, each with the transposed layer's input in the place of the
convolution's output gradient and its output gradient in the place of the convolution's input. Its
operations are planned as those (``MIRRORED``), so the zeros a stride would insert between its inputs are
never issued; the plans keep the transposed layer's own operation and tensor names.
"""

import dataclasses
import functools
import math

import numpy as np

from dashraker.mapping.config import DATAFLOWS  # dnnsim: windows and taps W-outer, H-inner; dW per sample, lanes along H
from dashraker.models.kernels.numerics import quantize
from dashraker.trace.reader import conv_transpose_size

__all__ = ["OPS", "MIRRORED", "DATAFLOWS", "Streams", "Problem", "OpPlan", "PassBatch", "Geometry", "conv_geometry",
           "operands", "check_dataflow", "plan", "passes", "problem_passes"]

OPS = ("fwd", "bwd_input", "bwd_weight")
# A transposed convolution's operation -> the operation of the convolution it is the adjoint of that computes it.
MIRRORED = {"fwd": "bwd_input", "bwd_input": "fwd", "bwd_weight": "bwd_weight"}
# The convolution's tensors and results as the transposed layer names them: its input is their output gradient.
_ADJOINT_NAMES = {"A": "G", "G": "A", "W": "W", "out": "dA", "dA": "out", "dW": "dW"}


class Streams:
    """``count`` operand streams of ``steps`` x ``lanes`` values; ``take(start, stop)`` gathers some."""

    def __init__(self, count, steps, lanes, take):
        self.count, self.steps, self.lanes, self._take = count, steps, lanes, take

    def take(self, start, stop):
        """Streams ``start`` to ``stop`` as a float32 array [stop - start, steps, lanes]."""
        return self._take(start, stop)

    def num_sets(self, size):
        return -(-self.count // size)

    def used(self, size, sets):
        """How many real streams the sets of ``size`` numbered ``sets`` hold (the last may be partial)."""
        return np.minimum(size, self.count - np.asarray(sets) * size)

    def sets(self, size, first, last):
        """Stream sets ``first`` to ``last`` as [last - first, size, steps, lanes], missing streams zero.

        Only a partial last set is copied to be padded; otherwise the array is ``take``'s (read-only if a view).
        """
        start, stop = first * size, min(last * size, self.count)
        taken = self.take(start, stop)
        missing = (last - first) * size - (stop - start)
        if missing:
            taken = np.concatenate([taken, np.zeros((missing, self.steps, self.lanes), np.float32)])
        return taken.reshape(last - first, size, self.steps, self.lanes)


@dataclasses.dataclass
class Problem:
    """One independent part of an operation: ``rows`` (scheduled) and ``cols`` streams of equal steps."""

    label: str
    rows: Streams
    cols: Streams

    @property
    def steps(self):
        return self.rows.steps


@dataclasses.dataclass
class OpPlan:
    """An operation of a layer: its problems, which tensor is scheduled, and the tensor sizes it moves."""

    op: str
    scheduled: str  # "A" (activations), "W" (weights) or "G" (output gradients)
    partner: str
    zero_fraction: dict  # tensor name -> fraction of zeros in the operand format
    elements: dict  # tensor name -> element count, operands and the result ("out")
    problems: list


@dataclasses.dataclass
class PassBatch:
    """Consecutive passes of one problem: ``scheduled`` [P, R, S, N] and ``partner`` [P, C, S, N] values.

    Both are gathered on first use from the stream sets the batch reads, ``scheduled_sets[row_pick]`` and
    ``partner_sets[col_pick]`` (a pass repeats its row set for every column set), so that a GPU can be sent
    the sets alone and gather the passes itself.
    """

    problem: int
    label: str
    scheduled_sets: np.ndarray
    partner_sets: np.ndarray
    row_pick: np.ndarray
    col_pick: np.ndarray
    row_set: np.ndarray
    col_set: np.ndarray
    rows_used: np.ndarray
    cols_used: np.ndarray

    @functools.cached_property
    def scheduled(self):
        return self.scheduled_sets[self.row_pick]

    @functools.cached_property
    def partner(self):
        return self.partner_sets[self.col_pick]


def _pair(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


@dataclasses.dataclass(frozen=True)
class Geometry:
    """A layer as a convolution: input (n, c, H, W), kernel (m, KH, KW), stride, padding, dilation, groups."""

    input: tuple
    kernel: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int

    def output(self):
        """Output map (OH, OW), as PyTorch sizes it."""
        return tuple((size + 2 * p - d * (k - 1) - 1) // s + 1 for size, k, s, p, d in
                     zip(self.input[2:], self.kernel[1:], self.stride, self.padding, self.dilation))


def _transposed(layer):
    return getattr(layer, "type", None) == "conv_transpose2d"


def conv_geometry(layer, input_shape, weight_shape):
    """The ``Geometry`` of a layer: a Linear a 1x1 convolution, a Conv1d a Conv2d of height 1, a ``matmul``
    [b, M, K] @ [b, K, N] a grouped 1x1 convolution (one sample, M positions, b groups of K channels, b*N filters),
    a ``conv_transpose2d`` the convolution it is the adjoint of (its input the transposed layer's output map, its
    filters the transposed layer's input channels)."""
    if getattr(layer, "type", None) == "matmul":
        b, m, k = input_shape
        return Geometry((1, b * k, m, 1), (b * weight_shape[2], 1, 1), (1, 1), (0, 0), (1, 1), b)
    if _transposed(layer):
        c_in, c_out, *kernel = weight_shape  # c_out per group
        hyper = zip(input_shape[2:], kernel, layer.stride, layer.padding, layer.dilation, layer.output_padding)
        output = tuple(conv_transpose_size(*axis) for axis in hyper)
        return Geometry((input_shape[0], c_out * layer.groups, *output), (c_in, *kernel), tuple(layer.stride),
                        tuple(layer.padding), tuple(layer.dilation), layer.groups)
    if len(weight_shape) == 2:
        n = input_shape[0]
        spatial = math.prod(input_shape[1:-1])  # a Linear over [n, ..., in]: positions on one axis
        return Geometry((n, input_shape[-1], spatial, 1), (weight_shape[0], 1, 1), (1, 1), (0, 0), (1, 1), 1)
    height = (1,) * (4 - len(input_shape))  # a Conv1d's [n, c, L] is [n, c, 1, L]
    return Geometry(
        (*input_shape[:2], *height, *input_shape[2:]),
        (weight_shape[0], *height, *weight_shape[2:]),
        _pair(getattr(layer, "stride", 1)),
        _pair(getattr(layer, "padding", 0)),
        _pair(getattr(layer, "dilation", 1)),
        getattr(layer, "groups", 1) or 1,
    )


def _to_nchw(x, shape, features_last):
    """A recorded activation or gradient as the NCHW tensor ``shape`` of the layer's convolution.

    ``features_last``: a Linear's [n, ..., features] or a matmul's [b, M, features], which become
    [n, features, positions, 1] (a matmul's b then folds into one sample of b channel groups); a
    convolution's tensor is only reshaped (a Conv1d's [n, c, L] to [n, c, 1, L]).
    """
    if features_last:
        x = np.ascontiguousarray(x.reshape(x.shape[0], -1, x.shape[-1]).transpose(0, 2, 1))
    return x.reshape(shape)


def _pad_lanes(x, lanes):
    """Zero-pad the last axis to a multiple of ``lanes``."""
    pad = -x.shape[-1] % lanes
    return np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)]) if pad else x


def _array_streams(array, lanes):
    """Streams stored whole: ``array`` [count, ..., values] with values padded and split into lanes."""
    array = _pad_lanes(array, lanes)
    array = np.ascontiguousarray(array.reshape(array.shape[0], -1, lanes))
    return Streams(array.shape[0], array.shape[1], lanes, _slicer(array))


def _window_streams(source, rows_index, cols_index, lanes, h_inner=False):
    """A stream per (sample, position): ``source`` [n, X+1, Y+1, channels] (index X / Y is a zero slot).

    ``rows_index`` [positions_x, taps_x] and ``cols_index`` [positions_y, taps_y] give the source
    coordinates of each window tap; steps walk the channel chunks, then the y taps, then the x taps.
    ``h_inner`` (dnnsim) walks x innermost instead, for both the positions and the taps.
    """
    source = _pad_lanes(source, lanes)
    n, size_x, size_y, channels = source.shape
    px, tx = rows_index.shape
    py, ty = cols_index.shape
    steps = tx * ty * channels // lanes
    pixels = source.reshape(-1, channels)  # one row of channels per (sample, x, y)

    def take(start, stop):
        sample, position = np.divmod(np.arange(start, stop), px * py)
        y, x = np.divmod(position, px) if h_inner else np.divmod(position, py)[::-1]
        rows = (sample[:, None] * size_x + rows_index[x]) * size_y
        index = rows[:, :, None] + cols_index[y][:, None, :]  # [streams, x taps, y taps]
        index = index.swapaxes(1, 2) if h_inner else index
        return np.take(pixels, index.ravel(), axis=0).reshape(stop - start, steps, lanes)

    return Streams(n * px * py, steps, lanes, take)


def _nhwc_with_zero_slot(x):
    """[n, c, X, Y] -> [n, X+1, Y+1, c] with a zero row and column at index X and Y."""
    n, c, h, w = x.shape
    out = np.zeros((n, h + 1, w + 1, c), np.float32)
    out[:, :h, :w] = x.transpose(0, 2, 3, 1)
    return out


def _forward_index(out_size, in_size, kernel, stride, pad, dilation):
    """[out_size, kernel] input coordinate of each output position and tap; padding -> ``in_size``."""
    index = np.arange(out_size)[:, None] * stride + np.arange(kernel)[None, :] * dilation - pad
    return np.where((index >= 0) & (index < in_size), index, in_size)


def _phase_index(in_size, out_size, kernel, stride, pad, dilation, phase):
    """Input positions of one stride phase, its taps (rot180 order) and [positions, taps] gradient coordinates.

    Input position x receives gradient from taps i with i * dilation = (x + pad) mod stride
    (modulo stride); walking them from the last tap down is walking the rotated kernel, and the
    gradient coordinate is (x + pad - i * dilation) / stride, exact. Coordinates outside the
    gradient map -> ``out_size``.
    """
    positions = np.arange(in_size)[(np.arange(in_size) + pad) % stride == phase]
    taps = np.arange(kernel)[np.arange(kernel) * dilation % stride == phase][::-1]
    index = (positions[:, None] + pad - taps[None, :] * dilation) // stride
    return positions, taps, np.where((index >= 0) & (index < out_size), index, out_size)


def _taps(kernel, h_inner):
    """A kernel [..., KH, KW, channels] with its taps in the order ``_window_streams`` walks them."""
    return kernel.swapaxes(-3, -2) if h_inner else kernel


def _samples(n, dnnsim):
    """(label, sample slice) of each set of windows: all samples together, or (dnnsim) each on its own, as DNNsim
    simulates a sample at a time (its windows never share a pass with another sample's: a Linear layer, whose
    samples are its only windows, gets one sample per pass)."""
    return [(f" sample {s}", slice(s, s + 1)) for s in range(n)] if dnnsim else [("", slice(None))]


def _forward(a, w, g, geo, lanes, dnnsim):
    n, c, h, wd = a.shape
    m, cg, kh, kw = w.shape
    groups, mg = geo.groups, m // geo.groups
    hi, wi = _tap_index(a, w, g, geo)
    for k in range(groups):
        source = _nhwc_with_zero_slot(a[:, k * cg : (k + 1) * cg])
        filters = _array_streams(_taps(w[k * mg : (k + 1) * mg].transpose(0, 2, 3, 1), dnnsim), lanes)
        for name, sample in _samples(n, dnnsim):
            yield f"group {k}{name}", _window_streams(source[sample], hi, wi, lanes, dnnsim), filters


def _tap_index(a, w, g, geo):
    """Input coordinates [out positions, taps] along H and along W (``_forward_index``)."""
    return tuple(_forward_index(out, size, kernel, *params) for out, size, kernel, params in
                 zip(g.shape[2:], a.shape[2:], w.shape[2:], zip(geo.stride, geo.padding, geo.dilation)))


def _input_grad(a, w, g, geo, lanes, dnnsim):
    m, cg, kh, kw = w.shape
    groups, mg = geo.groups, m // geo.groups
    stride, pad, dilation = geo.stride, geo.padding, geo.dilation
    (h, wd), (oh, ow) = a.shape[2:], g.shape[2:]
    for k in range(groups):
        source = _nhwc_with_zero_slot(g[:, k * mg : (k + 1) * mg])
        flipped = w[k * mg : (k + 1) * mg].transpose(1, 2, 3, 0)  # [cg, kh, kw, mg]
        for qh in range(stride[0]):
            rows, taps_h, hi = _phase_index(h, oh, kh, stride[0], pad[0], dilation[0], qh)
            for qw in range(stride[1]):
                cols, taps_w, wi = _phase_index(wd, ow, kw, stride[1], pad[1], dilation[1], qw)
                if not (len(rows) and len(cols) and len(taps_h) and len(taps_w)):
                    continue  # positions no tap reaches: their gradient is zero, no work
                filters = _array_streams(_taps(flipped[:, taps_h][:, :, taps_w], dnnsim), lanes)
                for name, sample in _samples(len(source), dnnsim):
                    windows = _window_streams(source[sample], hi, wi, lanes, dnnsim)
                    yield f"group {k}{name} phase ({qh},{qw})", windows, filters


def _position_streams(x, lanes, h_inner=False):
    """[n, channels, H, W] -> a stream per channel; steps are samples x position chunks (``h_inner``: W-outer)."""
    n, c = x.shape[:2]
    x = _pad_lanes((x.swapaxes(2, 3) if h_inner else x).reshape(n, c, -1), lanes)
    return np.ascontiguousarray(x.transpose(1, 0, 2)).reshape(c, -1, lanes)


def _weight_grad(a, w, g, geo, lanes, dnnsim):
    """Per kernel offset; dnnsim: per sample too (its passes see one sample, no lookahead across samples)."""
    n, c, h, wd = a.shape
    m, cg, kh, kw = w.shape
    groups, mg = geo.groups, m // geo.groups
    oh, ow = g.shape[2:]
    planes = np.zeros((c, n, h + 1, wd + 1), np.float32)  # per channel and sample, with a zero row and column
    planes[:, :, :h, :wd] = a.transpose(1, 0, 2, 3)
    planes = planes.reshape(c, n, -1)
    hi, wi = _tap_index(a, w, g, geo)
    samples = _samples(n, dnnsim)
    chunks = -(-oh * ow // lanes)  # lane chunks of a sample's output positions
    steps = len(range(n)[samples[0][1]]) * chunks
    for k in range(groups):
        for name, sample in samples:
            grads = _position_streams(g[sample, k * mg : (k + 1) * mg], lanes, dnnsim)
            # kernel offsets H-outer; dnnsim: W-outer, H-inner, DNNsim's order (which its carried skip counter sees)
            offsets = [(i, j) for j in range(kw) for i in range(kh)] if dnnsim else np.ndindex(kh, kw)
            for i, j in offsets:
                # The plane slot sampled at each output position, in _position_streams' order;
                # the padding positions read the zero slot (h, wd), the plane's last.
                taps = hi[:, i][:, None] * (wd + 1) + wi[:, j][None, :]
                index = np.full(chunks * lanes, planes.shape[-1] - 1)
                index[: taps.size] = (taps.T if dnnsim else taps).ravel()

                def take(start, stop, index=index, first=k * cg, sample=sample):
                    sampled = np.take(planes[first + start : first + stop, sample], index, axis=2)
                    return sampled.reshape(stop - start, -1, lanes)

                acts = Streams(cg, steps, lanes, take)
                yield f"group {k}{name} offset ({i},{j})", acts, Streams(mg, steps, lanes, _slicer(grads))


def _slicer(array):
    """``take`` of streams stored whole: views, read-only since the plan's arrays are shared by every design."""
    array = array.view()
    array.flags.writeable = False
    return lambda start, stop: array[start:stop]


_OPERATIONS = {
    "fwd": (_forward, ("A", "W"), "out"),
    "bwd_input": (_input_grad, ("G", "W"), "dA"),
    "bwd_weight": (_weight_grad, ("A", "G"), "dW"),
}


def operands(layer, tensors, fmt="bf16", rounding="nearest"):
    """A layer's tensors in the operand format as NCHW arrays: ``{"A": input, "W": weight, "G": output grad}``.

    Values are converted to ``fmt`` (round to nearest even or truncate, subnormals flushed);
    Linear, Conv1d and matmul tensors become those of their convolution (``conv_geometry``); a transposed
    convolution's stay its own (``plan`` hands them to its convolution).
    """
    geo = conv_geometry(layer, tensors.input.shape, tensors.weight.shape)
    (m, kh, kw), shape = geo.kernel, geo.input
    a_shape, g_shape = shape, (shape[0], m, *geo.output())
    if _transposed(layer):  # the convolution's input is the size of this layer's output
        a_shape, g_shape = tensors.input.shape, shape
    weight, matmul = tensors.weight, getattr(layer, "type", None) == "matmul"
    if matmul:
        weight = weight.swapaxes(1, 2)  # [b, N, K]: b*N filters of K channels
    features_last = matmul or weight.ndim == 2
    return {
        "A": _to_nchw(quantize(tensors.input, fmt, rounding), a_shape, features_last),
        "W": quantize(weight, fmt, rounding).reshape(m, shape[1] // geo.groups, kh, kw),
        "G": _to_nchw(quantize(tensors.output_grad, fmt, rounding), g_shape, features_last),
    }


def check_dataflow(layer, dataflow):
    """Refuse (``ValueError``) a ``dataflow`` (in ``DATAFLOWS``) that cannot form ``layer``'s passes: DNNsim has no
    transposed convolution, so the ``dnnsim`` preset has no pass formation for one."""
    if dataflow not in DATAFLOWS:
        raise ValueError(f"unknown dataflow {dataflow!r}; expected one of {list(DATAFLOWS)}")
    if dataflow == "dnnsim" and _transposed(layer):
        raise ValueError(f"layer {layer.name!r}: the dnnsim dataflow forms no transposed convolution's passes "
                         "(DNNsim simulates none); map it with the default dataflow")


def _dnnsim_sparsity(x, op, geo):
    """The share of zeros DNNsim weighs the windows' operand by (``x``: the activations, or the output gradients of
    the input gradient) to choose the scheduled side: over the zero-padded map it slides its windows on (the layer's
    padding; for the input gradient the full convolution's, (K - 1) * d - p), padding included."""
    n, c, h, w = x.shape
    kernel = geo.kernel[1:]
    pads = geo.padding if op != "bwd_input" else [max(0, (k - 1) * d - p) for k, d, p in
                                                  zip(kernel, geo.dilation, geo.padding)]
    padded = n * c * (h + 2 * pads[0]) * (w + 2 * pads[1])
    return (padded - np.count_nonzero(x)) / max(padded, 1)


def plan(layer, tensors, op, lanes, fmt="bf16", rounding="nearest", arrays=None, dataflow="default"):
    """The problems of one operation of a layer (``op`` in ``OPS``), the sparser operand on the rows.

    ``dataflow`` (in ``DATAFLOWS``) picks the pass formation: SPEC section 5's, or DNNsim's, which also chooses the
    scheduled side as DNNsim does: the windows' operand (activations; gradients of the input gradient), its zeros
    counted over its zero-padded map, only when strictly sparser than the other (weights, or gradients).
    A transposed convolution's ``op`` is planned as the ``MIRRORED`` operation of its convolution (module docstring).

    ``layer`` has ``name``, ``stride``, ``padding``, ``dilation``, ``groups`` (a LayerInfo); ``tensors`` has
    ``input``, ``weight`` and ``output_grad`` arrays as PyTorch lays them out; ``arrays`` may
    give their ``operands(...)`` already converted, to share the conversion between operations.
    """
    if op not in _OPERATIONS:
        raise ValueError(f"unknown operation {op!r}; expected one of {list(OPS)}")
    check_dataflow(layer, dataflow)
    geo = conv_geometry(layer, tensors.input.shape, tensors.weight.shape)
    arrays = operands(layer, tensors, fmt, rounding) if arrays is None else arrays
    build, names, result = _OPERATIONS[op]
    conv = arrays  # the convolution's tensors, by its names
    if _transposed(layer):
        build, names, result = _OPERATIONS[MIRRORED[op]]
        names, result = tuple(_ADJOINT_NAMES[name] for name in names), _ADJOINT_NAMES[result]
        conv = {_ADJOINT_NAMES[name]: array for name, array in arrays.items()}
    a, w, g = conv["A"], conv["W"], conv["G"]
    zeros = {name: 1.0 - np.count_nonzero(arrays[name]) / max(arrays[name].size, 1) for name in names}
    if dataflow == "dnnsim":
        swap = not _dnnsim_sparsity(arrays[names[0]], op, geo) > zeros[names[1]]
    else:
        swap = bool(zeros[names[1]] > zeros[names[0]])
    problems = [
        Problem(label, *((second, first) if swap else (first, second)))
        for label, first, second in build(a, w, g, geo, lanes, dataflow == "dnnsim")
    ]
    out_elements = {"out": arrays["G"].size, "dA": arrays["A"].size, "dW": arrays["W"].size}[result]
    return OpPlan(
        op=op,
        scheduled=names[swap],
        partner=names[not swap],
        zero_fraction=zeros,
        elements={**{name: int(arrays[name].size) for name in names}, result: int(out_elements)},
        problems=problems,
    )


def passes(layer, tensors, op, rows, cols, lanes, fmt="bf16", rounding="nearest", max_values=1 << 24,
           dataflow="default"):
    """Yield the passes of one operation in batches (the public face of this module).

    Each ``PassBatch`` holds P passes of one problem, the scheduled side [P, rows, steps, lanes]
    and the partner side [P, cols, steps, lanes] as float32 values in the operand format; passes run
    row set by row set, the column sets innermost, and a batch holds at most about ``max_values``
    values. Missing streams of a partial set are zero (``rows_used``/``cols_used`` say how many are real).
    """
    for index, problem in enumerate(plan(layer, tensors, op, lanes, fmt, rounding, dataflow=dataflow).problems):
        yield from problem_passes(index, problem, rows, cols, max_values)


def problem_passes(index, problem, rows, cols, max_values=1 << 24):
    """The passes of one problem, in batches (see ``passes``)."""
    col_sets = problem.cols.num_sets(cols)
    total = problem.rows.num_sets(rows) * col_sets
    batch = max(1, max_values // ((rows + cols) * problem.steps * problem.rows.lanes))
    for start in range(0, total, batch):
        numbers = np.arange(start, min(start + batch, total))
        row_set, col_set = np.divmod(numbers, col_sets)
        r0, r1 = row_set[0], row_set[-1] + 1
        c0, c1 = (col_set.min(), col_set.max() + 1)
        yield PassBatch(
            problem=index,
            label=problem.label,
            scheduled_sets=problem.rows.sets(rows, r0, r1),
            partner_sets=problem.cols.sets(cols, c0, c1),
            row_pick=row_set - r0,
            col_pick=col_set - c0,
            row_set=row_set,
            col_set=col_set,
            rows_used=problem.rows.used(rows, row_set),
            cols_used=problem.cols.used(cols, col_set),
        )
