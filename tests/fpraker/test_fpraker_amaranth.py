"""FPRaker RTL blocks in Amaranth's simulator, each against an independent Python reading of the arithmetic.

The term encoder, lanes, PE and rounder are checked against the scalar reference
(``fpraker_reference``: NAF by the textbook digit loop, exact rationals); the
decoder, sequencer and output stage against the rules of the golden model's
docstring written out here with Python integers; the whole tile against the golden
model (``dashraker.models.fpraker``).
"""

import re
from fractions import Fraction

import numpy as np
import pytest
from amaranth.sim import Simulator

from dashraker.hw.fpraker import (Decoder, ExponentUnit, Lane, OutputStage, PE, Rounder, Sequencer, TermEncoder,
                                  Tile)
from dashraker.models.fpraker import tile as golden_tile
from dashraker.models.numerics import fp32_bits
from fpraker_reference import NAN, _round_to_fp32, naf_terms, reference_pe
from fpraker_stimulus import FIVE_TERM_SIGNIFICANDS, random_bits

NO_EXPONENT = -(1 << 11)  # the decoder's maximum when no lane is live
MIXES = [(2, 0.0), (8, 0.3), (40, 0.5), (120, 0.2)]  # random_bits' (exponent spread, share of corner cases)


def _run(dut, bench, clocked=True):
    sim = Simulator(dut)
    if clocked:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _passes(rng, lanes, leading, count):
    """``count`` random passes of 1..5 steps, cycling through ``MIXES``, then two corner passes: a huge first
    product and products 2**-100 times smaller (every later term out of bounds), and zero ``a`` operands.
    A pass is a bf16 array ``[*lead, S, N]`` per ``lead`` in ``leading`` (``a`` first, then ``b``)."""
    mixes = [MIXES[index % len(MIXES)] + (int(rng.integers(1, 6)),) for index in range(count)]
    passes = [tuple(random_bits(rng, (*lead, steps, lanes), spread, corner) for lead in leading)
              for spread, corner, steps in mixes]
    a_lead, b_lead = leading
    huge = np.full((*a_lead, 1, lanes), 250 << 7)
    tiny = (40 << 7) | (rng.choice(FIVE_TERM_SIGNIFICANDS, (*a_lead, 2, lanes)) - 128)
    ones = np.full((*b_lead, 3, lanes), 127 << 7)
    zeros = np.zeros((*a_lead, 2, lanes), np.int64)
    return passes + [(np.concatenate([huge, tiny], -2), ones), (zeros, ones[..., :2, :] | 0x8000)]


def _digits(significand):
    """(plus, minus) digit masks of the NAF of ``significand``, from the reference's digit loop."""
    terms = naf_terms(significand)
    return sum(1 << t for t, s in terms if s > 0), sum(1 << t for t, s in terms if s < 0)


def _product(a, b):
    """A bf16 pair as the golden model's docstring reads it: the lane's fields and its special products."""
    (sa, ea, fa), (sb, eb, fb) = [(x >> 15, (x >> 7) & 0xFF, x & 0x7F) for x in (a, b)]
    zero = [ea == 0, eb == 0]
    inf = [ea == 255 and fa == 0, eb == 255 and fb == 0]
    nan_operand = (ea == 255 and fa != 0) or (eb == 255 and fb != 0)
    nan = nan_operand or (inf[0] and zero[1]) or (zero[0] and inf[1])
    plus, minus = _digits(0 if zero[0] else 0x80 | fa)
    sig_b = 0 if zero[1] else 0x80 | fb
    return {
        "plus": plus, "minus": minus, "b": -sig_b if sa ^ sb else sig_b, "exponent": ea + eb - 127,
        "live": not (any(zero) or any(inf) or nan_operand),
        "nan": nan, "pos_inf": any(inf) and not nan and not sa ^ sb, "neg_inf": any(inf) and not nan and sa ^ sb,
    }


def _pe_step(a_lanes, b_lanes):
    """A PE's step (``pe_step_layout`` fields) of N bf16 pairs."""
    lanes = [_product(int(a), int(b)) for a, b in zip(a_lanes, b_lanes)]
    live = [lane["exponent"] for lane in lanes if lane["live"]]
    return {
        "lanes": [{k: lane[k] for k in ("plus", "minus", "b", "exponent", "live")} for lane in lanes],
        "max_exponent": max(live, default=NO_EXPONENT),
        "any_live": bool(live),
        "specials": {k: any(lane[k] for lane in lanes) for k in ("nan", "pos_inf", "neg_inf")},
    }


