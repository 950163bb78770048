"""The device top level carries steps in and results out, words reassembled, under stalls on both pins."""

import random

import pytest
import torch
from amaranth.sim import Simulator

from dashraker.fpga.wrapper import StreamTop
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
    tile = Tile(1, 1, LANES, "bf16", accumulators=1)  # the golden pass below adds its steps in order
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
        StreamTop(Tile(1, 1, 1, "bf16", 0), 0)
