"""Training data that needs no download: scikit-learn's digits, Python's own source text, and the user's local files.

A data set is named ``name`` or ``name:path``:

- ``digits``: scikit-learn's bundled 8x8 handwritten digits (1797 images), scaled up to
  32x32 (``image_size``) and repeated over 3 channels, so that CIFAR-style networks take them as they are.
- ``pystdlib``: a character-level language model over the standard library's ``.py`` files
  (bytes as tokens, 256 of them); samples are ``seq_len``-byte windows, targets the next bytes.
- ``pystdlib-mlm``: the same windows for masked language modelling (BERT's objective): 15% of the
  positions, drawn once with a fixed seed, replaced by token 256 (the mask), the targets the
  original bytes there and ignored (-100) elsewhere.
- ``imagefolder:FOLDER``: the ImageNet / torchvision ImageFolder layout, a folder per class (in
  name order) of JPEG and PNG images (``images.ImageFolder``), each resized to ``image_size``
  (default 224) and read when a batch needs it.
- ``cifar10:FOLDER``: the CIFAR-10 "python version" batches (``data_batch_1`` ... ``data_batch_5``).
- ``npy:FOLDER``: ``x.npy`` and ``y.npy``, or ``.npz`` files each holding arrays ``x`` and ``y``
  (taken in name order); ``x`` is [N, C, H, W], [N, H, W] (one channel) or [N, features],
  ``y`` integer class labels [N].
- ``PACKAGE.MODULE:FACTORY``: the user's own map-style data set (``factory.build_dataset``),
  used as it is (no scaling); integer samples are token sequences. Of a set larger than the
  training run can use, only that many items are read (drawn with the seed).

Images are scaled to [0, 1] (uint8 by 255) and standardized per channel over the data set (an image
folder over a sample of it).
The bundled sets are built once per process (cached; their tensors are never modified).
"""

import functools
import math
import pickle
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from dashraker.trace import factory
from dashraker.trace.errors import RecordError
from dashraker.trace.images import IMAGE_SIZE, ImageFolder

__all__ = ["Dataset", "DATASETS", "load_data"]

DIGITS_SIZE = 32
STDLIB_BYTES = 1 << 19
MASK_RATE = 0.15  # BERT's share of masked positions


@dataclass
class Dataset:
    """Samples ``x`` (a tensor, or ``images.ImageFolder`` read on indexing), targets ``y``; ``kind``: "tensors" (float
    samples, class labels), "tokens" (next-token LM) or "masked" (masked LM: targets -100 where not masked)."""

    name: str
    x: torch.Tensor
    y: torch.Tensor
    num_classes: int
    kind: str
    items: list = None  # each sample's item index in a factory's data set, where it was drawn from a larger one

    def __len__(self):
        return len(self.x)

    def item(self, sample):
        """How a message names ``sample``: its item index where the set was drawn from a factory's."""
        return f"item [{self.items[sample] if self.items is not None else sample}]"

    @property
    def sample_shape(self):
        return tuple(self.x.shape[1:])


def _standardize(x):
    """Zero mean, unit variance per channel (axis 1) over the whole set."""
    axes = [0, *range(2, x.dim())]
    return (x - x.mean(axes, keepdim=True)) / x.std(axes, keepdim=True).clamp_min(1e-6)


def _classes(name, x, y, num_classes=None):
    """A classification ``Dataset`` from arrays, after checking they fit together.

    ``num_classes``: the data set's class count where it is known (labels must be below it);
    otherwise the largest label + 1, refused when most of those classes have no sample (a
    stray label would silently train a wider classifier).
    """
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim == 3:
        x = x[:, None]
    if x.ndim not in (2, 4) or len(x) == 0:
        raise RecordError(f"{name}: x must be [N, C, H, W], [N, H, W] or [N, features] with N > 0, not {list(x.shape)}")
    if not np.issubdtype(x.dtype, np.number):
        raise RecordError(f"{name}: x must be numeric, not {x.dtype}")
    if y.shape != (len(x),) or not np.issubdtype(y.dtype, np.integer) or y.min() < 0:
        raise RecordError(
            f"{name}: y must hold one non-negative integer label per sample ({len(x)}), got {y.dtype} {list(y.shape)}"
        )
    top = int(y.max())
    if num_classes is not None and top >= num_classes:
        raise RecordError(f"{name}: label {top} at sample {int(y.argmax())} is out of range 0..{num_classes - 1}")
    present = len(np.unique(y))
    if num_classes is None and present * 2 < top + 1:
        raise RecordError(f"{name}: label {top} at sample {int(y.argmax())} is out of range: only {present} of "
                          f"the {top + 1} classes 0..{top} have a sample")
    scale = 255.0 if x.dtype == np.uint8 else 1.0
    features = torch.from_numpy(x.astype(np.float32) / scale)
    if not torch.isfinite(features).all():
        raise RecordError(f"{name}: x holds NaN or Inf")
    return Dataset(name, _standardize(features), torch.from_numpy(y.astype(np.int64)), num_classes or top + 1, "tensors")


