"""Verilog conversion of generated components, written atomically."""

from dashraker.outputs import atomic_write

__all__ = ["to_verilog", "write_verilog"]


def to_verilog(component, name):
    """Verilog text of ``component`` with top module ``name`` (ports from its signature)."""
    from amaranth.back import verilog

    return verilog.convert(component, name=name, emit_src=False)


def write_verilog(component, path, name):
    """Write ``component`` as Verilog to ``path`` atomically; returns the path."""
    text = to_verilog(component, name)
    atomic_write(path, lambda file: file.write(text.encode()))
    return path