def _accumulator_bits(acc, guard_bits):
    """fp32 bits of an accumulator (``accumulator_layout`` fields): specials, else the rounded window."""
    if acc["nan"] or (acc["pos_inf"] and acc["neg_inf"]):
        return NAN
    if acc["pos_inf"] or acc["neg_inf"]:
        return 0xFF800000 if acc["neg_inf"] else 0x7F800000
    if not acc["nonempty"]:
        return 0
    return _round_to_fp32(Fraction(acc["window"]) * Fraction(2) ** (acc["exponent"] - 150 - guard_bits))


def _bits(view, value):
    """The bits of ``value`` (nested dicts and lists) in ``view``'s layout."""
    return view.shape().const(value).as_value().value


def _set_step(ctx, payload, a, b, last):
    """Drive a ``step_layout`` payload: bf16 bits ``a`` [R, N] and ``b`` [C, N], and ``last``."""
    for operands, values in ((payload.rows, a), (payload.cols, b)):
        for index, value in np.ndenumerate(values):
            ctx.set(operands[index[0]][index[1]].as_value(), int(value))
    ctx.set(payload.last, last)


def _get_fields(ctx, view, names):
    return {name: ctx.get(getattr(view, name)) for name in names}


ACCUMULATOR_FIELDS = ("window", "exponent", "nonempty", "nan", "pos_inf", "neg_inf")


@pytest.mark.parametrize("make, name, value", [
    (lambda: Lane(8), "guard_bits", 8), (lambda: Lane(-1), "guard_bits", -1), (lambda: ExponentUnit(0), "lanes", 0),
    (lambda: PE(0, 3), "lanes", 0), (lambda: PE(4, "3"), "guard_bits", "3"), (lambda: Decoder(0, 1, 8), "rows", 0),
    (lambda: Decoder(1, 1.5, 8), "cols", 1.5), (lambda: Sequencer(2), "zero_block_cycles", 2),
    (lambda: OutputStage(1, 1, 8), "guard_bits", 8), (lambda: Rounder(True), "guard_bits", True),
    (lambda: Tile(lanes=0), "lanes", 0),
])
def test_components_reject_bad_parameters(make, name, value):
    with pytest.raises(ValueError, match=rf"^{name} must be .*, not {re.escape(repr(value))}$"):
        make()


def test_term_encoder_all_significands():
    dut = TermEncoder()

    async def bench(ctx):
        for x in range(256):
            ctx.set(dut.significand, x)
            assert (ctx.get(dut.plus), ctx.get(dut.minus)) == _digits(x), x

    _run(dut, bench, clocked=False)


@pytest.mark.parametrize("guard_bits", [0, 3, 7])
def test_lane_issues_in_bound_terms_most_significant_first(guard_bits):
    """Every cycle's contribution is floor(s * b * 2**(t + 9 + G - d)) of the next in-bound NAF term, with idle
    cycles in between; a lane that is not live, or whose next term is out of bounds, issues nothing more."""
    g = guard_bits
    dut = Lane(g)
    rng = np.random.default_rng(g)
    significands = [0x80, 0xFF, 0xAB, 0xC0, *FIVE_TERM_SIGNIFICANDS[:6], *rng.integers(0x80, 0x100, 30).tolist()]
    cases = []
    for index, significand in enumerate(significands):
        b = [255, -255, 128, -128, int(rng.integers(128, 256)) * int(rng.choice([-1, 1]))][index % 5]
        top = naf_terms(significand)[0][0]
        for d in (0, 1, top + 16 + g - 3, top + 16 + g - 1, top + 16 + g, top + 17 + g, 300, int(rng.integers(0, 30))):
            cases.append((significand, b, d, index % 7 != 3))

    async def bench(ctx):
        for significand, b, d, live in cases:
            want = []
            for t, s in naf_terms(significand) if live else []:
                if d > t + 16 + g:
                    break
                shift = t + 9 + g - d
                want.append(s * b << shift if shift >= 0 else s * b >> -shift)
            plus, minus = _digits(significand)
            exponent = int(rng.integers(-300, 400))
            ctx.set(dut.step, {"plus": plus, "minus": minus, "b": b, "exponent": exponent, "live": live})
            ctx.set(dut.load, 1)
            await ctx.tick()
            ctx.set(dut.load, 0)
            assert ctx.get(dut.exponent) == exponent
            issued, first = 0, True
            while issued <= len(want):
                active = rng.random() < 0.7
                ctx.set(dut.first, first)
                ctx.set(dut.active, active)
                ctx.set(dut.distance, d if first else int(rng.integers(-100, 100)))  # read in the first cycle only
                case = (significand, b, d, live, issued)
                assert ctx.get(dut.contribution) == (want[issued] if issued < len(want) else 0), case
                assert ctx.get(dut.more) == (issued + 1 < len(want)), case
                await ctx.tick()
                if active:
                    issued, first = issued + 1, False

    _run(dut, bench)


