"""The two errors of the trace package: a broken trace on disk, and a recording request that cannot be met."""

__all__ = ["TraceError", "RecordError"]


class TraceError(Exception):
    """A trace folder is broken; the message names the file and, where it applies, the layer, step and field."""


class RecordError(ValueError):
    """A recording request names an unknown model or data set, unusable data, or impossible steps/samples."""
