"""Records the input, weight and output gradient (input gradient optionally) of every Conv1d, Conv2d,
ConvTranspose2d, Linear and ``MatMul`` layer (``trace.layers``; a ``MatMul``'s second activation is recorded as its
weight).

Output gradients are captured by tensor hooks that forward hooks register on each layer's
output. Unlike module backward hooks this works when an in-place op (``ReLU(inplace=True)``,
``out += shortcut``) later modifies the output: a tensor hook registered before the in-place
op receives the gradient of the value the layer produced. Input gradients are captured on an
alias of the input (``view_as``) made by a forward pre-hook, so a tensor that feeds several
layers (a ResNet block input feeds ``conv1`` and the shortcut) yields each layer's own
contribution rather than their sum. Hooks exist only during recorded steps and only copy
tensors (or pass on a copy of a layer's output), so training is unchanged.

A module that runs k + 1 times in a step (shared weights, a block applied repeatedly, gradient
accumulation inside one recorded step) gives k + 1 layer entries: its name for the first call,
``name#1`` ... ``name#k`` for the later ones, in call order.

Memory: each tensor is copied to the host and written to its file the moment its hook sees it, so
beyond what training itself holds the recorder holds one recorded tensor at a time (the largest:
``samples`` x the largest per-sample activation or gradient, 4 bytes a value), for any network
and on any device.
"""

import contextlib
import platform
import shutil
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch import nn

from dashraker.outputs import OutputFolder
from dashraker.trace.errors import RecordError
from dashraker.trace.layers import MatMul
from dashraker.trace.reader import conv_transpose_size
from dashraker.trace.store import (FORMAT, FORMAT_VERSION, MANIFEST, RECORDED_NAMES, is_trace, save_json, save_npy,
                                   step_path, tensor_path, unrecorded_message)

__all__ = ["Recorder", "recording", "recordable_layers", "unrecorded_layers", "call_name",
           "RECORDED", "UnrecordedWarning"]


RECORDED = (nn.Conv1d, nn.Conv2d, nn.ConvTranspose2d, nn.Linear, MatMul)  # store.RECORDED_NAMES names them
# The manifest type of each recorded convolution.
_CONV_TYPES = ((nn.Conv1d, "conv1d"), (nn.Conv2d, "conv2d"), (nn.ConvTranspose2d, "conv_transpose2d"))

# Modules with parameters that do no multiply-accumulate work a PE array runs (per-channel scaling, lookups): their
# parameters are not a reason to warn. Any other module holding parameters of its own (ConvTranspose1d,
# ConvTranspose3d, Conv3d, LSTM, GRU, RNN, Bilinear, MultiheadAttention's input projection, a custom module that
# calls F.linear or @ on an nn.Parameter) computes something the trace leaves out.
NOT_COMPUTE = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm, nn.Embedding, nn.EmbeddingBag, nn.PReLU,
               *((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ()))


class UnrecordedWarning(UserWarning):
    """A model holds parameters in modules the trace leaves out (``unrecorded_layers``)."""


def unrecorded_layers(model):
    """``(name, type)`` of every module of ``model`` that holds parameters of its own (not its children's) but is not
    recorded (``RECORDED``) nor a normalisation or lookup (``NOT_COMPUTE``): work a map of the trace leaves out."""
    return [(name, type(m).__name__) for name, m in _unwrapped(model).named_modules()
            if not isinstance(m, (*RECORDED, *NOT_COMPUTE)) and any(True for _ in m.parameters(recurse=False))]




def _unwrapped(model):
    """The module a ``DistributedDataParallel``/``DataParallel`` wrapper holds, so layer names match the plain model."""
    wrappers = (nn.parallel.DistributedDataParallel, nn.DataParallel)
    return model.module if isinstance(model, wrappers) else model


def recordable_layers(model):
    """The ``(name, module)`` pairs of the recorded layers of ``model`` (``RECORDED``), in definition order."""
    return [(name, m) for name, m in _unwrapped(model).named_modules() if isinstance(m, RECORDED)]


def call_name(name, call):
    """The layer entry of a module's ``call``-th run in a step (0-based): ``name``, then ``name#1``, ``name#2``..."""
    return f"{name}#{call}" if call else name


