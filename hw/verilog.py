"""Verilog conversion of generated components, written atomically."""

import os
import tempfile
from pathlib import Path

__all__ = ["to_verilog", "write_verilog"]


def to_verilog(component, name):
    """Verilog text of ``component`` with top module ``name`` (ports from its signature)."""
    from amaranth.back import verilog

    return verilog.convert(component, name=name, emit_src=False)


def write_verilog(component, path, name):
    """Write ``component`` as Verilog to ``path`` atomically; returns the path."""
    path = Path(path)
    text = to_verilog(component, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
        tmp.write(text)
    os.replace(tmp.name, path)
    return path
