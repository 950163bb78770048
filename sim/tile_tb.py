"""One cocotb testbench for the tile of every design: passes streamed in, every result checked against the golden model.

The pytest side names the design and its parameters (``runner.run_tile``); inside the
simulator ``TileTB`` rebuilds the tile from the registry for its stream layouts and
latency, encodes the passes with ``codec`` and compares each result with the
descriptor's golden model. Typical use in a cocotb test::

    tb = TileTB(dut, idle=0.3, backpressure=0.3)
    await tb.reset()
    run = await tb.run_passes([(scheduled_bits, partner_bits)])
"""

import collections
import dataclasses

import numpy as np
from cocotb.triggers import ClockCycles

from dashraker.designs import design
from dashraker.hw.tile_stream import payload_layout
from dashraker.models.numerics import operand_values
from dashraker.sim import codec
from dashraker.sim.runner import tb_config
from dashraker.sim.streams import TB, StreamSink, StreamSource

__all__ = ["CROSSED", "PAIRED", "PERIOD_NS", "Run", "TileTB", "single_pass_batches"]

# Stream stalls of the data tests, as cocotbext-axi's: idle cycles at the source crossed with backpressure at the sink
# (``@cocotb.parametrize(**CROSSED)``); the long real-data tests take both or neither (``PAIRED``).
STALLS = (0.0, 0.3)
CROSSED = {"idle": STALLS, "backpressure": STALLS}
PAIRED = (("idle", "backpressure"), [(stall, stall) for stall in STALLS])

PERIOD_NS = 10


def single_pass_batches(passes):
    """Passes (scheduled [R, S, N], partner [C, S, N]) as batches of one: passes of different steps."""
    return [(np.asarray(a)[None], np.asarray(b)[None]) for a, b in passes]


@dataclasses.dataclass
class Run:
    """What the tile did with the passes of one ``run_passes``, per pass in order.

    ``cycles``: the cycles the pass costs (the golden model's count, or the design's
    cost where the golden model counts none); ``arrivals``: the clock cycle of its result.
    """

    cycles: np.ndarray
    arrivals: np.ndarray


