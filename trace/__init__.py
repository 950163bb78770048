"""Training traces (SPEC section 6): record them from real PyTorch training, check, read and export them.

``open_trace`` and the reader need only NumPy; ``record`` (and ``Recorder``, ``recording``) import PyTorch
when first used, so that ``import dashraker.trace`` stays light for the command line.
"""

import importlib

from dashraker.trace.errors import RecordError, TraceError
from dashraker.trace.reader import LayerInfo, LayerTensors, Trace, open_trace

__all__ = ["open_trace", "Trace", "LayerInfo", "LayerTensors", "TraceError", "RecordError", "record", "Recorder",
           "recording"]

_LAZY = {"record": "dashraker.trace.training", "Recorder": "dashraker.trace.recorder",
         "recording": "dashraker.trace.recorder"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
