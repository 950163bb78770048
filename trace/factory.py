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


def _item_bytes(pair):
    return sum(torch.as_tensor(part).numel() * torch.as_tensor(part).element_size() for part in pair)


def build_dataset(spec, kwargs, needed=None, seed=0):
    """``(x, y)`` tensors of the samples of the map-style data set that the factory ``spec`` returns.

    The data set has ``len()`` and item ``i`` is a pair (sample, target) of tensors, arrays or
    numbers, all samples of one shape and all targets of one shape: class labels, or token ids
    for a sequence model; a sample of integers is a token sequence.

    Only what training can use is read: a data set of more than ``needed`` items (the samples of
    the steps to run) gives ``needed`` of them, distinct and drawn uniformly with ``seed``, read in
    index order; a smaller one is read whole. Before reading, the size of that read is estimated
    from the first item and refused past half the memory available.
    """
    dataset = _call(spec, "data factory", kwargs)
    where = f"data factory {spec!r}"
    if not (hasattr(type(dataset), "__len__") and hasattr(type(dataset), "__getitem__")):
        raise RecordError(f"{where}: the data set must support len() and [i]; a {type(dataset).__name__} does not")
    index = pairs = None
    try:
        count = len(dataset)
        if not count:
            raise RecordError(f"{where}: the data set is empty")
        index, pairs = range(count), []
        reads = count if needed is None else min(count, needed)
        first = dataset[0]
        try:
            item = _item_bytes(first)
        except Exception:
            item = 0  # not a pair of tensors: said below
        available = _memory_available()
        if available is not None and reads * item > available // 2:
            raise RecordError(f"{where}: reading {reads:,} items of {item:,} bytes needs {reads * item / 2**30:.1f} "
                              f"GiB, more than half of the {available / 2**30:.1f} GiB available; record fewer steps, "
                              "a smaller batch, or return smaller samples")
        if reads < count:
            index = np.sort(np.random.default_rng(seed).choice(count, reads, replace=False)).tolist()
        for i in index:
            pairs.append(first if i == 0 else dataset[i])
    except RecordError:
        raise
    except Exception as error:  # the user's len() or [i] raised: say which
        what = "len()" if index is None else f"item [{index[len(pairs)] if pairs else 0}]"
        raise RecordError(f"{where}: {what} raised {type(error).__name__}: {error}") from None
    try:
        x, y = (torch.stack([torch.as_tensor(pair[i]) for pair in pairs]) for i in (0, 1))
    except Exception as error:
        raise RecordError(f"{where}: item i must be a pair (sample, target) of tensors of one shape each "
                          f"({type(error).__name__}: {error})") from None
    if y.is_floating_point() or y.is_complex():
        raise RecordError(f"{where}: targets must be integer class labels or token ids, not {y.dtype}")
    return x, y