def _conv_padding(name, conv):
    """A convolution's zero padding as a symmetric pair; ``"same"``/``"valid"`` resolved, other paddings refused."""
    if conv.padding_mode != "zeros":
        raise RecordError(f"layer {name!r}: padding_mode {conv.padding_mode!r} is not recordable (only zero padding)")
    if conv.padding == "valid":
        return [0, 0]
    if conv.padding == "same":
        totals = [d * (k - 1) for d, k in zip(conv.dilation, conv.kernel_size)]
        if any(t % 2 for t in totals):
            raise RecordError(f"layer {name!r}: padding 'same' with an even kernel pads unevenly; not recordable")
        return [t // 2 for t in totals]
    return list(conv.padding)


# A Linear's or a matmul's fields as a 1x1 convolution.
_ONE_BY_ONE = {"kernel": [1, 1], "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1}


def _hyper_parameters(name, module):
    """Manifest fields that describe the layer itself (SPEC section 6); a Linear layer and a product of two
    activations (``matmul``: its channels are the product's K and N) are 1x1 convolutions. A transposed
    convolution's ``output_padding`` depends on the call (``Recorder._entries``)."""
    kind = next((kind for conv, kind in _CONV_TYPES if isinstance(module, conv)), None)
    if kind:
        return {
            "type": kind,
            "in_channels": module.in_channels,
            "out_channels": module.out_channels,
            "kernel": list(module.kernel_size),
            "stride": list(module.stride),
            "padding": _conv_padding(name, module),
            "dilation": list(module.dilation),
            "groups": module.groups,
        }
    if isinstance(module, MatMul):  # its channels, K and N, come from its operands (``Recorder._entries``)
        return {"type": "matmul", **_ONE_BY_ONE}
    return {"type": "linear", "in_channels": module.in_features, "out_channels": module.out_features, **_ONE_BY_ONE}


def _alias_input(module, inputs):
    """Forward pre-hook: give the layer its own alias of a grad-requiring input (see the module docstring)."""
    if inputs and isinstance(inputs[0], torch.Tensor) and inputs[0].requires_grad:
        return (inputs[0].view_as(inputs[0]), *inputs[1:])
    return None


class Recorder:
    """Writes the tensors of ``model``'s recorded layers on the steps run inside ``with recorder.step(n):``.

    Parameters: ``model`` (``nn.Module``, or a ``DistributedDataParallel`` wrapper of one),
    ``out`` (trace folder), ``samples`` (the first ``samples`` samples of each batch are saved),
    ``input_grad`` (also save input gradients), ``meta`` (extra manifest fields: model (default:
    its class name), data, optimizer settings...; the recorder writes the format, framework
    versions, steps and layers itself), ``strict`` (refuse a model with modules whose parameters are
    not recorded, ``unrecorded_layers``, instead of an ``UnrecordedWarning`` naming them; the manifest
    lists them as ``unrecorded_layers`` either way).

    Each recorded step writes its files atomically and then rewrites ``manifest.json``
    atomically with the step added, so an interrupted run leaves a valid trace of the
    steps it finished (``recording`` writes the whole trace into a temporary sibling instead).
    Linear inputs and gradients with axes between the samples and the features (tokens) keep
    them, flattened to one: [samples, positions, features]; a ``MatMul``'s operands and gradient
    are flattened to [batch, rows, columns].
    Tensors are saved as float32 whatever dtype autocast computed them in; under ``torch.autocast``
    a layer's input and weight are recorded as its product consumes them, rounded to the autocast dtype.
    A step's files are written as its passes run (see the module docstring); a step that fails leaves
    no files behind.
    """

    def __init__(self, model, out, samples, input_grad=False, meta=None, strict=False):
        if not isinstance(samples, int) or samples < 1:
            raise RecordError(f"samples must be a positive integer, not {samples!r}")
        self.out = Path(out)
        self.samples = samples
        self.input_grad = input_grad
        self.modules = recordable_layers(model)
        if not self.modules:
            raise RecordError(f"the model has no layer to record (the recorded types: {RECORDED_NAMES})")
        unrecorded = unrecorded_layers(model)
        if unrecorded and strict:
            raise RecordError(unrecorded_message(unrecorded) + "; refused (strict)")
        if unrecorded:
            warnings.warn(unrecorded_message(unrecorded), UnrecordedWarning, stacklevel=3)
        self.meta = {"model": type(_unwrapped(model)).__name__, **(meta or {}),
                     "unrecorded_layers": [{"name": name, "type": kind} for name, kind in unrecorded]}
        self.hyper = {name: {**_hyper_parameters(name, m), "bias": getattr(m, "bias", None) is not None}
                      for name, m in self.modules}
        self.steps = []
        self.layers = None  # manifest layer entries, fixed by the first recorded step

    def _rows(self, module, tensor):
        """The recorded samples of an activation or gradient, on the host as float32 (a copy: later in-place ops
        must not reach it)."""
        tensor = tensor.detach()[: self.samples]
        if isinstance(module, nn.Linear) and tensor.dim() > 2:
            tensor = tensor.reshape(len(tensor), -1, tensor.shape[-1])
        elif isinstance(module, MatMul):
            tensor = tensor.reshape(-1, *tensor.shape[-2:])
        return tensor.to("cpu", torch.float32, copy=True)

    def _write(self, capture, key, tensor):
        """Write ``tensor`` (host, float32) as the ``key`` file of the layer call ``capture``; keep its shape."""
        capture[key] = list(tensor.shape)
        save_npy(tensor_path(self.out, self._step, capture["name"], key), tensor.numpy())

    def _keep(self, capture, key, module, grad):
        self._write(capture, key, self._rows(module, grad))

    def _on_forward(self, name, calls, module, inputs, output):
        x = inputs[0]
        name = call_name(name, len(calls))
        if len(x) < self.samples:
            raise RecordError(f"layer {name!r}: the batch has {len(x)} samples, fewer than {self.samples} to record")
        capture = {"name": name, "input_needs_grad": x.requires_grad}
        calls.append(capture)
        self._write(capture, "input", self._rows(module, _operand(x)))
        if isinstance(module, MatMul):
            self._write(capture, "weight", self._rows(module, _operand(_second_activation(name, x, inputs[1]))))
        else:
            self._write(capture, "weight", _operand(module.weight.detach()).to("cpu", torch.float32, copy=True))
        if self.input_grad and x.requires_grad:
            x.register_hook(partial(self._keep, capture, "input_grad", module))
        if not output.requires_grad:
            return None
        if output._is_view():
            # A Linear on [n, tokens, features] returns a view; a hook on a view stops firing once an
            # in-place op modifies the view, so the layer hands on a copy (the same values) instead.
            output = output.clone()
        output.register_hook(partial(self._keep, capture, "output_grad", module))
        return output

    @contextlib.contextmanager
    def step(self, step):
        """Record optimizer step ``step``: run its forward and backward pass (or passes) inside this block."""
        if self.steps and step <= self.steps[-1]:
            raise RecordError(f"steps must be recorded in increasing order; step {step} comes after {self.steps[-1]}")
        captures = {name: [] for name, _ in self.modules}
        handles = []
        self._step = step
        try:
            try:
                for name, module in self.modules:
                    if self.input_grad:
                        handles.append(module.register_forward_pre_hook(_alias_input))
                    handles.append(module.register_forward_hook(partial(self._on_forward, name, captures[name])))
                yield
            finally:
                for handle in handles:
                    handle.remove()
            self._save(step, captures)
        except BaseException:
            shutil.rmtree(step_path(self.out, step), ignore_errors=True)
            raise

    def _entries(self, step, captures):
        entries = []
        for name, calls in captures.items():
            if not calls:
                raise RecordError(f"step {step}: layer {name!r} did not run")
            for call, capture in enumerate(calls):
                if "output_grad" not in capture:
                    raise RecordError(f"step {step}: layer {call_name(name, call)!r} got no gradient "
                                      "(its output does not reach the loss)")
                hyper = self.hyper[name]
                if hyper["type"] == "matmul":  # [batch, M, K] @ [batch, K, N]
                    _, k, n = capture["weight"]
                    hyper = {**hyper, "in_channels": k, "out_channels": n}
                if hyper["type"] == "conv_transpose2d":
                    hyper = {**hyper, "output_padding": _output_padding(hyper, capture)}
                entries.append({
                    "name": call_name(name, call),
                    **hyper,
                    "input_shape": capture["input"],
                    "weight_shape": capture["weight"],
                    "output_grad_shape": capture["output_grad"],
                    "has_input_grad": "input_grad" in capture,
                    "input_needs_grad": capture["input_needs_grad"],
                })
        return entries

    def _save(self, step, captures):
        entries = self._entries(step, captures)
        if self.layers is None:
            self.layers = entries
        if len(entries) != len(self.layers):
            raise RecordError(f"step {step}: {len(entries)} layer calls, step {self.steps[0]} had {len(self.layers)}; "
                              "every recorded step must run the same layers the same number of times")
        for entry, first in zip(entries, self.layers):
            if entry != first:
                name = entry["name"]
                raise RecordError(f"step {step}: layer {name!r} changed since step {self.steps[0]}: {entry} vs {first}")
        self.steps.append(step)
        self.write_manifest()

    def write_manifest(self):
        """(Re)write ``manifest.json`` with the steps finished so far; nothing before the first recorded step."""
        if self.layers is None:
            return
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            **self.meta,
            "dtype": "float32",
            "layout": LAYOUT,
            "framework": {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version()},
            "samples": self.samples,
            "steps": self.steps,
            "layers": self.layers,
        }
        save_json(self.out / MANIFEST, manifest)


LAYOUT = ("NCHW for conv2d and conv_transpose2d, NCL for conv1d; [samples, features] or [samples, positions, "
          "features] for linear; [batch, M, K], [batch, K, N] and "
          "[batch, M, N] for matmul's input, weight (its second activation) and output gradient; weights as PyTorch")


def _output_padding(hyper, capture):
    """A transposed convolution's output padding in one call: the rows and columns its output has beyond what its
    other hyper-parameters give (the module's ``output_padding``, or what ``forward(x, output_size=...)`` chose)."""
    sizes = zip(capture["input"][2:], capture["output_grad"][2:], hyper["kernel"], hyper["stride"],
                hyper["padding"], hyper["dilation"])
    return [out - conv_transpose_size(size, k, s, p, d, 0) for size, out, k, s, p, d in sizes]


def _operand(tensor):
    """``tensor`` as a product under ``torch.autocast`` consumes it: rounded to the autocast dtype where autocast is on
    for its device (conv, linear and matmul are all products autocast runs in its lower precision)."""
    if tensor.is_floating_point() and torch.is_autocast_enabled(tensor.device.type):
        return tensor.to(torch.get_autocast_dtype(tensor.device.type))
    return tensor


def _second_activation(name, a, b):
    """A ``MatMul``'s second operand, after checking the product is batched and needs no broadcasting."""
    if a.dim() < 3 or a.shape[:-2] != b.shape[:-2]:
        raise RecordError(f"layer {name!r}: a recorded matmul takes [batch, ..., M, K] @ [batch, ..., K, N] with the "
                          f"same batch axes, not {list(a.shape)} @ {list(b.shape)} (expand the operands first)")
    return b


@contextlib.contextmanager
def recording(model, out, samples, input_grad=False, meta=None, overwrite=False, strict=False):
    """A ``Recorder`` for a training loop of one's own, writing the whole trace at once.

    Modules with parameters that are not recorded are named in an ``UnrecordedWarning`` (a ``RecordError`` with
    ``strict``).

    The trace is written into a temporary sibling of ``out`` that replaces it when the block
    ends without an exception (so a failed run leaves ``out`` as it was); ``overwrite`` lets it
    replace an earlier trace (and nothing else). At least one step must have been recorded.
    """
    folder = OutputFolder(out, "trace folder", is_trace if overwrite else None, "overwrite=True replaces a trace")
    with folder, folder.staging() as staging:
        recorder = Recorder(model, staging, samples, input_grad=input_grad, meta=meta, strict=strict)
        yield recorder
        if not recorder.steps:
            raise RecordError(f"trace folder {out}: no step was recorded (run passes inside recorder.step(n))")
        recorder.write_manifest()
