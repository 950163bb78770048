"""Records the input, weight and output gradient (input gradient optionally) of every Conv2d and Linear layer.

Output gradients are captured by tensor hooks that forward hooks register on each layer's
output. Unlike module backward hooks this works when an in-place op (``ReLU(inplace=True)``,
``out += shortcut``) later modifies the output: a tensor hook registered before the in-place
op receives the gradient of the value the layer produced. Input gradients are captured on an
alias of the input (``view_as``) made by a forward pre-hook, so a tensor that feeds several
layers (a ResNet block input feeds ``conv1`` and the shortcut) yields each layer's own
contribution rather than their sum. Hooks exist only during recorded steps and only copy
tensors (or pass on a copy of a layer's output), so training is unchanged.
"""

import contextlib
import platform
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch import nn

from dashraker.trace.errors import RecordError
from dashraker.trace.store import FORMAT, FORMAT_VERSION, MANIFEST, save_json, save_npy, tensor_path

__all__ = ["Recorder", "recordable_layers"]


def recordable_layers(model):
    """The ``(name, module)`` pairs of the Conv2d and Linear layers of ``model``, in definition order."""
    return [(name, m) for name, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))]


def _conv_padding(name, conv):
    """A Conv2d's zero padding as a symmetric pair; ``"same"``/``"valid"`` resolved, other paddings refused."""
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


def _hyper_parameters(name, module):
    """Manifest fields that describe the layer itself (SPEC section 6); a Linear layer is a 1x1 convolution."""
    if isinstance(module, nn.Conv2d):
        return {
            "type": "conv2d",
            "in_channels": module.in_channels,
            "out_channels": module.out_channels,
            "kernel": list(module.kernel_size),
            "stride": list(module.stride),
            "padding": _conv_padding(name, module),
            "dilation": list(module.dilation),
            "groups": module.groups,
        }
    return {
        "type": "linear",
        "in_channels": module.in_features,
        "out_channels": module.out_features,
        "kernel": [1, 1],
        "stride": [1, 1],
        "padding": [0, 0],
        "dilation": [1, 1],
        "groups": 1,
    }


def _alias_input(module, inputs):
    """Forward pre-hook: give the layer its own alias of a grad-requiring input (see the module docstring)."""
    if inputs and isinstance(inputs[0], torch.Tensor) and inputs[0].requires_grad:
        return (inputs[0].view_as(inputs[0]), *inputs[1:])
    return None


class Recorder:
    """Writes the tensors of ``model``'s Conv2d and Linear layers on the steps run inside ``with recorder.step(n):``.

    Parameters: ``model`` (``nn.Module``), ``out`` (trace folder), ``samples`` (the first
    ``samples`` samples of each batch are saved), ``input_grad`` (also save input gradients),
    ``meta`` (extra manifest fields: model, data, optimizer settings...; the recorder writes
    the format, framework versions, steps and layers itself).

    Each recorded step writes its files atomically and then rewrites ``manifest.json``
    atomically with the step added, so an interrupted run leaves a valid trace of the
    steps it finished. Linear inputs and gradients with extra leading axes (tokens) are
    flattened to [rows, features].
    """

    def __init__(self, model, out, samples, input_grad=False, meta=None):
        if not isinstance(samples, int) or samples < 1:
            raise RecordError(f"samples must be a positive integer, not {samples!r}")
        self.out = Path(out)
        self.samples = samples
        self.input_grad = input_grad
        self.meta = dict(meta or {})
        self.modules = recordable_layers(model)
        if not self.modules:
            raise RecordError("the model has no Conv2d or Linear layer to record")
        self.hyper = {name: {**_hyper_parameters(name, m), "bias": m.bias is not None} for name, m in self.modules}
        self.steps = []
        self.layers = None  # manifest layer entries, fixed by the first recorded step

    def _rows(self, module, tensor):
        """The recorded samples of an activation or gradient, copied (later in-place ops must not reach it)."""
        tensor = tensor.detach()[: self.samples]
        if isinstance(module, nn.Linear):
            tensor = tensor.reshape(-1, tensor.shape[-1])
        return tensor.to(torch.float32, copy=True)

    def _keep(self, capture, key, module, grad):
        capture[key] = self._rows(module, grad)

    def _on_forward(self, name, capture, module, inputs, output):
        if capture:
            raise RecordError(f"layer {name!r} ran twice in one step; a module used more than once is not recordable")
        x = inputs[0]
        if len(x) < self.samples:
            raise RecordError(f"layer {name!r}: the batch has {len(x)} samples, fewer than {self.samples} to record")
        capture["input"] = self._rows(module, x)
        capture["weight"] = module.weight.detach().to(torch.float32, copy=True)
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
        """Record optimizer step ``step``: run its forward and backward pass inside this block."""
        if self.steps and step <= self.steps[-1]:
            raise RecordError(f"steps must be recorded in increasing order; step {step} comes after {self.steps[-1]}")
        captures = {name: {} for name, _ in self.modules}
        handles = []
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

    def _entries(self, step, captures):
        entries = []
        for name, capture in captures.items():
            for key in ("input", "output_grad"):
                if key not in capture:
                    what = "did not run" if key == "input" else "got no gradient (its output does not reach the loss)"
                    raise RecordError(f"step {step}: layer {name!r} {what}")
            entries.append({
                "name": name,
                **self.hyper[name],
                "input_shape": list(capture["input"].shape),
                "weight_shape": list(capture["weight"].shape),
                "output_grad_shape": list(capture["output_grad"].shape),
                "has_input_grad": "input_grad" in capture,
            })
        return entries

    def _save(self, step, captures):
        entries = self._entries(step, captures)
        if self.layers is None:
            self.layers = entries
        for entry, first in zip(entries, self.layers):
            if entry != first:
                name = entry["name"]
                raise RecordError(f"step {step}: layer {name!r} changed since step {self.steps[0]}: {entry} vs {first}")
        for name, capture in captures.items():
            for tensor, value in capture.items():
                save_npy(tensor_path(self.out, step, name, tensor), value.numpy())
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
            "layout": "NCHW for conv2d; [rows, features] for linear; weights as PyTorch",
            "framework": {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version()},
            "samples": self.samples,
            "steps": self.steps,
            "layers": self.layers,
        }
        save_json(self.out / MANIFEST, manifest)
