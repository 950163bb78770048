"""Where a trace keeps its files, and atomic writes of ``.npy``/JSON files (temporary file, then ``os.replace``)."""

import contextlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "TENSORS",
    "tensor_path",
    "atomic_write",
    "save_npy",
    "save_json",
]

FORMAT = "dashraker-trace"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
# Tensors saved per layer and step; ``input_grad`` only when recorded.
TENSORS = ("input", "weight", "output_grad", "input_grad")


def tensor_path(root, step, layer, tensor):
    """``<root>/step_<step, 6 digits>/<layer>/<tensor>.npy``."""
    return Path(root) / f"step_{step:06d}" / layer / f"{tensor}.npy"


def atomic_write(path, write):
    """Create ``path`` through ``write(binary_file)``: a reader sees the old file or the whole new one, never part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def save_npy(path, array):
    """Save ``array`` as a C-ordered little-endian float32 ``.npy`` file, atomically."""
    array = np.ascontiguousarray(array, dtype="<f4")
    atomic_write(path, lambda file: np.save(file, array, allow_pickle=False))


def save_json(path, obj):
    """Save ``obj`` as indented JSON, atomically."""
    text = json.dumps(obj, indent=1) + "\n"
    atomic_write(path, lambda file: file.write(text.encode()))
