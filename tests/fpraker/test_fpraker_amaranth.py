"""FPRaker RTL blocks in Amaranth's simulator, each against an independent Python reading of its contract.

The components are checked against the scalar reference (``fpraker_reference``:
NAF by the textbook digit loop, exact rationals, the frame window step by step)
and against the rules of their docstrings written out here with Python integers:
the decoder's lanes, the running exponent, the in-bound digits and frame moves of
the bounds unit, the front end's five stages (``_pe_steps``), the lanes' terms, the
PE's accumulator, the rounder, the sequencer's strobes and the output stage's
pipeline. The whole tile is checked against the golden model
(``dashraker.models.fpraker``).
"""

import operator
import re
from functools import reduce

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from dashraker.designs import FPRAKER
from dashraker.hw.fpraker import (Bounds, Decoder, ExponentUnit, FrontEnd, Lane, OutputStage, PE, Rounder, Sequencer,
                                  TermEncoder, Tile)
from dashraker.hw.fpraker.bounds import MOVE_LIMIT, lane_more_cycles
from dashraker.hw.fpraker.decoder import NO_EXPONENT
from dashraker.hw.fpraker.front_end import front_end_stages
from dashraker.hw.fpraker.lane import LANE_LATENCY
from dashraker.hw.reserved_queue import QUEUE_LATENCY
from dashraker.hw.fpraker.rounder import ROUNDER_LATENCY
from dashraker.hw.numerics.integer_rounder import IntegerRounder
from dashraker.models.fpraker import tile as golden_tile
from dashraker.models.numerics import fp32_bits
from dashraker.sim import codec
from dashraker.sim.amaranth_streams import stream_get, stream_put
from fpraker_reference import NAN, naf_terms, reference_pe, reference_round
from fpraker_stimulus import FIVE_TERM_SIGNIFICANDS, random_bits

MIXES = [(2, 0.0), (8, 0.3), (40, 0.5), (120, 0.2)]  # random_bits' (exponent spread, share of corner cases)
SPECIALS = ("nan", "pos_inf", "neg_inf")


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


def _digits(terms):
    """(plus, minus) digit masks of NAF ``terms`` [(t, sign)]."""
    return sum(1 << t for t, s in terms if s > 0), sum(1 << t for t, s in terms if s < 0)


def _product(a, b):
    """A bf16 pair as SPEC section 4 reads it: live or not, a's NAF terms, signed sig_b, Pe, special products."""
    (sa, ea, fa), (sb, eb, fb) = [(x >> 15, (x >> 7) & 0xFF, x & 0x7F) for x in (a, b)]
    zero = [ea == 0, eb == 0]
    inf = [ea == 255 and fa == 0, eb == 255 and fb == 0]
    nan_operand = (ea == 255 and fa != 0) or (eb == 255 and fb != 0)
    nan = nan_operand or (inf[0] and zero[1]) or (zero[0] and inf[1])
    live = not (any(zero) or any(inf) or nan_operand)
    sig_b = 0x80 | fb
    return {
        "live": live, "terms": naf_terms(0x80 | fa) if live else [], "b": -sig_b if sa ^ sb else sig_b,
        "exponent": ea + eb - 127 if live else None,
        "nan": nan, "pos_inf": any(inf) and not nan and not sa ^ sb, "neg_inf": any(inf) and not nan and sa ^ sb,
    }


def _in_bound(terms, d, guard_bits):
    """The terms of a lane ``d`` below ``E`` that reach the window: MSB first, up to the first that does not."""
    kept = []
    for t, s in terms:
        if d > t + 16 + guard_bits:
            break
        kept.append((t, s))
    return kept


def _thermometer(length):
    """``more``: bit j set when a step lasts more than j + 1 cycles."""
    return (1 << (max(length, 1) - 1)) - 1


