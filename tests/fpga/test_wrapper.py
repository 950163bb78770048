"""The device top level carries steps in and results out, words reassembled, under stalls on both pins."""

import random

import pytest
import torch
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from dashraker.fpga.wrapper import StreamTop, payload_bits
from dashraker.hw.baseline.tile import Tile
from dashraker.models.numerics import flush_denormal
from dashraker.sim import codec
from dashraker.sim.stimulus import operand_bits

LANES = 2


def golden_pass(a_steps, b_steps):
    """SPEC 2: per step a float32 tree of the exact bf16 products, added to a float32 accumulator."""
    acc = torch.zeros((), dtype=torch.float32)
    with flush_denormal():  # restores the processor's mode after: a leaked FTZ breaks hypothesis's floats elsewhere
        for a, b in zip(a_steps, b_steps):
            products = (torch.tensor(a, dtype=torch.float32).to(torch.bfloat16).float()
                        * torch.tensor(b, dtype=torch.float32).to(torch.bfloat16).float())
            acc = acc + (products[0] + products[1])
    return int(acc.view(torch.int32)) & 0xFFFFFFFF


def run(passes, word_bits, rx_gaps, tx_stalls, seed):
    rng = random.Random(seed)
    tile = Tile(1, 1, LANES, "bf16", accumulators=1, dot="tree")  # the golden pass below adds its steps in order
    top = StreamTop(tile, word_bits)
    words = []
    for a_steps, b_steps in passes:
        steps = codec.step_transfers(tile.steps.payload.shape(), operand_bits([[a_steps]], "bf16"),
                                     operand_bits([[b_steps]], "bf16"))
        for value in codec.to_ints(steps):
            words += [(value >> (word_bits * i)) & ((1 << word_bits) - 1) for i in range(top.step_words)]
    received = []
    sim = Simulator(top)
    sim.add_clock(1e-8)

    async def bench(ctx):
        index = 0
        ready_history = [0, 0, 0]
        for _ in range(4000):
            if index < len(words):
                offer = not (rx_gaps and rng.random() < 0.3)
                ctx.set(top.rx.valid, offer)
                ctx.set(top.rx.payload, words[index])
            else:
                ctx.set(top.rx.valid, 0)
            ready = int(not (tx_stalls and rng.random() < 0.4))
            ctx.set(top.tx.ready, ready)
            await ctx.delay(1e-9)
            if ctx.get(top.tx.valid):
                assert ready_history[-3], "tx.valid without tx.ready three cycles before"
                received.append(ctx.get(top.tx.payload))
            took = index < len(words) and ctx.get(top.rx.valid) and ctx.get(top.rx.ready)
            await ctx.tick()
            index += bool(took)
            ready_history.append(ready)
            if len(received) == len(passes) * top.result_words:
                return

    sim.add_testbench(bench)
    sim.run()
    results = []
    for p in range(len(passes)):
        chunk = received[p * top.result_words:(p + 1) * top.result_words]
        results.append(sum(w << (word_bits * i) for i, w in enumerate(chunk)) & 0xFFFFFFFF)
    return top, results


@pytest.mark.parametrize("word_bits,rx_gaps,tx_stalls", [(16, False, False), (16, True, True), (7, True, True),
                                                        (64, True, False)])
def test_results_through_the_pins_equal_the_golden_model(word_bits, rx_gaps, tx_stalls):
    rng = random.Random(word_bits)
    passes = []
    for length in (3, 1, 4):
        a = [[rng.gauss(0, 2) for _ in range(LANES)] for _ in range(length)]
        b = [[rng.gauss(0, 2) for _ in range(LANES)] for _ in range(length)]
        passes.append((a, b))
    top, results = run(passes, word_bits, rx_gaps, tx_stalls, seed=word_bits)
    assert top.step_words == -(-(2 * 16 * LANES + 1) // word_bits)
    assert top.result_words == -(-32 // word_bits)
    assert results == [golden_pass(a, b) for a, b in passes]


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_rejects_what_is_not_a_stream_design():
    with pytest.raises(TypeError, match="'steps' and 'results'"):
        StreamTop(object())
    with pytest.raises(ValueError, match="word_bits must be a positive integer, not 0"):
        StreamTop(Tile(1, 1, 1, "bf16", 0, "tree"), 0)


class _TwoPorts(wiring.Component):
    """Two ``steps`` ports, as a two-thread tile has (the bench drives their ``ready``); the steps each takes, in
    order."""

    def __init__(self, bits):
        self.taken = ([], [])
        super().__init__({"steps": In(stream.Signature(bits)).array(2), "results": Out(stream.Signature(8))})

    def elaborate(self, platform):
        return Module()


def test_each_step_goes_to_the_port_its_words_name():
    """A step's words carry its port's index above its payload: each port gets exactly its steps, in order, the
    payload bit for bit, under gaps on the pins and a port that is not always ready."""
    bits, word_bits = 21, 8
    design = _TwoPorts(bits)
    top = StreamTop(design, word_bits)
    assert (top.select_bits, top.step_bits, top.step_words) == (1, bits + 1, 3)
    rng = random.Random(4)
    sent = [(rng.randrange(2), rng.getrandbits(bits)) for _ in range(40)]
    words = [((value | port << bits) >> (word_bits * i)) & 0xFF for port, value in sent for i in range(top.step_words)]
    sim = Simulator(top)
    sim.add_clock(1e-8)

    async def bench(ctx):
        index = 0
        for _ in range(3000):
            offer = index < len(words) and rng.random() < 0.7
            ctx.set(top.rx.valid, offer)
            ctx.set(top.rx.payload, words[index] if index < len(words) else 0)
            ready = [rng.random() < 0.6 for _ in range(2)]
            for port, go in zip(design.steps, ready):
                ctx.set(port.ready, go)
            await ctx.delay(1e-9)
            assert ctx.get(design.steps[0].valid) + ctx.get(design.steps[1].valid) <= 1
            for number, port in enumerate(design.steps):
                if ctx.get(port.valid) and ctx.get(port.ready):
                    design.taken[number].append(ctx.get(port.payload))
            took = offer and ctx.get(top.rx.ready)
            await ctx.tick()
            index += bool(took)
            if sum(map(len, design.taken)) == len(sent):
                return

    sim.add_testbench(bench)
    sim.run()
    assert [list(taken) for taken in design.taken] == [[v for p, v in sent if p == n] for n in range(2)]


def test_a_two_thread_tensordash_tile_is_wrapped():
    """The wrapper elaborates around a two-thread tile, a step's port index one bit above its chunk, and drives
    each thread's port (its routing: the test above)."""
    from amaranth.back import rtlil

    from dashraker.designs import DESIGNS

    design = DESIGNS["tensordash"]
    tile = design.tile(design.params(lanes=4, lookahead=1, pattern="(0,0),(1,0),(1,-1),(1,2)", fmt="fp32", threads=2))
    top = StreamTop(tile, 16)
    assert top.select_bits == 1 and top.step_bits == payload_bits(tile.steps[0]) + 1
    text = rtlil.convert(top)
    assert all(f"steps__{thread}__valid" in text and f"steps__{thread}__payload" in text for thread in (0, 1))
