"""A layer as a convolution (``Geometry``) and the index maths that gathers each operation's problems from it.

``forward``, ``input_grad`` and ``weight_grad`` yield, for one operation, ``(label, first, second)``: a problem's
label and the streams of its two operands, in the order the operation names them.
"""

import dataclasses
import math

import numpy as np

from dashraker.mapping.dataflow.streams import Streams, array_streams, pad_lanes, slicer, window_streams
from dashraker.trace.reader import conv_transpose_size

__all__ = ["Geometry", "conv_geometry", "is_transposed", "forward", "input_grad", "weight_grad"]


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


def is_transposed(layer):
    return getattr(layer, "type", None) == "conv_transpose2d"


def conv_geometry(layer, input_shape, weight_shape):
    """The ``Geometry`` of a layer: a Linear a 1x1 convolution, a Conv1d a Conv2d of height 1, a ``matmul``
    [b, M, K] @ [b, K, N] a grouped 1x1 convolution (one sample, M positions, b groups of K channels, b*N filters),
    a ``conv_transpose2d`` the convolution it is the adjoint of (its input the transposed layer's output map, its
    filters the transposed layer's input channels)."""
    if getattr(layer, "type", None) == "matmul":
        b, m, k = input_shape
        return Geometry((1, b * k, m, 1), (b * weight_shape[2], 1, 1), (1, 1), (0, 0), (1, 1), b)
    if is_transposed(layer):
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
    """A kernel [..., KH, KW, channels] with its taps in the order ``window_streams`` walks them."""
    return kernel.swapaxes(-3, -2) if h_inner else kernel


def _samples(n, dnnsim):
    """(label, sample slice) of each set of windows: all samples together, or (dnnsim) each on its own, as DNNsim
    simulates a sample at a time (its windows never share a pass with another sample's: a Linear layer, whose
    samples are its only windows, gets one sample per pass)."""
    return [(f" sample {s}", slice(s, s + 1)) for s in range(n)] if dnnsim else [("", slice(None))]


def forward(a, w, g, geo, lanes, dnnsim):
    n, c, h, wd = a.shape
    m, cg, kh, kw = w.shape
    groups, mg = geo.groups, m // geo.groups
    hi, wi = _tap_index(a, w, g, geo)
    for k in range(groups):
        source = _nhwc_with_zero_slot(a[:, k * cg : (k + 1) * cg])
        filters = array_streams(_taps(w[k * mg : (k + 1) * mg].transpose(0, 2, 3, 1), dnnsim), lanes)
        for name, sample in _samples(n, dnnsim):
            yield f"group {k}{name}", window_streams(source[sample], hi, wi, lanes, dnnsim), filters


def _tap_index(a, w, g, geo):
    """Input coordinates [out positions, taps] along H and along W (``_forward_index``)."""
    return tuple(_forward_index(out, size, kernel, *params) for out, size, kernel, params in
                 zip(g.shape[2:], a.shape[2:], w.shape[2:], zip(geo.stride, geo.padding, geo.dilation)))


def input_grad(a, w, g, geo, lanes, dnnsim):
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
                filters = array_streams(_taps(flipped[:, taps_h][:, :, taps_w], dnnsim), lanes)
                for name, sample in _samples(len(source), dnnsim):
                    windows = window_streams(source[sample], hi, wi, lanes, dnnsim)
                    yield f"group {k}{name} phase ({qh},{qw})", windows, filters


def _position_streams(x, lanes, h_inner=False):
    """[n, channels, H, W] -> a stream per channel; steps are samples x position chunks (``h_inner``: W-outer)."""
    n, c = x.shape[:2]
    x = pad_lanes((x.swapaxes(2, 3) if h_inner else x).reshape(n, c, -1), lanes)
    return np.ascontiguousarray(x.transpose(1, 0, 2)).reshape(c, -1, lanes)


def weight_grad(a, w, g, geo, lanes, dnnsim):
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
                yield f"group {k}{name} offset ({i},{j})", acts, Streams(mg, steps, lanes, slicer(grads))
