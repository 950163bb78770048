"""cocotb drivers for ``amaranth.lib.stream`` ports: a source, a sink, a cycle counter.

A stream port ``p`` of a generated top level appears as ``p__valid``, ``p__ready`` and
``p__payload``; payloads travel as integers (``dashraker.sim.codec`` encodes them from
the port's layout; ``sim.tile_tb`` does it for a tile). Both ends can insert random
idle/backpressure cycles so every data test also runs with stalls.
"""

import collections
import random

import cocotb
from cocotb.triggers import Event, RisingEdge
from cocotb.utils import get_sim_time

__all__ = ["TB", "StreamSource", "StreamSink"]


class _StreamEnd:
    def __init__(self, dut, prefix, clock, stall, seed):
        """``stall``: the probability of a cycle without a transfer from this end (idle or backpressure)."""
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.clock = clock
        self.stall = stall
        self.random = random.Random(seed)
        self.queue = collections.deque()
        self.times = []  # simulation time (ns) of each transfer's clock edge

    def _stalled(self):
        return self.stall > 0 and self.random.random() < self.stall


class StreamSource(_StreamEnd):
    """Sends payloads into a stream sink port, idle with probability ``idle`` each cycle."""

    def __init__(self, dut, prefix, clock, *, idle=0.0, seed=0):
        super().__init__(dut, prefix, clock, idle, seed)
        self.valid.value = 0
        self._driving = False
        self._idle = Event()
        cocotb.start_soon(self._run())

    def send(self, payloads):
        self.queue.extend(payloads)
        self._idle.clear()

    async def wait(self):
        """Until every queued payload has been accepted."""
        if self.queue or self._driving:
            await self._idle.wait()

    async def _run(self):
        self._driving = False
        while True:
            await RisingEdge(self.clock)
            if self._driving and self.ready.value:
                self.times.append(get_sim_time("ns"))
                self._driving = False
                if not self.queue:
                    self._idle.set()
            if not self._driving and self.queue and not self._stalled():
                self.payload.value = self.queue.popleft()
                self._driving = True
            self.valid.value = int(self._driving)


class StreamSink(_StreamEnd):
    """Receives payloads from a stream source port, not ready (backpressure) with probability ``backpressure``."""

    def __init__(self, dut, prefix, clock, *, backpressure=0.0, seed=1):
        super().__init__(dut, prefix, clock, backpressure, seed)
        self.ready.value = 0
        self._arrived = Event()
        cocotb.start_soon(self._run())

    async def recv(self):
        while not self.queue:
            self._arrived.clear()
            await self._arrived.wait()
        return self.queue.popleft()

    async def _run(self):
        while True:
            await RisingEdge(self.clock)
            if self.valid.value and self.ready.value:
                self.queue.append(int(self.payload.value))
                self.times.append(get_sim_time("ns"))
                self._arrived.set()
            self.ready.value = 0 if self._stalled() else 1


class TB:
    """Owns a clocked DUT: starts its clock and resets it (Amaranth's ``clk``/``rst``)."""

    def __init__(self, dut, period_ns=10):
        from cocotb.clock import Clock

        self.dut = dut
        Clock(dut.clk, period_ns, unit="ns").start()

    async def reset(self, cycles=2):
        self.dut.rst.value = 1
        for _ in range(cycles):
            await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0