@functools.cache
def digits(size=DIGITS_SIZE):
    """scikit-learn's 8x8 digits, bilinearly resized to ``size`` x ``size`` and repeated over 3 channels; at any other
    size than ``DIGITS_SIZE`` resized a batch at a time (``ResizedDigits``)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = torch.from_numpy(bunch.images.astype(np.float32) / 16.0)[:, None]
    if size != DIGITS_SIZE:
        labels = torch.from_numpy(bunch.target.astype(np.int64))
        return Dataset("digits", ResizedDigits(images, size), labels, int(labels.max()) + 1, "tensors")
    images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    return _classes("digits", images.repeat(1, 3, 1, 1).numpy(), bunch.target)


class ResizedDigits:
    """One-channel images [N, 1, h, w] resized (bilinear) to ``size`` x ``size`` and repeated over 3 channels when
    indexed, standardized by the mean and deviation of the whole resized set (summed a chunk at a time): the digits
    at 224x224 would hold 1 GiB, and several times that while being standardized whole."""

    CHUNK = 128

    def __init__(self, images, size):
        self.images, self.size = images, size
        count, total, squares = 0, 0.0, 0.0
        for start in range(0, len(images), self.CHUNK):
            chunk = self._resize(images[start : start + self.CHUNK]).double()
            count += chunk.numel()
            total += chunk.sum().item()
            squares += chunk.square().sum().item()
        self.mean = total / count
        self.std = max(math.sqrt((squares - count * self.mean**2) / (count - 1)), 1e-6)

    def _resize(self, images):
        return F.interpolate(images, size=(self.size, self.size), mode="bilinear", align_corners=False)

    def __len__(self):
        return len(self.images)

    @property
    def shape(self):
        return (len(self.images), 3, self.size, self.size)

    def __getitem__(self, index):
        return ((self._resize(self.images[index]) - self.mean) / self.std).float().repeat(1, 3, 1, 1)


@functools.cache
def stdlib_text(seq_len, max_bytes=STDLIB_BYTES):
    """Byte-level next-token data from the standard library's top-level ``.py`` files, in name order."""
    folder = Path(sysconfig.get_paths()["stdlib"])
    chunks, total = [], 0
    for file in sorted(folder.glob("*.py")):
        chunks.append(file.read_bytes())
        total += len(chunks[-1])
        if total >= max_bytes:
            break
    text = np.frombuffer(b"".join(chunks)[:max_bytes], dtype=np.uint8)
    count = (len(text) - 1) // seq_len
    if count < 1:
        raise RecordError(f"pystdlib: only {len(text)} bytes of source found in {folder}")
    tokens = torch.from_numpy(text.astype(np.int64))
    x = tokens[: count * seq_len].view(count, seq_len)
    y = tokens[1 : count * seq_len + 1].view(count, seq_len)
    return Dataset("pystdlib", x, y, 256, "tokens")


@functools.cache
def masked_text(seq_len):
    """``stdlib_text``'s windows with ``MASK_RATE`` of the positions masked (token 256), targets there only."""
    text = stdlib_text(seq_len)
    masked = torch.rand(text.x.shape, generator=torch.Generator().manual_seed(0)) < MASK_RATE
    x = text.x.masked_fill(masked, 256)
    y = text.x.masked_fill(~masked, -100)
    return Dataset("pystdlib-mlm", x, y, 257, "masked")


def _unpickle(file):
    try:
        with open(file, "rb") as f:
            return pickle.load(f, encoding="bytes")
    except (OSError, pickle.UnpicklingError, EOFError, ValueError) as error:
        raise RecordError(f"{file}: not a readable CIFAR-10 batch ({error})") from None


def cifar10(folder):
    """The CIFAR-10 python-format training batches found in ``folder`` (``data_batch_*``)."""
    folder = Path(folder)
    files = sorted(folder.glob("data_batch_*"))
    if not files:
        raise RecordError(f"{folder}: no data_batch_* files (expected CIFAR-10's python version, cifar-10-batches-py)")
    xs, ys = [], []
    for file in files:
        batch = _unpickle(file)
        if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
            raise RecordError(f"{file}: a CIFAR-10 batch is a dict with keys b'data' and b'labels'")
        data = np.asarray(batch[b"data"])
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            raise RecordError(f"{file}: b'data' must be uint8 [N, 3072], not {data.dtype} {list(data.shape)}")
        xs.append(data.reshape(-1, 3, 32, 32))
        ys.append(np.asarray(batch[b"labels"], dtype=np.int64))
    return _classes(f"cifar10:{folder}", np.concatenate(xs), np.concatenate(ys), num_classes=10)


