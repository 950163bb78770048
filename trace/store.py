"""Where a trace keeps its files, which folders are traces, and atomic writes of ``.npy``/JSON files."""

import json
import re
from pathlib import Path

import numpy as np

from dashraker.outputs import atomic_write

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "TENSORS",
    "step_path",
    "tensor_path",
    "atomic_write",
    "is_trace",
    "save_npy",
    "save_json",
    "unrecorded_message",
    "RECORDED_NAMES",
]

FORMAT = "dashraker-trace"
# Version 2 added the layer types conv1d and matmul, the entries name#k of a module's repeated calls, Linear
# tensors of sequence models as [samples, positions, features] (version 1 flattened them to [rows, features]) and
# each layer's input_needs_grad (version 1 implied it: every layer but the first);
# readers take every version up to FORMAT_VERSION (a version 1 trace is a valid version 2 trace).
# A layer type added since (conv_transpose2d) needs no new version: a reader that does not know a type reads the
# rest of the trace and says which layers it leaves out (``reader.UnsupportedLayer``).
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
# The module types a recording records (``recorder.RECORDED``), as messages name them.
RECORDED_NAMES = "Conv1d, Conv2d, ConvTranspose2d, Linear and MatMul"
# Tensors saved per layer and step; ``input_grad`` only when recorded.
TENSORS = ("input", "weight", "output_grad", "input_grad")


def step_path(root, step):
    """``<root>/step_<step, 6 digits>``: the folder of a recorded step's tensors."""
    return Path(root) / f"step_{step:06d}"


def tensor_path(root, step, layer, tensor):
    """``<root>/step_<step, 6 digits>/<layer>/<tensor>.npy``."""
    return step_path(root, step) / layer / f"{tensor}.npy"


def is_trace(path):
    """Whether the folder ``path`` is recognisably a trace of this project: its manifest's format marker and
    nothing but the manifest and step folders (what ``--force`` may replace)."""
    path = Path(path)
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    names = [entry.name for entry in path.iterdir()]
    return (isinstance(manifest, dict) and manifest.get("format") == FORMAT
            and all(name == MANIFEST or re.fullmatch(r"step_\d{6}", name) for name in names))


def save_npy(path, array):
    """Save ``array`` as a C-ordered little-endian float32 ``.npy`` file, atomically."""
    array = np.ascontiguousarray(array, dtype="<f4")
    atomic_write(path, lambda file: np.save(file, array, allow_pickle=False))


def save_json(path, obj):
    """Save ``obj`` as indented JSON, atomically."""
    text = json.dumps(obj, indent=1, allow_nan=False) + "\n"  # bare NaN is not JSON
    atomic_write(path, lambda file: file.write(text.encode()))


def unrecorded_message(layers):
    """One line naming the ``(name, type)`` modules whose parameters a recording left out (``recorder.unrecorded_layers``,
    a manifest's ``unrecorded_layers``)."""
    names = ", ".join(f"{name or '(the model)'} ({kind})" for name, kind in layers)
    return (f"{len(layers)} module(s) with parameters are not recorded (only {RECORDED_NAMES} are), "
            f"so a map of the trace leaves their work out: {names}")
