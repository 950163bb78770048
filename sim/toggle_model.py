"""A Verilog circuit built with toggle counting and clocked from Python, for small circuits whose toggles are known
by hand (tests/cosim/test_toggles.py). Apart from ``sim.toggles`` because it builds with ``sim.cosim``, which reads
its counts through ``sim.toggles``."""

from pathlib import Path

from dashraker.sim import toggles
from dashraker.sim.cosim import compile_model

__all__ = ["ToggleModel"]


class ToggleModel:
    """Any Verilog (top module ``top``, with ``clk``) built with toggle counting by ``method`` (``"counters"``, one
    counter per net bit here, or ``"coverage"``; ``dashraker.sim.toggles``), clocked from Python: for small circuits
    whose toggles are known by hand. ``per_bit`` False builds the counters as co-simulation does (one per net):
    ``counts`` only.

    ``io`` is pyverilator's port access; ``tick()`` one clock cycle; ``zero()`` restarts the counts;
    ``counts()`` per instance (``toggles.read_counts``); ``nets()`` per net of the top: {net: [toggles of bit 0,
    1, ...]}.
    """

    def __init__(self, verilog, top, build_dir, method="counters", per_bit=True):
        from pyverilator import PyVerilator

        self.top, self.method = top, method
        self.build_dir = Path(build_dir).resolve()
        if not (self.build_dir / f"V{top}").exists():
            def write(work):
                (work / f"{top}.v").write_text(verilog)
                return work / f"{top}.v"

            compile_model(write, top, self.build_dir,
                          lambda text, work: toggles.instrument(text, work, top, method, per_bit), "-O0",
                          args=toggles.verilator_args(method))
        self.sim = PyVerilator(str(self.build_dir / f"V{top}"))
        self.io = self.sim.io

    def tick(self, cycles=1):
        for _ in range(cycles):
            self.sim.clock.tick()

    def zero(self):
        toggles.zero_counts(self.sim.lib, self.sim.model)

    def counts(self):
        return toggles.read_counts(self.sim.lib, self.top, self.method, self.build_dir)

    def nets(self, module=None):
        """Toggles per bit of each net of ``module`` (default the top), by net name."""
        return toggles.net_bits(self.sim.lib, self.build_dir, self.method, module or self.top)
