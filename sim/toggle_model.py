"""A Verilog circuit built with toggle counting and clocked from Python, for small circuits whose toggles are known
by hand (tests/cosim/test_toggles.py). Apart from ``sim.toggles`` because it builds with ``sim.cosim``, which reads
its counts through ``sim.toggles``."""

import ctypes
import os
import re
import tempfile
from pathlib import Path

from dashraker.sim.cosim import compile_model
from dashraker.sim.toggles import EXTENSION, VERILATOR_ARGS, _net, read_counts, read_dat

__all__ = ["ToggleModel"]


class ToggleModel:
    """Any Verilog (top module ``top``, with ``clk``) built with toggle counting, clocked from Python: for small
    circuits whose toggles are known by hand.

    ``io`` is pyverilator's port access; ``tick()`` one clock cycle; ``zero()`` restarts the counts;
    ``counts()`` per instance (``per_instance``); ``nets()`` per net of the top: {net: [toggles of bit 0, 1, ...]}.
    """

    def __init__(self, verilog, top, build_dir):
        from pyverilator import PyVerilator

        self.top = top
        build_dir = Path(build_dir).resolve()
        if not (build_dir / f"V{top}").exists():
            def write(work):
                (work / f"{top}.v").write_text(verilog)
                return work / f"{top}.v"

            compile_model(write, top, build_dir, lambda text: text + EXTENSION, "-O0", args=VERILATOR_ARGS)
        self.sim = PyVerilator(str(build_dir / f"V{top}"))
        self.io = self.sim.io

    def tick(self, cycles=1):
        for _ in range(cycles):
            self.sim.clock.tick()

    def zero(self):
        self.sim.lib.cosim_toggles_zero()

    def counts(self):
        return read_counts(self.sim.lib, self.top)

    def nets(self, module=None):
        """Toggles per bit of each net of ``module`` (default the top), by net name."""
        with tempfile.TemporaryDirectory(prefix="dashraker-toggles-") as folder:
            path = os.path.join(folder, "coverage.dat")
            self.sim.lib.cosim_toggles_write(ctypes.c_char_p(path.encode()))
            points = read_dat(path)
        nets = {}
        for owner, bit, count in points:
            if owner == (module or self.top):
                index = re.search(r"\[(\d+)\]$", bit)
                bits = nets.setdefault(_net(bit).lstrip("\\"), {})
                bits[int(index[1]) if index else 0] = count
        return {name: [bits[i] for i in sorted(bits)] for name, bits in nets.items()}