def test_exponent_unit_aligns_to_the_largest_exponent():
    lanes = 4
    dut = ExponentUnit(lanes)
    rng = np.random.default_rng(4)

    async def bench(ctx):
        for index in range(300):
            exponents = rng.integers(-200, 500, lanes).tolist()
            max_exponent, acc = max(exponents), int(rng.integers(-200, 520))
            any_live, nonempty = index % 5 != 0, index % 3 != 0
            if index % 11 == 0:
                acc = max_exponent  # ties
            ctx.set(dut.exponents, exponents)
            ctx.set(dut.max_exponent, max_exponent)
            ctx.set(dut.any_live, any_live)
            ctx.set(dut.acc_exponent, acc)
            ctx.set(dut.acc_nonempty, nonempty)
            top = max([max_exponent] * any_live + [acc] * nonempty, default=max_exponent)
            assert ctx.get(dut.top) == top
            assert [ctx.get(dut.distances[n]) for n in range(lanes)] == [top - e for e in exponents]

    _run(dut, bench, clocked=False)


@pytest.mark.parametrize("lanes, guard_bits", [(4, 3), (2, 0), (3, 7)])
def test_pe_matches_reference_after_every_step(lanes, guard_bits):
    """Passes of random and corner-case steps, with idle cycles: each step lasts the reference's cost, and the
    window it leaves, rounded, is the reference's result of the pass so far."""
    dut = PE(lanes, guard_bits)
    rng = np.random.default_rng(lanes + guard_bits)
    passes = _passes(rng, lanes, [(), ()], 12)

    async def bench(ctx):
        for a, b in passes:
            for k in range(len(a)):
                want, costs, _, _ = reference_pe(a[:k + 1].tolist(), b[:k + 1].tolist(), guard_bits)
                ctx.set(dut.step, _pe_step(a[k], b[k]))
                ctx.set(dut.control.load, 1)
                await ctx.tick()
                ctx.set(dut.control.load, 0)
                cycles = 0
                while True:
                    ctx.set(dut.control.first, cycles == 0)
                    active = rng.random() < 0.8
                    ctx.set(dut.control.active, active)
                    done = not ctx.get(dut.more)
                    if active and done:
                        break
                    await ctx.tick()
                    cycles += active
                assert cycles + 1 == costs[k], (a[:k + 1], b[:k + 1], cycles + 1, costs[k])
                result = _get_fields(ctx, dut.result, ACCUMULATOR_FIELDS)
                assert _accumulator_bits(result, guard_bits) == want, (a[:k + 1], b[:k + 1], result, hex(want))
                ctx.set(dut.control.finish, 1)
                ctx.set(dut.control.pass_end, k == len(a) - 1)
                await ctx.tick()
                ctx.set(dut.control.finish, 0)
                ctx.set(dut.control.pass_end, 0)
                ctx.set(dut.control.active, 0)

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

    _run(dut, bench, clocked=False)


def test_decoder_decodes_every_pe_step_into_a_register():
    """Every PE's lanes, maximum exponent and specials as the golden model's docstring defines them, one cycle
    after the transfer; the register holds while ``decoded`` is not taken."""
    rows, cols, lanes = 2, 3, 3
    dut = Decoder(rows, cols, lanes)
    rng = np.random.default_rng(6)

    async def bench(ctx):
        pending = None  # what the register must hold
        for index in range(120):
            spread, corner = [(2, 0.0), (8, 0.5), (120, 0.9), (40, 0.3)][index % 4]
            a, b = random_bits(rng, (rows, lanes), spread, corner), random_bits(rng, (cols, lanes), spread, corner)
            if index % 9 == 0:
                a[:] = 0  # no live lane anywhere
            valid, ready, last = rng.random() < 0.7, rng.random() < 0.6, bool(rng.random() < 0.3)
            _set_step(ctx, dut.steps.payload, a, b, last)
            ctx.set(dut.steps.valid, valid)
            ctx.set(dut.decoded.ready, ready)
            assert ctx.get(dut.decoded.valid) == (pending is not None)
            if pending is not None:
                assert ctx.get(dut.decoded.payload.as_value()) == _bits(dut.decoded.payload, pending), index
            assert ctx.get(dut.steps.ready) == (pending is None or ready)
            if valid and (pending is None or ready):
                pes = [[_pe_step(a[r], b[c]) for c in range(cols)] for r in range(rows)]
                any_live = any(pe["any_live"] for row in pes for pe in row)
                pending = {"pes": pes, "any_live": any_live, "last": last}
            elif ready:
                pending = None
            await ctx.tick()

    _run(dut, bench)