class TileTB(TB):
    """Owns a tile of the registry: clock, reset, a source on each ``steps`` port and a sink on ``results``.

    The design and its parameters come from ``tb_config()`` (``design``, ``params``,
    ``seed``). ``idle`` is the probability of an idle cycle at a source in every
    cycle, ``backpressure`` that of the sink refusing a transfer; data tests cross them.
    A tile of T threads (``steps`` an array of T ports, ``steps__0``, ...) has a source per
    thread, and its results say their ``thread``.
    """

    def __init__(self, dut, idle=0.0, backpressure=0.0):
        super().__init__(dut, PERIOD_NS)
        self.config = tb_config()
        self.design = design(self.config["design"])
        self.params = self.design.params(**self.config["params"])
        tile = self.design.tile(self.params)
        tile._MustUse__silence = True  # built for its layouts and latency, never elaborated
        self.step_layout = payload_layout(tile, "steps")
        self.result_layout = payload_layout(tile, "results")
        self.latency = tile.latency
        seed = self.config["seed"]
        dimensions = tile.signature.members["steps"].dimensions
        self.threads = dimensions[0] if dimensions else 1
        prefixes = ["steps"] if not dimensions else [f"steps__{thread}" for thread in range(self.threads)]
        self.sources = [StreamSource(dut, prefix, dut.clk, idle=idle, seed=seed + 2 * thread)
                        for thread, prefix in enumerate(prefixes)]
        self.sink = StreamSink(dut, "results", dut.clk, backpressure=backpressure, seed=seed + 1)

    async def run_passes(self, batches, sizes=None, names=None):
        """Stream batches of passes back to back, check every result, and end with every queue empty.

        A batch is operand bit patterns (scheduled [P, R, S, N], partner [P, C, S, N]);
        its steps are encoded together, so grouped transfers run across its passes,
        as many steps each as ``sizes`` says (``codec.step_transfers``). With T threads,
        pass k of the stream (the batches' passes in order) is thread k mod T's, each
        thread's passes of a batch encoded together on its own port, and each result is
        that of its thread's next pass. ``names`` label the batches in messages. Returns
        the ``Run``, its passes in stream order.
        """
        batches = [(np.asarray(a), np.asarray(b)) for a, b in batches]
        names = names or [f"batch {index}" for index in range(len(batches))]
        first = 0
        for a, b in batches:
            for thread, source in enumerate(self.sources):
                mine = slice((thread - first) % self.threads, None, self.threads)
                if len(a[mine]):
                    source.send(codec.to_ints(codec.step_transfers(self.step_layout, a[mine], b[mine], sizes)))
            first += len(a)
        expected = [collections.deque() for _ in self.sources]  # (what, outputs, cycles, pass) of each thread's passes
        cycles = []
        for name, (a, b) in zip(names, batches):
            want, want_cycles = self.design.golden(self.params, a, b)
            if want_cycles is None:
                fmt = self.params["fmt"]
                want_cycles = self.design.cost.cycles(self.params, operand_values(a, fmt).numpy(),
                                                      operand_values(b, fmt).numpy())
            for index in range(len(a)):
                expected[len(cycles) % self.threads].append(
                    (f"{name} pass {index}", want[index], want_cycles[index], len(cycles)))
                cycles.append(int(want_cycles[index]))
        received = [await self._check(expected) for _ in cycles]
        for name, (a, _) in zip(names, batches):
            self.dut._log.info(f"{name}: {len(a)} passes of {a.shape[2]} steps: agree")
        for source in self.sources:
            await source.wait()
        await ClockCycles(self.dut.clk, 2 * self.latency + 8)  # time for a spurious result to come out
        unsent = sum(len(source.queue) for source in self.sources)
        assert not unsent and not self.sink.queue, (
            f"{unsent} transfers unsent, {len(self.sink.queue)} results beyond the {len(cycles)} passes sent")
        arrivals = np.empty(len(cycles), np.int64)
        arrivals[received] = np.round(np.array(self.sink.times[-len(cycles):]) / PERIOD_NS).astype(np.int64)
        return Run(np.array(cycles, np.int64), arrivals)

    async def _check(self, expected):
        """The next result equals the golden outputs and, where it reports them, the golden cycles, of the next pass
        of its thread (``expected``: each thread's passes to come). Returns that pass's index in the stream."""
        bits = codec.from_ints([await self.sink.recv()], self.result_layout.size)
        got = codec.decode(self.result_layout, bits)
        thread = int(got["thread"][0]) if "thread" in got else 0
        assert expected[thread], f"a result of thread {thread}, which has no pass left"
        what, want, want_cycles, index = expected[thread].popleft()
        outputs = got["outputs"][0]
        assert np.array_equal(outputs, want), (
            f"{what}: {int((outputs != want).sum())} PE results differ\n"
            f"got  {[hex(v) for v in outputs.ravel()[:8]]}\nwant {[hex(v) for v in want.ravel()[:8]]}")
        if "cycles" in got:
            assert got["cycles"][0] == want_cycles, f"{what}: RTL {got['cycles'][0]} cycles, golden {want_cycles}"
        return index

    def accepted(self, thread=0):
        """Clock cycle of every accepted ``steps`` transfer (of ``thread``'s port) so far."""
        return np.round(np.array(self.sources[thread].times) / PERIOD_NS).astype(np.int64)

    def ends(self, run):
        """The cycle the design's cost model ends each pass of ``run`` on (``Cost.ends``: back to back, or a
        two-thread TensorDash tile's interleaved), from the stream's first."""
        return self.design.cost.ends(self.params, run.cycles)

    def check_back_to_back(self, run):
        """Without stalls, every design runs its passes as its cost model says (``ends``): back to back, results
        exactly a pass's cycles apart; with threads, as far apart as the model ends the passes."""
        ends = self.ends(run)
        gaps, want = (run.arrivals - run.arrivals[0]).tolist(), (ends - ends[0]).tolist()
        assert gaps == want, f"results on cycles {gaps} after the first's, the model's pass ends {want}"