def _pe_steps(a_steps, b_steps, guard_bits):
    """A Python model of the front end's five stages for one PE over one pass: per step the PE's step
    (``pe_step_layout`` fields), its length thermometer ``more`` and what the checks need (``E`` before and
    after, kept terms per lane)."""
    top, specials, steps = None, dict.fromkeys(SPECIALS, False), []
    for a_lanes, b_lanes in zip(a_steps, b_steps):
        products = [_product(int(a), int(b)) for a, b in zip(a_lanes, b_lanes)]
        exponents = [p["exponent"] for p in products if p["live"]]
        previous = top
        if exponents:
            top = max(exponents + ([] if top is None else [top]))
        specials = {k: specials[k] or any(p[k] for p in products) for k in SPECIALS}
        lanes, kept = [], []
        for p in products:
            terms = _in_bound(p["terms"], top - p["exponent"], guard_bits) if p["live"] else []
            plus, minus = _digits(terms)
            shift = 16 + guard_bits - (top - p["exponent"]) if terms else 0
            lanes.append({"plus": plus, "minus": minus, "b": p["b"] if terms else 0, "shift": shift})
            kept.append(terms)
        if top is None:
            frame = {"move": 0, "offset": 0, "frame": 0}
        else:
            move = MOVE_LIMIT if previous is None else min((top >> 3) - (previous >> 3), MOVE_LIMIT)
            frame = {"move": move, "offset": top & 7, "frame": top >> 3}
        step = {"lanes": lanes, "frame": frame, "specials": specials}
        steps.append({"step": step, "more": _thermometer(max(len(terms) for terms in kept)), "top": top,
                      "previous": previous, "kept": kept, "any_live": bool(exponents), "products": products})
    return steps


def _accumulator_bits(acc, guard_bits):
    """fp32 bits of an accumulator (``accumulator_layout`` fields): the specials, else the rounded U."""
    if acc["nan"] or (acc["pos_inf"] and acc["neg_inf"]):
        return NAN
    if acc["pos_inf"] or acc["neg_inf"]:
        return 0xFF800000 if acc["neg_inf"] else 0x7F800000
    return reference_round(acc["value"], acc["frame"] * 8, guard_bits)


def _get_accumulator(ctx, view):
    return {"value": ctx.get(view.value), "frame": ctx.get(view.frame),
            **{k: ctx.get(getattr(view.specials, k)) for k in SPECIALS}}


def _set_step(ctx, payload, a, b, last):
    """Drive a ``step_layout`` payload: bf16 bits ``a`` [R, N] and ``b`` [C, N], and ``last``."""
    for operands, values in ((payload.rows, a), (payload.cols, b)):
        for index, value in np.ndenumerate(values):
            ctx.set(operands[index[0]][index[1]].as_value(), int(value))
    ctx.set(payload.last, last)


@pytest.mark.parametrize("make, name, value", [
    (lambda: Lane(8), "guard_bits", 8), (lambda: Lane(-1), "guard_bits", -1),
    (lambda: ExponentUnit(0), "candidates", 0), (lambda: ExponentUnit(3), "candidates", 3),
    (lambda: Bounds(0, 3), "lanes", 0), (lambda: Bounds(4, 8), "guard_bits", 8),
    (lambda: FrontEnd(1, 0, 4, 3), "cols", 0), (lambda: FrontEnd(1, 1, 4, 1.5), "guard_bits", 1.5),
    (lambda: PE(0, 3), "lanes", 0), (lambda: PE(4, "3"), "guard_bits", "3"), (lambda: Decoder(0), "lanes", 0),
    (lambda: Decoder(1.5), "lanes", 1.5), (lambda: Sequencer(2), "zero_block_cycles", 2),
    (lambda: Sequencer(0), "zero_block_cycles", 0),
    (lambda: OutputStage(1, 1, 8, 8), "guard_bits", 8), (lambda: Rounder(True), "guard_bits", True),
    (lambda: Tile(1, 1, 0, 3, 1), "lanes", 0), (lambda: IntegerRounder(39, 12, 3), "width", 39),
    (lambda: IntegerRounder(64.0, 12, 3), "width", 64.0),
])
def test_components_reject_bad_parameters(make, name, value):
    with pytest.raises(ValueError, match=rf"^{name} must be .*, not {re.escape(repr(value))}$"):
        make()


def test_term_encoder_all_significands():
    dut = TermEncoder()

    async def bench(ctx):
        for x in range(256):
            ctx.set(dut.significand, x)
            assert (ctx.get(dut.plus), ctx.get(dut.minus)) == _digits(naf_terms(x)), x

    _run(dut, bench, clocked=False)


