"""Reads a trace folder (SPEC section 6): validates ``manifest.json`` and memory-maps one layer and step at a time."""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from dashraker.trace.errors import TraceError
from dashraker.trace.store import FORMAT, FORMAT_VERSION, MANIFEST, tensor_path

__all__ = ["LayerInfo", "UnsupportedLayer", "LayerTensors", "Trace", "open_trace", "open_tensor", "LAYER_TYPES",
           "conv_transpose_size"]

LAYER_TYPES = ("conv2d", "linear", "conv1d", "matmul", "conv_transpose2d")
RANKS = {"conv2d": (4,), "linear": (2, 3), "conv1d": (3,), "matmul": (3,),
         "conv_transpose2d": (4,)}  # dimensions of a layer type's tensors


@dataclass(frozen=True)
class LayerInfo:
    """One recorded layer as the manifest describes it.

    A Linear layer is a 1x1 convolution: kernel (1, 1), stride (1, 1), padding (0, 0), groups 1;
    its ``input_shape`` is [samples, in_features] (1x1 maps) or, for a sequence model, [samples,
    positions, in_features] (the tokens are the map's positions), and ``weight_shape``
    [out_features, in_features]. A Conv2d layer's shapes
    are NCHW as PyTorch has them: input [n, c, h, w], weight [m, c/groups, kx, ky], output
    gradient [n, m, oh, ow]. ``kernel``, ``stride``, ``padding`` and ``dilation`` are pairs over
    the two spatial axes (weight dimensions 2 and 3). A Conv1d layer (NCL shapes, one value per
    field in the manifest) is a Conv2d of height 1: its pairs are (1, k), (1, s), (0, p), (1, d).
    A ``matmul`` layer is a product of two activations, input [b, M, K] @ weight [b, K, N] (its
    second activation), output gradient [b, M, N]; in_channels K, out_channels N, fields as a Linear's.
    A ``conv_transpose2d`` layer (a ConvTranspose2d) has NCHW input [n, in_channels, h, w], weight as PyTorch
    has it [in_channels, out_channels/groups, kx, ky] and output gradient [n, out_channels, oh, ow], its size
    ``conv_transpose_size``; it alone has an ``output_padding`` other than (0, 0).
    """

    name: str
    type: str
    in_channels: int
    out_channels: int
    kernel: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int
    bias: bool
    input_shape: tuple
    weight_shape: tuple
    output_grad_shape: tuple
    has_input_grad: bool
    input_needs_grad: bool = None  # whether training computes the input gradient; None where a trace does not say
    output_padding: tuple = (0, 0)

    @property
    def input_grad_shape(self):
        """Shape of the recorded input gradient, or None where it was not recorded."""
        return self.input_shape if self.has_input_grad else None

    def shape_of(self, tensor):
        """The expected shape of ``tensor`` ("input", "weight", "output_grad" or "input_grad")."""
        return getattr(self, f"{tensor}_shape")


@dataclass(frozen=True)
class UnsupportedLayer:
    """A manifest entry of a layer type this version does not know (a newer recorder's, another tool's).

    The rest of the trace still reads; the mapper and co-simulation cannot take the layer, so
    ``trace check`` warns of it and ``map --skip-unsupported`` maps the other layers.
    """

    name: str
    type: str

    @property
    def reason(self):
        return f"type {self.type!r} is not one this version maps or co-simulates ({', '.join(LAYER_TYPES)})"


class LayerTensors(NamedTuple):
    """The arrays of one layer at one step, read-only ``np.memmap`` float32 views of the files."""

    input: np.ndarray
    weight: np.ndarray
    output_grad: np.ndarray
    input_grad: np.ndarray = None


def _fail(where, message):
    raise TraceError(f"{where}: {message}")


def _get(entry, key, where, check, expected):
    if key not in entry:
        _fail(where, f"missing field {key!r}")
    value = entry[key]
    if not check(value):
        _fail(where, f"field {key!r} must be {expected}, not {value!r}")
    return value


def _is_int(value, minimum):
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _ints(value, length, minimum):
    return (
        isinstance(value, list)
        and (length is None or len(value) == length)
        and all(_is_int(v, minimum) for v in value)
    )