@pytest.mark.parametrize("zero_block_cycles", [0, 1])
def test_sequencer_runs_steps_back_to_back_and_counts_cycles(zero_block_cycles):
    """Steps of known lengths (the testbench's PEs are done after that many active cycles): each is loaded once,
    active exactly its length with ``first`` on its first active cycle, and followed without a bubble; a pass
    ends with its last step and counts its counted steps' lengths; while the output stage is full the PEs hold."""
    dut = Sequencer(zero_block_cycles)
    rng = np.random.default_rng(zero_block_cycles)
    steps = [(int(rng.integers(1, 6)), rng.random() < 0.75, rng.random() < 0.3) for _ in range(80)]
    steps.append((1, True, True))

    async def bench(ctx):
        offered = 0  # the next step to offer
        running = None  # [length, active cycles so far, any_live, last] of the loaded step
        pass_cycles, passes = 0, []
        cycle = 0
        while offered < len(steps) or running is not None:
            idle_in, full_out = (cycle // 60) % 3 == 1, (cycle // 60) % 3 == 2
            valid = offered < len(steps) and (not idle_in or rng.random() < 0.4)
            capture_ready = not full_out or rng.random() < 0.3
            done = running[1] + 1 >= running[0] if running else bool(rng.integers(2))  # ignored when idle
            length, any_live, last = steps[min(offered, len(steps) - 1)]
            for port, value in [(dut.valid, valid), (dut.last, last), (dut.any_live, any_live),
                                (dut.done, done), (dut.capture_ready, capture_ready)]:
                ctx.set(port, value)
            control = _get_fields(ctx, dut.control, ("load", "active", "first", "finish", "pass_end"))
            hold = running is not None and done and running[3] and not capture_ready
            assert control["active"] == (running is not None and not hold), cycle
            if control["active"]:
                assert control["first"] == (running[1] == 0), cycle
            assert control["finish"] == (control["active"] and done), cycle
            assert control["pass_end"] == (control["finish"] and running[3]), cycle
            assert ctx.get(dut.ready) == (running is None or control["finish"]), cycle
            assert control["load"] == (valid and ctx.get(dut.ready)), cycle
            if control["active"]:
                pass_cycles += running[2] or zero_block_cycles
                running[1] += 1
            if control["pass_end"]:
                assert ctx.get(dut.cycles) == pass_cycles, cycle
                passes.append(pass_cycles)
                pass_cycles = 0
            if control["finish"]:
                running = None
            if control["load"]:
                running = [length, 0, any_live, last]
                offered += 1
            await ctx.tick()
            cycle += 1
        assert len(passes) == sum(last for _, _, last in steps)

    _run(dut, bench)


def test_output_stage_rounds_captured_passes_in_order():
    """Captured accumulators come out rounded (reference rounding) with their cycle count, in order, two clock
    edges after their capture when ``results`` is not stalled; ``capture_ready`` drops only when both registers
    are full and ``results`` is not taken."""
    rows, cols, g = 2, 2, 3
    dut = OutputStage(rows, cols, g)
    rng = np.random.default_rng(8)
    width = 25 + g

    def accumulator():
        window = int(rng.integers(-(1 << (width - 1)), 1 << (width - 1))) >> int(rng.integers(0, width))
        special = rng.random() < 0.15
        return {"window": window, "exponent": int(rng.integers(-60, 320)), "nonempty": window != 0,
                "nan": special and rng.random() < 0.3, "pos_inf": special and rng.random() < 0.6,
                "neg_inf": special and rng.random() < 0.5}

    async def bench(ctx):
        expected = []  # (capture cycle, outputs, cycles) in the stage
        delivered, last_stall = 0, -1
        for cycle in range(400):
            stalled = (cycle // 50) % 2 == 1
            ready = not stalled or rng.random() < 0.3
            ctx.set(dut.results.ready, ready)
            assert ctx.get(dut.capture_ready) == (not (len(expected) == 2 and not ready)), cycle
            capture = ctx.get(dut.capture_ready) and rng.random() < 0.5
            accumulators = [[accumulator() for _ in range(cols)] for _ in range(rows)]
            cycles = int(rng.integers(0, 1 << 32))
            ctx.set(dut.accumulators, accumulators)
            ctx.set(dut.cycles, cycles)
            ctx.set(dut.capture, capture)
            if not ready:
                last_stall = cycle
            if ctx.get(dut.results.valid) and ready:
                captured_at, outputs, want_cycles = expected.pop(0)
                payload = dut.results.payload
                got = [[ctx.get(payload.outputs[r][c].as_value()) for c in range(cols)] for r in range(rows)]
                assert got == outputs, cycle
                assert ctx.get(payload.cycles) == want_cycles, cycle
                assert cycle - captured_at >= 2, cycle
                assert cycle - captured_at == 2 or last_stall > captured_at, cycle  # later only behind a stall
                delivered += 1
            if capture:
                outputs = [[_accumulator_bits(acc, g) for acc in row] for row in accumulators]
                expected.append((cycle, outputs, cycles))
            await ctx.tick()
        assert delivered > 100

    _run(dut, bench)


def _simulate_tile(dut, passes, rng, idle, stall):
    """Stream the passes (``idle``: share of cycles the source waits, ``stall``: the sink's); returns every
    result as (outputs bits [R, C], cycles, clock cycle it was taken)."""
    rows, cols = dut.rows, dut.cols
    results = []

    async def source(ctx):
        for a, b in passes:
            for k in range(a.shape[1]):
                while rng.random() < idle:
                    ctx.set(dut.steps.valid, 0)
                    await ctx.tick()
                _set_step(ctx, dut.steps.payload, a[:, k], b[:, k], k == a.shape[1] - 1)
                ctx.set(dut.steps.valid, 1)
                await ctx.tick().until(dut.steps.ready)
            ctx.set(dut.steps.valid, 0)

    async def sink(ctx):
        cycle = 0
        while len(results) < len(passes):
            ready = rng.random() >= stall
            ctx.set(dut.results.ready, ready)
            if ready and ctx.get(dut.results.valid):
                payload = dut.results.payload
                outputs = [[ctx.get(payload.outputs[r][c].as_value()) for c in range(cols)] for r in range(rows)]
                results.append((np.array(outputs), ctx.get(payload.cycles), cycle))
            await ctx.tick()
            cycle += 1
        for _ in range(8):  # nothing beyond the passes sent
            assert not ctx.get(dut.results.valid)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run()
    return results


@pytest.mark.parametrize("rows, cols, lanes, guard_bits, zero_block_cycles, idle, stall", [
    (1, 2, 4, 0, 0, 0.3, 0.3),
    (2, 1, 3, 7, 1, 0.2, 0.5),
    (1, 1, 1, 3, 1, 0.0, 0.0),
])
def test_tile_matches_golden_model(rows, cols, lanes, guard_bits, zero_block_cycles, idle, stall):
    dut = Tile(rows, cols, lanes, guard_bits, zero_block_cycles)
    rng = np.random.default_rng(rows * 100 + cols * 10 + lanes)
    passes = _passes(rng, lanes, [(rows,), (cols,)], 8)
    results = _simulate_tile(dut, passes, rng, idle, stall)
    for index, ((a, b), (outputs, cycles, _)) in enumerate(zip(passes, results)):
        want = golden_tile(a[None], b[None], guard_bits, zero_block_cycles)
        want_bits = fp32_bits(want.outputs[0]).numpy().astype(np.int64)
        assert np.array_equal(outputs, want_bits), (index, [hex(v) for v in outputs.ravel()],
                                                    [hex(v) for v in want_bits.ravel()])
        assert cycles == int(want.cycles[0]), (index, cycles, int(want.cycles[0]))


def test_tile_runs_passes_back_to_back():
    """Without stalls consecutive results are exactly the later pass's cycle count apart: no bubbles."""
    dut = Tile(1, 2, 3, 3, 1)
    rng = np.random.default_rng(11)
    results = _simulate_tile(dut, _passes(rng, 3, [(1,), (2,)], 6), rng, idle=0.0, stall=0.0)
    times = [time for _, _, time in results]
    assert np.diff(times).tolist() == [cycles for _, cycles, _ in results[1:]]