def test_decoder_decodes_every_lane():
    """A PE's lanes: NAF digits of ``a`` and ``Pe`` for live lanes, no digits and ``NO_EXPONENT`` for the
    others, the signed ``b``; the PE's specials and live flag."""
    lanes = 3
    dut = Decoder(lanes)
    rng = np.random.default_rng(6)

    async def bench(ctx):
        for index in range(150):
            spread, corner = MIXES[index % len(MIXES)]
            a, b = random_bits(rng, (lanes,), spread, corner), random_bits(rng, (lanes,), spread, corner)
            if index % 9 == 0:
                a[:] = a & 0x8000  # signed zeros: no live lane
            for n in range(lanes):
                ctx.set(dut.operands.a[n].as_value(), int(a[n]))
                ctx.set(dut.operands.b[n].as_value(), int(b[n]))
            products = [_product(int(a[n]), int(b[n])) for n in range(lanes)]
            for n, p in enumerate(products):
                lane, case = dut.decoded.lanes[n], (index, n, hex(a[n]), hex(b[n]))
                assert (ctx.get(lane.plus), ctx.get(lane.minus)) == _digits(p["terms"]), case
                assert ctx.get(lane.exponent) == (p["exponent"] if p["live"] else NO_EXPONENT), case
                if p["live"]:
                    assert ctx.get(lane.b) == p["b"], case
            assert ctx.get(dut.decoded.any_live) == any(p["live"] for p in products), index
            for k in SPECIALS:
                assert ctx.get(getattr(dut.decoded.specials, k)) == any(p[k] for p in products), (index, k)

    _run(dut, bench, clocked=False)


@pytest.mark.parametrize("candidates", [1, 2])
def test_exponent_unit_keeps_the_running_maximum_of_a_pass(candidates):
    """``exponent`` is the maximum of ``previous`` and the step's maxima; ``previous`` is the pass's maximum
    so far (``NO_EXPONENT`` at its start); the state moves only with ``take``, and ``last`` restarts it."""
    dut = ExponentUnit(candidates)
    rng = np.random.default_rng(candidates)

    async def bench(ctx):
        state = None  # the pass's maximum so far (None: no live lane yet, or a new pass)
        for cycle in range(400):
            maxima = [NO_EXPONENT if rng.random() < 0.3 else int(rng.integers(-125, 382)) for _ in range(candidates)]
            if cycle % 17 == 0 and state is not None:
                maxima[-1] = state  # ties
            take, last = rng.random() < 0.6, rng.random() < 0.2
            ctx.set(dut.maxima, maxima)
            ctx.set(dut.take, take)
            ctx.set(dut.last, last)
            previous = NO_EXPONENT if state is None else state
            assert ctx.get(dut.previous) == previous, cycle
            assert ctx.get(dut.exponent) == max(maxima + [previous]), cycle
            if take:
                live = [e for e in maxima + [previous] if e != NO_EXPONENT]
                state = None if last else max(live, default=None)
            await ctx.tick()

    _run(dut, bench)


