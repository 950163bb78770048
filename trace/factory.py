"""The user's own network and data for ``trace record``: ``PACKAGE.MODULE:FACTORY`` specs and ``K=V`` arguments.

A factory is any callable reached by importing ``PACKAGE.MODULE`` (the current folder is
searched first, as ``python -m`` would) and following the dotted ``FACTORY`` attribute path.
Every failure (module not importable, no such attribute, the factory raising or returning the
wrong kind of object) is a one-line ``RecordError`` naming the spec.
"""

import ast
import importlib
import os
import sys

import numpy as np
import torch

from dashraker.trace.errors import RecordError

__all__ = ["is_factory", "parse_args", "build_model", "build_dataset"]


def is_factory(spec):
    """Whether ``spec`` names a factory (``MODULE:ATTRIBUTE`` with a dotted module path or an identifier before ':')."""
    module, colon, attribute = str(spec).partition(":")
    return bool(colon) and all(part.isidentifier() for part in (*module.split("."), *attribute.split(".")))


def parse_args(pairs, flag):
    """``["k=v", ...]`` as keyword arguments, each value a Python literal where it parses as one, else the string."""
    kwargs = {}
    for pair in pairs or ():
        key, equals, text = pair.partition("=")
        if not equals or not key.isidentifier():
            raise RecordError(f"{flag} takes KEY=VALUE with KEY a Python name, not {pair!r}")
        try:
            kwargs[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            kwargs[key] = text
    return kwargs


def _call(spec, what, kwargs):
    """Import the factory ``spec`` and call it with ``kwargs``."""
    module_name, _, attribute = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(module_name)
    except Exception as error:  # an import runs the user's code: any error is the user's
        raise RecordError(f"{what} {spec!r}: cannot import {module_name!r} ({type(error).__name__}: {error})") from None
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise RecordError(f"{what} {spec!r}: {type(obj).__name__} {getattr(obj, '__name__', obj)!r} has no "
                              f"attribute {part!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise RecordError(f"{what} {spec!r}: {attribute!r} is a {type(obj).__name__}, not a callable")
    try:
        return obj(**kwargs)
    except Exception as error:
        raise RecordError(f"{what} {spec!r} raised {type(error).__name__}: {error}") from None


def build_model(spec, kwargs):
    """The ``nn.Module`` that the factory ``spec`` returns for ``kwargs``."""
    model = _call(spec, "model factory", kwargs)
    if not isinstance(model, torch.nn.Module):
        raise RecordError(f"model factory {spec!r} returned a {type(model).__name__}, not a torch.nn.Module")
    return model


def _memory_available():
    """Bytes of memory available to a new allocation (Linux ``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _pair(item, index, where):
    """``item`` (the data set's ``[index]``) as a pair of tensors (sample, target), or a ``RecordError`` naming it."""
    if not (isinstance(item, (tuple, list)) and len(item) == 2):
        what = f"a {len(item)}-item {type(item).__name__}" if isinstance(item, (tuple, list)) else f"a {type(item).__name__}"
        raise RecordError(f"{where}: item [{index}] is {what}, not a pair (sample, target): return (sample, label)")
    try:
        return tuple(torch.as_tensor(part) for part in item)
    except Exception as error:
        raise RecordError(f"{where}: item [{index}] must be a pair (sample, target) of tensors, arrays or numbers "
                          f"({type(error).__name__}: {error})") from None


def build_dataset(spec, kwargs, needed=None, seed=0):
    """``(x, y, items)``: tensors of the samples of the map-style data set that the factory ``spec`` returns, and
    each one's item index.

    The data set has ``len()`` and item ``i`` is a pair (sample, target) of tensors, arrays or
    numbers, all samples of one shape and all targets of one shape: class labels (0 or more), or token
    ids for a sequence model; a sample of integers is a token sequence.

    Only what training can use is read: a data set of more than ``needed`` items (the samples of
    the steps to run) gives ``needed`` of them, distinct and drawn uniformly with ``seed``, read in
    index order; a smaller one is read whole. Before reading, the size of that read is estimated
    from the first item and refused past half the memory available. Each item is copied into ``x``
    and ``y`` as it is read, so the data set is held once.
    """
    dataset = _call(spec, "data factory", kwargs)
    where = f"data factory {spec!r}"
    if not (hasattr(type(dataset), "__len__") and hasattr(type(dataset), "__getitem__")):
        raise RecordError(f"{where}: the data set must support len() and [i]; a {type(dataset).__name__} does not")
    index, done = None, 0
    try:
        count = len(dataset)
        if not count:
            raise RecordError(f"{where}: the data set is empty")
        index = range(count)
        reads = count if needed is None else min(count, needed)
        first = _pair(dataset[0], 0, where)
        item = sum(part.numel() * part.element_size() for part in first)
        available = _memory_available()
        if available is not None and reads * item > available // 2:
            raise RecordError(f"{where}: reading {reads:,} items of {item:,} bytes needs {reads * item / 2**30:.1f} "
                              f"GiB, more than half of the {available / 2**30:.1f} GiB available; record fewer steps, "
                              "a smaller batch, or return smaller samples")
        if reads < count:
            index = np.sort(np.random.default_rng(seed).choice(count, reads, replace=False)).tolist()
        x, y = (torch.empty((reads, *part.shape), dtype=part.dtype) for part in first)
        for done, i in enumerate(index):
            pair = first if i == 0 else _pair(dataset[i], i, where)
            for whole, part, what in ((x, pair[0], "sample"), (y, pair[1], "target")):
                if part.shape != whole.shape[1:]:
                    raise RecordError(f"{where}: item [{i}]'s {what} has shape {list(part.shape)}, item "
                                      f"[0]'s {list(whole.shape[1:])}: every {what} must have one shape")
                whole[done] = part
    except RecordError:
        raise
    except Exception as error:  # the user's len() or [i] raised: say which
        what = "len()" if index is None else f"item [{index[done]}]"
        raise RecordError(f"{where}: {what} raised {type(error).__name__}: {error}") from None
    if y.is_floating_point() or y.is_complex():
        raise RecordError(f"{where}: targets must be integer class labels or token ids, not {y.dtype}")
    if len(y) and y.min() < 0:
        at = int((y.reshape(len(y), -1) < 0).any(1).nonzero()[0])
        raise RecordError(f"{where}: item [{index[at]}]'s target holds {int(y[at].min())}: class labels and token ids "
                          "are 0 or more")
    return x, y, list(index)
