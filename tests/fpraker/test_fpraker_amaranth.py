"""FPRaker RTL blocks in Amaranth's simulator: the term encoder and the rounder against the scalar reference."""

from fractions import Fraction

import numpy as np
from amaranth.sim import Simulator

from dashraker.hw.fpraker import Rounder, TermEncoder
from fpraker_reference import _round_to_fp32, naf_terms


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


def test_term_encoder_all_significands():
    dut = TermEncoder()

    async def bench(ctx):
        for x in range(256):
            ctx.set(dut.significand, x)
            plus, minus = ctx.get(dut.plus), ctx.get(dut.minus)
            want_plus = sum(1 << t for t, s in naf_terms(x) if s > 0)
            want_minus = sum(1 << t for t, s in naf_terms(x) if s < 0)
            assert (plus, minus) == (want_plus, want_minus), x

    _run(dut, bench)


def test_rounder_matches_reference():
    guard_bits = 3
    dut = Rounder(guard_bits)
    rng = np.random.default_rng(2)
    width = 25 + guard_bits
    windows = [0, 1, -1, (1 << (width - 1)) - 1, -(1 << (width - 1)), 0b1011 << 20, -(0b1011 << 20) - 1]
    windows += rng.integers(-(1 << (width - 1)), 1 << (width - 1), 300).tolist()
    windows += (rng.integers(1, 1 << 10, 100) * rng.choice([-1, 1], 100)).tolist()  # small: far from the top

    async def bench(ctx):
        for index, window in enumerate(windows):
            exponent = [-40, 0, 1, 5, 127, 250, 260, 300][index % 8] + int(rng.integers(-3, 4))
            ctx.set(dut.accumulator.window, int(window))
            ctx.set(dut.accumulator.exponent, exponent)
            ctx.set(dut.accumulator.nonempty, int(window != 0))
            want = _round_to_fp32(Fraction(int(window)) * Fraction(2) ** (exponent - 150 - guard_bits))
            assert ctx.get(dut.result.as_value()) == want, (window, exponent)
        for nan, pos, neg, want in [(1, 0, 0, 0x7FC00000), (0, 1, 1, 0x7FC00000), (0, 1, 0, 0x7F800000),
                                    (0, 0, 1, 0xFF800000)]:
            ctx.set(dut.accumulator.nan, nan)
            ctx.set(dut.accumulator.pos_inf, pos)
            ctx.set(dut.accumulator.neg_inf, neg)
            assert ctx.get(dut.result.as_value()) == want

    _run(dut, bench)