@pytest.mark.parametrize("guard_bits", [0, 3, 7])
def test_bounds_keep_in_bound_digits_and_move_the_frame(guard_bits):
    """Each live lane keeps its digits with ``d <= t + 16 + G`` (``d = E - Pe``) and gets the shift
    ``16 + G - d``; the frame ``E >> 3``, the offset ``E & 7`` and the move (clamped) from ``previous``'s frame;
    ``lane_more_cycles`` ORed over the lanes is the thermometer of the most in-bound digits of a lane. Exponents
    down to -125."""
    lanes, g = 4, guard_bits
    dut = Bounds(lanes, g)
    m = Module()
    m.submodules.bounds = dut
    more = Signal(4)
    m.d.comb += more.eq(reduce(operator.or_, (lane_more_cycles(lane) for lane in dut.bounded)))
    rng = np.random.default_rng(10 + g)

    async def bench(ctx):
        for index in range(300):
            base = int(rng.integers(-125, 382))
            live = [rng.random() < 0.8 for _ in range(lanes)]
            exponents = [int(np.clip(base - rng.integers(0, [4, 40, 400][index % 3]), -125, 381)) if on else None
                         for on in live]
            significands = [int(rng.choice(FIVE_TERM_SIGNIFICANDS)) if rng.random() < 0.4
                            else int(rng.integers(0x80, 0x100)) for _ in range(lanes)]
            b = [int(rng.integers(0x80, 0x100)) * int(rng.choice([-1, 1])) for _ in range(lanes)]
            previous = None if index % 4 == 0 else int(np.clip(base + rng.integers(-40, 20), -125, 381))
            candidates = [e for e in exponents if e is not None] + ([] if previous is None else [previous])
            top = max(candidates, default=None)
            for n in range(lanes):
                plus, minus = _digits(naf_terms(significands[n]) if live[n] else [])
                ctx.set(dut.lanes[n], {"plus": plus, "minus": minus, "b": b[n],
                                       "exponent": NO_EXPONENT if exponents[n] is None else exponents[n]})
            ctx.set(dut.exponent, NO_EXPONENT if top is None else top)
            ctx.set(dut.previous, NO_EXPONENT if previous is None else previous)
            counts = []
            for n in range(lanes):
                bounded, case = dut.bounded[n], (index, n, exponents, previous, top)
                kept = _in_bound(naf_terms(significands[n]), top - exponents[n], g) if live[n] else []
                counts.append(len(kept))
                assert (ctx.get(bounded.plus), ctx.get(bounded.minus)) == _digits(kept), case
                assert ctx.get(bounded.b) == b[n], case
                if kept:
                    assert ctx.get(bounded.shift) == 16 + g - (top - exponents[n]), case
            assert ctx.get(more) == _thermometer(max(counts)), (index, counts)
            if top is not None:
                frame, case = dut.frame, (index, top, previous)
                assert ctx.get(frame.frame) == top // 8, case
                assert ctx.get(frame.offset) == top - 8 * (top // 8), case
                if previous is not None:
                    assert ctx.get(frame.move) == min(top // 8 - previous // 8, MOVE_LIMIT), case

    _run(m, bench, clocked=False)


@pytest.mark.parametrize("guard_bits", [0, 3, 7])
def test_lane_issues_in_bound_terms_most_significant_first(guard_bits):
    """Each active cycle issues the next kept digit ``s * 2**t``, MSB first: ``LANE_LATENCY`` edges later the
    contribution is ``floor(s * b * 2**(t + shift - 7))``, 0 after an idle cycle or with no digit left; steps
    are loaded in their predecessor's last active cycle or after idle cycles."""
    g = guard_bits
    dut = Lane(g)
    rng = np.random.default_rng(20 + g)
    steps = []
    for index in range(60):
        significand = [0x80, 0xFF, *FIVE_TERM_SIGNIFICANDS][index] if index < 10 else int(rng.integers(0x80, 0x100))
        b = [255, -255, 128, -128][index % 4] if index < 12 else int(rng.integers(0x80, 0x100) * rng.choice([-1, 1]))
        terms = naf_terms(significand)
        d = [0, terms[0][0] + 16 + g, terms[-1][0] + 16 + g, 40][index % 4] if index < 24 else int(rng.integers(0, 33))
        kept = _in_bound(terms, d, g) if index % 9 != 5 else []  # a lane that is not live holds no digits
        plus, minus = _digits(kept)
        steps.append(({"plus": plus, "minus": minus, "b": b, "shift": 16 + g - d},
                      [(s * b * 2 ** (t + 16 + g - d + 7)) >> 14 for t, s in kept]))  # floor(s*b*2**(t+shift-7))

    async def bench(ctx):
        expected = [0] * LANE_LATENCY  # the contribution due at each cycle
        held, index, cycle = [], 0, 0  # the loaded step's contributions still to issue
        load_now, drain = True, LANE_LATENCY + 1
        while drain:
            drain = drain - 1 if index == len(steps) and not held else LANE_LATENCY + 1
            active = index > 0 and rng.random() < 0.75
            remaining = len(held) - active  # digits left after this cycle
            load = index < len(steps) and (load_now or (remaining <= 0 and rng.random() < 0.5))
            ctx.set(dut.active, active)
            ctx.set(dut.load, load)
            if load:
                ctx.set(dut.step, steps[index][0])
            assert ctx.get(dut.contribution) == expected[cycle], (cycle, index)
            expected.append(held.pop(0) if active and held else 0)
            if load:
                held = list(steps[index][1])
                index += 1
            load_now = False
            await ctx.tick()
            cycle += 1

    _run(dut, bench)


@pytest.mark.parametrize("lanes, guard_bits", [(4, 3), (3, 0), (1, 7)])
def test_pe_accumulates_passes_like_the_reference(lanes, guard_bits):
    """Steps of random and corner-case passes (made by ``_pe_steps``), driven as the sequencer drives them:
    loaded back to back or after idle cycles, each active for its length; ``done`` comes ``latency`` edges
    after a pass's last active cycle, and its accumulator, rounded, is ``reference_pe``'s result."""
    dut = PE(lanes, guard_bits)
    rng = np.random.default_rng(30 + lanes + guard_bits)
    passes = _passes(rng, lanes, [(), ()], 24)
    rising = np.array([[0x8000 | (20 << 7) | 0x55] * lanes, [(240 << 7) | 0x2B] * lanes, [(250 << 7) | 0x7F] * lanes])
    passes.append((rising, np.full((3, lanes), 127 << 7)))  # a negative U moved out of its frame: -1, then added to
    loads = []  # per step: the PE's step, the strobes of its active cycles, idle cycles after it
    for a, b in passes:
        for k, step in enumerate(_pe_steps(a, b, guard_bits)):
            length = max(len(terms) for terms in step["kept"]) or 1
            cycles = [{"active": 1, "first": int(j == 0), "pass_start": int(j == 0 and k == 0),
                       "pass_end": int(j == length - 1 and k == len(a) - 1)} for j in range(length)]
            loads.append((step["step"], cycles, int(rng.integers(0, 3)) if rng.random() < 0.3 else 0))
    schedule = [{"load": 1, "step": loads[0][0]}]  # per cycle: the control strobes, the step loaded
    for index, (_, cycles, idle) in enumerate(loads):
        gap = [{} for _ in range(idle)]
        if index + 1 < len(loads):  # the next step is loaded in the last active cycle, or after idle cycles
            (gap or cycles)[-1].update(load=1, step=loads[index + 1][0])
        schedule += cycles + gap
    schedule += [{}] * (dut.latency + 2)

    async def bench(ctx):
        ends = [cycle for cycle, strobes in enumerate(schedule) if strobes.get("pass_end")]
        results = iter(reference_pe(a.tolist(), b.tolist(), guard_bits)[0] for a, b in passes)
        for cycle, strobes in enumerate(schedule):
            for name in ("load", "active", "first", "pass_start", "pass_end"):
                ctx.set(getattr(dut.control, name), strobes.get(name, 0))
            if "step" in strobes:
                ctx.set(dut.step, strobes["step"])
            done = cycle - dut.latency in ends
            assert ctx.get(dut.done) == done, cycle
            if done:
                result = _get_accumulator(ctx, dut.result)
                want = next(results)
                assert _accumulator_bits(result, guard_bits) == want, (cycle, result, hex(want))
            await ctx.tick()
        assert next(results, None) is None

    _run(dut, bench)


def _random_accumulator(rng, special_share):
    """A PE's accumulator: U of any magnitude up to 64 bits, a frame of reachable exponents, rare specials."""
    value = int(rng.integers(-(1 << 63), 1 << 63, dtype=np.int64)) >> int(rng.integers(0, 64))
    special = rng.random() < special_share
    return {"value": value, "frame": int(rng.integers(-20, 60)),
            **{k: bool(special and rng.random() < share) for k, share in zip(SPECIALS, (0.3, 0.6, 0.5))}}


def test_rounder_rounds_u_in_its_frame_to_fp32():
    """``U * 2**(8 * frame - 150 - G)`` to nearest even (reference rounding), with FTZ and overflow, and the
    specials, ``ROUNDER_LATENCY`` edges after ``valid``, one value per cycle with gaps."""
    g = 3
    dut = Rounder(g)
    rng = np.random.default_rng(40)
    values = [0, 1, -1, 2, -2, 3, (1 << 63) - 1, -(1 << 63), -(1 << 63) + 1, (1 << 62) + 1]
    values += [sign * ((1 << k) - 1) for k in range(1, 64) for sign in (1, -1)]  # all ones: the exact-MSB case
    values += [-(1 << k) for k in range(63)] + [(1 << k) + (1 << max(k - 24, 0)) for k in range(63)]  # ties
    accumulators = [{"value": v, "frame": int(rng.integers(-20, 60)), **dict.fromkeys(SPECIALS, False)}
                    for v in values]
    accumulators += [{"value": v, "frame": f, **dict.fromkeys(SPECIALS, False)}  # around FTZ and overflow
                     for v in (1, -1, (1 << 63) - 1, -(1 << 63), 0xFFFFFF << 39, -(0xFFFFFF << 39))
                     for f in (-20, -6, -5, -4, -3, 27, 28, 29, 30, 41, 42, 47, 48, 55, 59)]
    accumulators += [{"value": sign * ((1 << 25) - 1) << shift, "frame": frame, **dict.fromkeys(SPECIALS, False)}
                     for shift, frame in ((34, -4), (32, 28)) for sign in (1, -1)]  # rounded into normal / Inf
    accumulators += [_random_accumulator(rng, 0.1) for _ in range(300)]
    accumulators += [{"value": int(rng.integers(-99, 99)), "frame": 5, "nan": nan, "pos_inf": pos, "neg_inf": neg}
                     for nan, pos, neg in [(1, 0, 0), (0, 1, 1), (0, 1, 0), (0, 0, 1), (1, 1, 1)]]

    async def bench(ctx):
        expected = [None] * ROUNDER_LATENCY  # per cycle: the fp32 bits due, None for no result
        pending = list(accumulators)
        cycle = 0
        while pending or any(e is not None for e in expected[cycle:]):
            valid = bool(pending) and rng.random() < 0.8
            ctx.set(dut.valid, valid)
            if valid:
                acc = pending.pop(0)
                ctx.set(dut.accumulator, {"value": acc["value"], "frame": acc["frame"],
                                          "specials": {k: acc[k] for k in SPECIALS}})
            want = expected[cycle]
            assert ctx.get(dut.result_valid) == (want is not None), cycle
            if want is not None:
                assert ctx.get(dut.result.as_value()) == want[0], (cycle, want[1], hex(want[0]),
                                                                   hex(ctx.get(dut.result.as_value())))
            expected.append((_accumulator_bits(acc, g), acc) if valid else None)
            await ctx.tick()
            cycle += 1

    _run(dut, bench)


def test_sequencer_runs_steps_back_to_back_and_counts_cycles():
    """Steps of known lengths (their ``more`` thermometers): each is loaded once, at a clock edge where no step
    runs or the running one finishes, then active exactly its length with ``first`` on its first cycle,
    ``pass_start`` on a pass's first and ``pass_end`` on a pass's last cycle, which waits for ``room``; ``cycles``
    then counts the pass's active cycles, one for each step without a live lane too (``zero_block_cycles=1``)."""
    dut = Sequencer(1)
    rng = np.random.default_rng(51)
    steps = []
    for _ in range(120):
        any_live = rng.random() < 0.8
        steps.append({"length": int(rng.integers(1, 6)) if any_live else 1, "last": bool(rng.random() < 0.3)})
    steps[-1]["last"] = True

    async def bench(ctx):
        offered, cycle = 0, 0
        running = None  # the loaded step and its active cycles so far
        fresh, pass_cycles, passes = True, 0, 0
        while offered < len(steps) or running is not None:
            valid = offered < len(steps) and rng.random() < (0.3 if (cycle // 40) % 2 else 0.95)
            step = steps[min(offered, len(steps) - 1)]
            ctx.set(dut.valid, valid)
            ctx.set(dut.last, step["last"])
            ctx.set(dut.more, _thermometer(step["length"]))
            room = (cycle // 25) % 3 != 2 or rng.random() < 0.3
            ctx.set(dut.room, room)
            control = {name: ctx.get(getattr(dut.control, name))
                       for name in ("load", "active", "first", "pass_start", "pass_end")}
            ending = running is not None and running["done"] + 1 == running["length"]
            hold = ending and running["last"] and not room  # a pass ends only with room for its results
            finish = ending and not hold
            assert control["active"] == (running is not None and not hold), cycle
            assert control["first"] == (running is not None and running["done"] == 0), cycle
            assert control["pass_start"] == (control["first"] and running["starts"]), cycle
            assert control["pass_end"] == (finish and running["last"]), cycle
            assert ctx.get(dut.ready) == (running is None or finish), cycle
            assert control["load"] == (valid and (running is None or finish)), cycle
            if control["active"]:
                pass_cycles += 1
                running["done"] += 1
            if control["pass_end"]:
                assert ctx.get(dut.cycles) == pass_cycles, cycle
                pass_cycles, passes = 0, passes + 1
            if finish:
                running = None
            if control["load"]:
                running = {**step, "done": 0, "starts": fresh}
                fresh = step["last"]
                offered += 1
            await ctx.tick()
            cycle += 1
        assert passes == sum(step["last"] for step in steps)

    _run(dut, bench)


def test_output_stage_rounds_captured_passes_in_order():
    """Passes reserve a queue entry when they end (only with ``room``) and are captured a few cycles later, as
    the PEs' pipelines deliver them; they come out rounded (reference rounding) with their cycle count, in
    order, ``ROUNDER_LATENCY + QUEUE_LATENCY`` edges after their capture at the earliest, none lost while the sink stalls;
    every copy of ``room`` is low exactly when fewer than two entries were free a cycle before (so that one is
    free whatever that cycle reserved)."""
    rows, cols, lanes, g = 2, 2, 8, 3
    dut = OutputStage(rows, cols, lanes, g)
    rng = np.random.default_rng(8)
    delay = 4  # cycles from a pass's end to its capture, as the PEs' pipelines take

    async def bench(ctx):
        ending = []  # capture cycles of the passes that reserved an entry
        queued = []  # (capture cycle, outputs, cycles) in the stage, oldest first
        reserved = delivered = 0
        reserved_before = 0  # at the previous cycle
        for cycle in range(400):
            ready = (cycle // 50) % 2 == 0 or rng.random() < 0.2
            ctx.set(dut.results.ready, ready)
            room = reserved_before <= dut.depth - 2
            copies = [ctx.get(dut.room[r][c]) for r in range(rows) for c in range(cols)]
            assert copies == [room] * (rows * cols), cycle
            reserved_before = reserved
            reserve = room and rng.random() < 0.7
            ctx.set(dut.reserve, reserve)
            capture = bool(ending) and ending[0] == cycle
            accumulators = [[_random_accumulator(rng, 0.15) for _ in range(cols)] for _ in range(rows)]
            cycles = int(rng.integers(0, 1 << 32))
            ctx.set(dut.accumulators, [[{"value": acc["value"], "frame": acc["frame"],
                                         "specials": {k: acc[k] for k in SPECIALS}} for acc in row]
                                       for row in accumulators])
            ctx.set(dut.cycles, cycles)
            ctx.set(dut.capture, capture)
            if ctx.get(dut.results.valid) and ready:
                captured_at, outputs, want_cycles = queued.pop(0)
                payload = dut.results.payload
                got = [[ctx.get(payload.outputs[r][c].as_value()) for c in range(cols)] for r in range(rows)]
                assert got == outputs, (cycle, [[hex(v) for v in row] for row in got])
                assert ctx.get(payload.cycles) == want_cycles, cycle
                assert cycle - captured_at >= ROUNDER_LATENCY + QUEUE_LATENCY, cycle
                reserved, delivered = reserved - 1, delivered + 1
            if capture:
                ending.pop(0)
                queued.append((cycle, [[_accumulator_bits(acc, g) for acc in row] for row in accumulators], cycles))
            if reserve:
                ending.append(cycle + delay)
                reserved += 1
            await ctx.tick()
        assert delivered > 150

    _run(dut, bench)


@pytest.mark.parametrize("lanes", [3, 8])
def test_front_end_streams_every_step_once_in_order(lanes):
    """Steps through the stages with an idle source and a stalling consumer: each comes
    out once, in order, ``front_end_stages(lanes)`` edges after its transfer at the earliest, on every PE's
    stream at once, with the in-bound digits, shifts, frame, pass specials and length that ``_pe_steps`` predicts
    for every PE."""
    rows, cols, g = 2, 2, 3
    dut = FrontEnd(rows, cols, lanes, g)
    rng = np.random.default_rng(60)
    passes = _passes(rng, lanes, [(rows,), (cols,)], 6)
    a, b = random_bits(rng, (rows, 4, lanes), 8, 0.0), random_bits(rng, (cols, 4, lanes), 8, 0.0)
    a[0, 0, 0], a[1, 1, 1], b[0, 2, 2] = 0x7FC1, 0x7F80, 0xFF80  # specials early in a pass stay to its end
    passes.insert(1, (a, b))
    steps = []  # (a [R, N], b [C, N], last, expected per PE [r][c], any_live)
    for a, b in passes:
        models = [[_pe_steps(a[r], b[c], g) for c in range(cols)] for r in range(rows)]
        for k in range(a.shape[1]):
            pes = [[models[r][c][k] for c in range(cols)] for r in range(rows)]
            steps.append((a[:, k], b[:, k], k == a.shape[1] - 1, pes, any(pe["any_live"] for row in pes for pe in row)))

    def check(ctx, index):
        _, _, last, pes, any_live = steps[index]
        for r in range(rows):
            for c in range(cols):
                payload, want, case = dut.scheduled[r][c].payload, pes[r][c], (index, r, c)
                assert (ctx.get(payload.last), ctx.get(payload.any_live)) == (last, any_live), case
                assert ctx.get(payload.more) == max(pe["more"] for row in pes for pe in row), case
                got = payload.step
                for n, lane in enumerate(want["step"]["lanes"]):
                    bounded = got.lanes[n]
                    assert (ctx.get(bounded.plus), ctx.get(bounded.minus)) == (lane["plus"], lane["minus"]), case
                    if want["kept"][n]:
                        assert (ctx.get(bounded.b), ctx.get(bounded.shift)) == (lane["b"], lane["shift"]), case
                frame = want["step"]["frame"]
                if want["top"] is not None:
                    assert (ctx.get(got.frame.frame), ctx.get(got.frame.offset)) == (frame["frame"],
                                                                                     frame["offset"]), case
                if want["previous"] is not None:
                    assert ctx.get(got.frame.move) == frame["move"], case
                assert {k: ctx.get(getattr(got.specials, k)) for k in SPECIALS} == want["step"]["specials"], case

    def scheduled_valid(ctx):
        """Whether a step waits: every PE's stream says the same (they are taken in lockstep)."""
        valid = {ctx.get(dut.scheduled[r][c].valid) for r in range(rows) for c in range(cols)}
        assert len(valid) == 1, valid
        return valid.pop()

    def set_ready(ctx, ready):
        for r in range(rows):
            for c in range(cols):
                ctx.set(dut.scheduled[r][c].ready, ready)

    async def bench(ctx):
        sent, received, cycle, sent_at = 0, 0, 0, []
        while received < len(steps):
            valid = sent < len(steps) and rng.random() < 0.7
            ready = rng.random() < (0.3 if (cycle // 30) % 2 else 0.9)
            ctx.set(dut.steps.valid, valid)
            if valid:
                a, b, last, _, _ = steps[sent]
                _set_step(ctx, dut.steps.payload, a, b, last)
            set_ready(ctx, ready)
            if scheduled_valid(ctx) and ready:
                check(ctx, received)
                assert cycle - sent_at[received] >= front_end_stages(lanes), (received, cycle)
                received += 1
            if valid and ctx.get(dut.steps.ready):
                sent_at.append(cycle)
                sent += 1
            await ctx.tick()
            cycle += 1
        set_ready(ctx, 1)
        ctx.set(dut.steps.valid, 0)
        for _ in range(front_end_stages(lanes) + 2):  # nothing beyond the steps sent
            assert not scheduled_valid(ctx)
            await ctx.tick()

    _run(dut, bench)


def _simulate_tile(dut, passes, rng, idle, backpressure):
    """Stream the passes (``idle``: share of cycles the source waits, ``backpressure``: the sink's); returns every
    result as (outputs bits [R, C], cycles, clock edge it was taken on; the first step can go on edge 1)."""
    layout = dut.steps.payload.shape()
    steps = [payload for a, b in passes for payload in codec.to_ints(codec.step_transfers(layout, a[None], b[None]))]
    received = {}

    async def source(ctx):
        await stream_put(ctx, dut.steps, steps, rng, idle)

    async def sink(ctx):
        received["results"] = await stream_get(ctx, dut.results, len(passes), rng, backpressure)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run()
    payloads, edges = received["results"]
    result_layout = dut.results.payload.shape()
    results = codec.decode(result_layout, codec.from_ints(payloads, result_layout.size))
    return list(zip(results["outputs"], results["cycles"], edges))


@pytest.mark.parametrize("rows, cols, lanes, guard_bits, zero_block_cycles, idle, backpressure", [
    (1, 2, 4, 0, 1, 0.3, 0.3),
    (2, 1, 3, 7, 1, 0.2, 0.5),
    (1, 1, 1, 3, 1, 0.0, 0.0),
])
def test_tile_matches_golden_model(rows, cols, lanes, guard_bits, zero_block_cycles, idle, backpressure):
    dut = Tile(rows, cols, lanes, guard_bits, zero_block_cycles)
    rng = np.random.default_rng(rows * 100 + cols * 10 + lanes)
    passes = _passes(rng, lanes, [(rows,), (cols,)], 8)
    results = _simulate_tile(dut, passes, rng, idle, backpressure)
    for index, ((a, b), (outputs, cycles, _)) in enumerate(zip(passes, results)):
        want = golden_tile(a[None], b[None], guard_bits, zero_block_cycles)
        want_bits = fp32_bits(want.outputs[0]).numpy().astype(np.int64)
        assert np.array_equal(outputs, want_bits), (index, [hex(v) for v in outputs.ravel()],
                                                    [hex(v) for v in want_bits.ravel()])
        assert cycles == int(want.cycles[0]), (index, cycles, int(want.cycles[0]))


def test_tile_runs_passes_back_to_back():
    """Without stalls consecutive results are exactly the later pass's cycle count apart: no bubbles; the first,
    40 steps of one cycle, comes ``fill`` clock edges after the first step's transfer beyond its own cycles (the
    mapper's fill): the front end keeps up with a step per cycle."""
    for lanes in (3, 8):
        dut = Tile(1, 2, lanes, 3, 1)
        rng = np.random.default_rng(11)
        ones = np.full((1, 40, lanes), 127 << 7)  # one term each: 40 steps of one cycle, back to back
        passes = [(ones, np.concatenate([ones, ones])), *_passes(rng, lanes, [(1,), (2,)], 6)]
        results = _simulate_tile(dut, passes, rng, idle=0.0, backpressure=0.0)
        assert results[0][1] == 40
        times = [time for _, _, time in results]
        assert np.diff(times).tolist() == [cycles for _, cycles, _ in results[1:]]
        # the first step goes on clock edge 1
        assert times[0] - 1 == results[0][1] + dut.fill == results[0][1] + FPRAKER.fill(FPRAKER.params(lanes=lanes))