def _conv_out(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv_transpose_size(size, kernel, stride, padding, dilation, output_padding):
    """The output size along one axis of a transposed convolution, as PyTorch sizes it."""
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def _expected_shapes(info):
    """(weight shape, output gradient shape) that the layer's hyper-parameters and input shape imply."""
    if info.type == "linear":
        return (info.out_channels, info.in_channels), (*info.input_shape[:-1], info.out_channels)
    if info.type == "matmul":
        b, m, k = info.input_shape
        return (b, k, info.out_channels), (b, m, info.out_channels)
    n, _, *spatial = info.input_shape
    if info.type == "conv_transpose2d":
        out = [conv_transpose_size(*dims) for dims in zip(spatial, info.kernel, info.stride, info.padding,
                                                          info.dilation, info.output_padding)]
        return (info.in_channels, info.out_channels // info.groups, *info.kernel), (n, info.out_channels, *out)
    axes = slice(2 - len(spatial), 2)  # a conv1d's one axis is the second of its pairs
    out = [_conv_out(*dims) for dims in zip(spatial, info.kernel[axes], info.stride[axes], info.padding[axes],
                                            info.dilation[axes])]
    weight = (info.out_channels, info.in_channels // info.groups, *info.kernel[axes])
    return weight, (n, info.out_channels, *out)


def _layer_info(entry, where, version):
    if not isinstance(entry, dict):
        _fail(where, f"layer entry must be an object, not {entry!r}")
    name = _get(entry, "name", where, lambda v: isinstance(v, str) and v and "/" not in v, "a name without '/'")
    where = f"{where} {name!r}"
    types = LAYER_TYPES if version > 1 else LAYER_TYPES[:2]  # version 1 knew conv2d and linear
    kind = _get(entry, "type", where, lambda v: v in types or (isinstance(v, str) and v and v not in LAYER_TYPES),
                f"one of {types} (or a type this version does not know)")
    if kind not in types:
        return UnsupportedLayer(name, kind)
    ranks, axes = RANKS[kind], 1 if kind == "conv1d" else 2

    def shape(key):
        expected = f"{' or '.join(map(str, ranks))} positive integers"
        return tuple(_get(entry, key, where, lambda v: _ints(v, None, 1) and len(v) in ranks, expected))

    def pair(key, minimum=1):
        count = "one integer" if axes == 1 else "two integers"
        value = _get(entry, key, where, lambda v: _ints(v, axes, minimum), f"{count} >= {minimum}")
        return (minimum,) * (2 - axes) + tuple(value)  # a conv1d has height 1: no padding, unit kernel and steps

    def positive(key):
        return _get(entry, key, where, lambda v: _is_int(v, 1), "a positive integer")

    def flag(key):
        return _get(entry, key, where, lambda v: isinstance(v, bool), "true or false")

    info = LayerInfo(
        name=name,
        type=kind,
        in_channels=positive("in_channels"),
        out_channels=positive("out_channels"),
        kernel=pair("kernel"),
        stride=pair("stride"),
        padding=pair("padding", 0),
        dilation=pair("dilation"),
        groups=positive("groups"),
        bias=flag("bias"),
        input_shape=shape("input_shape"),
        weight_shape=shape("weight_shape"),
        output_grad_shape=shape("output_grad_shape"),
        has_input_grad=flag("has_input_grad"),
        input_needs_grad=flag("input_needs_grad") if version > 1 else None,
        output_padding=pair("output_padding", 0) if kind == "conv_transpose2d" else (0, 0),
    )
    if any(o >= max(s, d) for o, s, d in zip(info.output_padding, info.stride, info.dilation)):
        _fail(where, f"field 'output_padding' {list(info.output_padding)} must be smaller than the stride or the "
                     "dilation on each axis")
    if kind in ("linear", "matmul") and (info.kernel, info.stride, info.padding, info.dilation, info.groups) != (
        (1, 1), (1, 1), (0, 0), (1, 1), 1
    ):
        _fail(where, f"a {kind} layer has kernel [1, 1], stride [1, 1], padding [0, 0], dilation [1, 1], groups 1")
    if info.in_channels % info.groups or info.out_channels % info.groups:
        _fail(where, f"field 'groups' ({info.groups}) must divide in_channels and out_channels")
    if info.input_shape[-1 if kind in ("matmul", "linear") else 1] != info.in_channels:
        _fail(where, f"field 'input_shape' {list(info.input_shape)} does not have in_channels={info.in_channels}")
    weight, output_grad = _expected_shapes(info)
    for key, expected in (("weight_shape", weight), ("output_grad_shape", output_grad)):
        if getattr(info, key) != expected:
            got = list(getattr(info, key))
            _fail(where, f"field {key!r} is {got}; the layer's hyper-parameters give {list(expected)}")
    return info


def _parse_manifest(path):
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise TraceError(f"{path}: missing file (not a trace folder, or its recording never finished a step)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TraceError(f"{path}: unreadable JSON ({error})") from None
    where = str(path)
    if not isinstance(manifest, dict):
        _fail(where, "must hold a JSON object")
    _get(manifest, "format", where, lambda v: v == FORMAT, repr(FORMAT))
    version = _get(manifest, "format_version", where, lambda v: _is_int(v, 1) and v <= FORMAT_VERSION,
                   f"1 to {FORMAT_VERSION} (this reader's versions)")
    _get(manifest, "dtype", where, lambda v: v == "float32", "'float32'")
    _get(manifest, "model", where, lambda v: isinstance(v, str), "a string")
    _get(manifest, "framework", where, lambda v: isinstance(v, dict), "an object of package versions")
    steps = _get(manifest, "steps", where, lambda v: _ints(v, None, 1), "a list of positive integers")
    if steps != sorted(set(steps)):
        _fail(where, f"field 'steps' must be increasing without repeats, not {steps}")
    entries = _get(manifest, "layers", where, lambda v: isinstance(v, list) and v, "a non-empty list")
    layers = [_layer_info(entry, f"{where}: layer {i}", version) for i, entry in enumerate(entries)]
    names = [layer.name for layer in layers]
    if len(set(names)) != len(names):
        _fail(where, f"layer names repeat: {sorted({n for n in names if names.count(n) > 1})}")
    known = [layer for layer in layers if isinstance(layer, LayerInfo)]
    unsupported = [layer for layer in layers if isinstance(layer, UnsupportedLayer)]
    if not known:
        _fail(where, f"no layer of a type this version takes ({', '.join(LAYER_TYPES)}): {unsupported[0].reason}")
    return manifest, steps, known, unsupported


def open_tensor(path, shape, check_finite=True):
    """Memory-map one ``.npy`` file, checking it is whole, float32, C-ordered, of ``shape``, and (optionally) finite."""
    path = Path(path)
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise TraceError(f"{path}: missing file") from None
    except (ValueError, OSError, EOFError) as error:
        raise TraceError(f"{path}: not a readable .npy file, corrupted or truncated ({error})") from None
    if not isinstance(array, np.memmap) or array.dtype != np.dtype("<f4"):
        raise TraceError(f"{path}: dtype is {array.dtype}, expected float32")
    if not array.flags.c_contiguous:
        raise TraceError(f"{path}: stored in Fortran order, expected C order")
    if array.shape != tuple(shape):
        raise TraceError(f"{path}: shape is {list(array.shape)}, the manifest says {list(shape)}")
    size = path.stat().st_size
    if array.offset + array.nbytes != size:
        raise TraceError(f"{path}: file has {size} bytes, header and shape need {array.offset + array.nbytes}")
    if check_finite and not np.isfinite(array).all():
        bad = np.flatnonzero(~np.isfinite(array))
        first = np.unravel_index(bad[0], array.shape)
        raise TraceError(
            f"{path}: {bad.size} NaN/Inf value(s), first at index {[int(i) for i in first]} ({array[first]})"
        )
    return array


class Trace:
    """An opened trace folder. ``load`` maps one layer and step; nothing else is read until asked for.

    ``layers`` are the layers this version takes; ``unsupported`` the manifest's others (``UnsupportedLayer``).
    """

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise TraceError(f"{self.path}: not a folder")
        self.manifest, self.steps, self.layers, self.unsupported = _parse_manifest(self.path / MANIFEST)
        self._by_name = {layer.name: layer for layer in self.layers}

    def __repr__(self):
        model = self.manifest["model"]
        return f"<Trace {str(self.path)!r} model={model!r} layers={len(self.layers)} steps={self.steps}>"

    @property
    def unrecorded(self):
        """The ``(name, type)`` of modules with parameters the recording left out (the manifest's
        ``unrecorded_layers``): a map of the trace leaves their work out."""
        return [(entry.get("name"), entry.get("type")) for entry in self.manifest.get("unrecorded_layers") or ()
                if isinstance(entry, dict)]

    def layer(self, name):
        """The ``LayerInfo`` named ``name``."""
        try:
            return self._by_name[name]
        except KeyError:
            unsupported = {layer.name: layer for layer in self.unsupported}
            if name in unsupported:
                raise TraceError(f"{self.path}: layer {name!r}: {unsupported[name].reason}") from None
            raise TraceError(f"{self.path}: no layer {name!r}; layers: {list(self._by_name)}") from None

    def tensor_path(self, layer, step, tensor):
        """The file of one tensor ("input", "weight", "output_grad", "input_grad") of a layer at a step."""
        return tensor_path(self.path, step, layer, tensor)

    def tensor_names(self, layer):
        """The tensors recorded for ``layer`` (a ``LayerInfo`` or name), in file order."""
        info = layer if isinstance(layer, LayerInfo) else self.layer(layer)
        return ("input", "weight", "output_grad") + (("input_grad",) if info.has_input_grad else ())

    def load_tensor(self, layer, step, tensor, check_finite=True):
        """Memory-map one tensor of a layer at a step, validated against the manifest."""
        info = self.layer(layer)
        if step not in self.steps:
            raise TraceError(f"{self.path}: step {step} was not recorded; recorded steps: {self.steps}")
        if tensor not in self.tensor_names(info):
            raise TraceError(f"{self.path}: layer {layer!r} has no recorded {tensor!r}")
        return open_tensor(self.tensor_path(layer, step, tensor), info.shape_of(tensor), check_finite)

    def load(self, layer, step, check_finite=True):
        """The ``LayerTensors`` of ``layer`` at optimizer step ``step`` (memory-mapped, shapes validated)."""
        names = self.tensor_names(layer)
        return LayerTensors(*(self.load_tensor(layer, step, name, check_finite) for name in names))


def open_trace(path):
    """Open a trace folder, validating its manifest; raises ``TraceError`` naming the file, layer and field."""
    return Trace(path)