def _load_arrays(file, keys):
    try:
        with np.load(file, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError) as error:
        raise RecordError(f"{file}: not a readable .npz file ({error})") from None
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise RecordError(f"{file}: missing array(s) {missing}; found {sorted(arrays)}")
    return [arrays[k] for k in keys]


def _load_npy(file):
    try:
        return np.load(file, allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        raise RecordError(f"{file}: not a readable .npy file ({error})") from None


def npy_folder(folder):
    """``x.npy`` + ``y.npy``, or every ``.npz`` (arrays ``x`` and ``y``) in ``folder``, concatenated in name order."""
    folder = Path(folder)
    archives = sorted(folder.glob("*.npz"))
    pair = folder / "x.npy", folder / "y.npy"
    if archives and any(p.exists() for p in pair):
        raise RecordError(f"{folder}: holds both .npz files and x.npy/y.npy; keep one layout")
    if archives:
        parts = [_load_arrays(file, ("x", "y")) for file in archives]
        shapes = {part[0].shape[1:] for part in parts}
        if len(shapes) > 1:
            raise RecordError(f"{folder}: the .npz files hold samples of different shapes {sorted(shapes)}")
        x, y = (np.concatenate(arrays) for arrays in zip(*parts))
    elif all(p.exists() for p in pair):
        x, y = (_load_npy(p) for p in pair)
    else:
        raise RecordError(f"{folder}: expected x.npy and y.npy, or .npz files with arrays x and y")
    return _classes(f"npy:{folder}", x, y)


def image_folder(folder, image_size=IMAGE_SIZE, needed=None, seed=0):
    """The image folder ``folder`` (``images.ImageFolder``) as a data set, images read as batches need them."""
    images = ImageFolder(folder, image_size, needed, seed)
    return Dataset(f"imagefolder:{folder}", images, images.labels, len(images.classes), "tensors")


# Data set name -> loader; those taking a folder are written ``name:FOLDER``.
DATASETS = {"digits": digits, "pystdlib": stdlib_text, "pystdlib-mlm": masked_text, "cifar10": cifar10,
            "npy": npy_folder, "imagefolder": image_folder}
_NEEDS_PATH = {"cifar10", "npy", "imagefolder"}
_SEQUENCES = {"pystdlib", "pystdlib-mlm"}
_RESIZED = {"digits", "imagefolder"}  # the data sets that take an image size


def load_data(spec, seq_len=64, data_args=None, needed=None, seed=0, image_size=None):
    """Load the data set named ``spec`` (``name``, ``name:path`` or a factory called with ``data_args``, see the
    module docstring); of a factory's set or an image folder, at most ``needed`` items drawn with ``seed``
    (``factory.build_dataset``); ``image_size``: the side digits and an image folder's images are resized to."""
    name, _, path = str(spec).partition(":")
    if image_size is not None and (isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 1):
        raise RecordError(f"image size must be a positive integer, not {image_size!r}")
    if image_size is not None and name not in _RESIZED:
        raise RecordError(f"data set {spec!r} takes no image size; only {' and '.join(sorted(_RESIZED))} do")
    if name not in DATASETS and factory.is_factory(spec):
        x, y, items = factory.build_dataset(spec, data_args or {}, needed, seed)
        kind = "tensors" if x.is_floating_point() else "tokens"
        return Dataset(str(spec), x.float() if kind == "tensors" else x.long(), y.long(), int(y.max()) + 1, kind,
                       items)
    if data_args:
        raise RecordError(f"data set {spec!r} takes no arguments; only a factory does")
    if name not in DATASETS:
        raise RecordError(f"unknown data set {name!r}; choose one of {sorted(DATASETS)} "
                          f"({', '.join(sorted(_NEEDS_PATH))} take :FOLDER)")
    if (name in _NEEDS_PATH) != bool(path):
        usage = f"{name}:FOLDER" if name in _NEEDS_PATH else name
        raise RecordError(f"data set {spec!r}: write it as {usage!r}")
    if name in _SEQUENCES:
        return DATASETS[name](seq_len)
    size = {} if image_size is None else {"image_size" if path else "size": image_size}
    if not path:
        return DATASETS[name](**size)
    if not Path(path).is_dir():
        raise RecordError(f"data set {spec!r}: {path} is not a folder")
    if name == "imagefolder":
        return image_folder(path, needed=needed, seed=seed, **size)
    return DATASETS[name](path)
