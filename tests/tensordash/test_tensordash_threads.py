"""The two-thread (C-slow) staging window in Amaranth's simulator against the reference model (SPEC section 3).

Thread t's stream carries passes t, t+2, ... of a tile's stream; every cycle the window issues is checked against
the reference schedule of its thread's passes alone (end of pass, every row's selects, the scheduled values and the
partner values at their original step and lane), and with full chunks and no stall the cycles on which each thread
decides are ``models.threads.interleave``'s, the stream lasting ``stream_cycles``.
"""

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
from amaranth.sim import Simulator

from dashraker.hw.tensordash import StagingWindow
from dashraker.models import tensordash as td
from dashraker.sim import codec
from dashraker.sim.amaranth_streams import stream_put
from dashraker.sim.stimulus import operand_bits

sys.path.insert(0, str(Path(__file__).parent))
from tensordash_stimulus import operands  # noqa: E402

THREADS = 2
OUTPUTS = ("row_picks", "row_operands", "col_window")


def run_window(window, a, b, count, sizes=None, idle=0.0, backpressure=0.0, seed=0):
    """Drive thread t's stream with passes t, t+2, ... of (a, b) (chunks of ``sizes`` steps, a random ``idle`` share
    of the source's cycles idle), ``en`` low in a random ``backpressure`` share of the cycles, until ``count`` cycles
    are issued; then 8 quiet cycles must issue none. Returns the clock edge, thread and end-of-pass bit of each
    issued cycle, and its outputs decoded (``OUTPUTS``)."""
    layout = window.steps[0].payload.shape()
    transfers = [codec.to_ints(codec.step_transfers(layout, operand_bits(a[t::THREADS], window.format),
                                                    operand_bits(b[t::THREADS], window.format),
                                                    None if sizes is None else iter(sizes[t])))
                 for t in range(THREADS)]
    issued = []

    def source(thread):
        async def put(ctx):
            await stream_put(ctx, window.steps[thread], transfers[thread], np.random.default_rng(seed + thread), idle)
        return put

    async def monitor(ctx):
        rng, edge = np.random.default_rng(seed + THREADS), 0
        while len(issued) < count or edge < issued[-1][0] + 8:
            ctx.set(window.en, int(rng.random() >= backpressure))
            _, _, valid, *sampled = await ctx.tick().sample(
                window.valid, window.thread, window.last, *(getattr(window, name).as_value() for name in OUTPUTS))
            edge += 1
            if valid:
                assert len(issued) < count, f"a cycle issued beyond the {count} expected, at clock edge {edge}"
                issued.append((edge, *sampled))

    sim = Simulator(window)
    sim.add_clock(1e-6)
    for thread in range(THREADS):
        sim.add_testbench(source(thread))
    sim.add_testbench(monitor)
    sim.run()
    edges, threads, lasts, *values = zip(*issued)
    decoded = {name: codec.decode(getattr(window, name).shape(), codec.from_ints(column, len(getattr(window, name).as_value())))
               for name, column in zip(OUTPUTS, values)}
    return np.array(edges), np.array(threads), np.array(lasts), decoded


def check_thread(window, a, b, got_lasts, got):
    """Every cycle one thread issued (its ends of pass, selects and values, in order) against the reference schedule
    of its passes ``a``, ``b`` alone; returns the passes' decisions."""
    sched = td.schedule(a.numpy(), window.pattern, window.lookahead, window.scheduler)
    a_bits, b_bits = operand_bits(a, window.format), operand_bits(b, window.format)
    step, lane = sched.source
    cycles = [(p, c) for p in range(len(a)) for c in range(sched.cycles[p])]
    assert len(got_lasts) == len(cycles), "issued cycles against the reference's decisions"
    rows, cols = np.arange(window.rows)[:, None], np.arange(window.cols)[:, None, None]
    for k, (p, c) in enumerate(cycles):
        select, s, i = sched.select[p, c], step[p, c], lane[p, c]
        idle = select < 0
        assert got_lasts[k] == (c == sched.cycles[p] - 1), (p, c)
        np.testing.assert_array_equal(got["row_picks"][k], np.where(idle, 0, 1 << select.astype(np.int64)),
                                      err_msg=f"selects of pass {p} cycle {c}")
        np.testing.assert_array_equal(got["row_operands"][k], np.where(idle, 0, a_bits[p, rows, s, i]),
                                      err_msg=f"scheduled values of pass {p} cycle {c}")
        partner = got["col_window"][k][cols, np.where(idle, 0, s - sched.head[p, c]), i]  # [cols, rows, lanes]
        np.testing.assert_array_equal(np.where(idle, 0, partner), np.where(idle, 0, b_bits[p, cols, s, i]),
                                      err_msg=f"partner values of pass {p} cycle {c}")
    return sched.cycles


def check_window(window, a, b, **stimulus):
    """Run the window on the passes of (a, b) and check each thread's cycles; returns the issued cycles' edges and
    threads, and every pass's decisions in stream order."""
    decisions = np.zeros(len(a), np.int64)
    for thread in range(THREADS):
        decisions[thread::THREADS] = td.schedule(a[thread::THREADS].numpy(), window.pattern, window.lookahead,
                                                 window.scheduler).cycles
    edges, threads, lasts, got = run_window(window, a, b, int(decisions.sum()), **stimulus)
    for thread in range(THREADS):
        mine = threads == thread
        check_thread(window, a[thread::THREADS], b[thread::THREADS], lasts[mine],
                     {name: value[mine] for name, value in got.items()})
    # Thread t decides only on the cycles of parity t (thread 0's first after reset).
    assert ((edges - threads) % THREADS == (edges[0] - threads[0]) % THREADS).all(), "a thread off its cycles"
    return edges, threads, decisions


def _window(scheduler="greedy"):
    return StagingWindow(2, 2, 8, 2, "T<2,5>", "bf16", scheduler, threads=THREADS)


def test_threads_back_to_back_take_the_interleaved_cycles():
    """Full chunks and no stall: every pass's decisions as alone, on interleave's cycles, stream_cycles long."""
    window = _window()
    a, b = operands("random75", passes=7, rows=2, cols=2, steps=9, lanes=8, fmt="bf16", seed=3)
    a[2] = 0  # an all-zero pass
    a[5] = operands("random0", passes=1, rows=2, cols=2, steps=9, lanes=8, fmt="bf16", seed=4)[0][0]  # dense
    edges, threads, decisions = check_window(window, a, b)
    laid = td.interleave(decisions, THREADS)
    expected = [(cycle, p % THREADS) for cycle, (p, _) in enumerate(laid) if p >= 0]
    assert list(zip((edges - edges[0]).tolist(), threads.tolist())) == expected
    assert edges[-1] - edges[0] + 1 == td.stream_cycles(decisions[:, None], THREADS)[0]


@pytest.mark.parametrize("case, steps", [("random50", 1), ("random75", 4), ("relu_activations", 3)])
def test_threads_with_partial_chunks_idle_and_backpressure(case, steps):
    """Passes shorter and longer than the window, chunks of 1..H+1 steps across pass ends, an idle source and a
    held ``en``: each thread's cycles are still its passes' own decisions."""
    window = _window()
    a, b = operands(case, passes=9, rows=2, cols=2, steps=steps, lanes=8, fmt="bf16", seed=steps)
    sizes = [itertools.cycle([3, 1, 2, 3, 3, 2, 1]), itertools.cycle([1, 2, 3])]
    check_window(window, a, b, sizes=sizes, idle=0.3, backpressure=0.4, seed=steps)
