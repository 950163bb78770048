"""The reserved queue every tile shares: its parameters checked, its entries in order under stalls, its depth's
terms enough (and no more) for a consumer that is always ready."""

import numpy as np
import pytest
from amaranth.lib import data
from amaranth.sim import Simulator

from dashraker.hw.reserved_queue import OUTPUT_EDGES, QUEUE_LATENCY, STORAGE_EDGES, ReservedQueue

ENTRY = data.StructLayout({"n": 16})

# (in_flight, late, room_late, spare, buffered): the tiles' (baseline and TensorDash; FPRaker's results; FPRaker's
# front end) and their neighbours
CASES = [(3, 1, 0, 3, True), (5, 0, 1, 1, True), (4, 0, 0, 0, False), (1, 0, 0, 0, True), (2, 2, 1, 0, False)]


@pytest.mark.parametrize("arguments, message", [
    (dict(in_flight=0), "in_flight must be an integer of at least 1, not 0"),
    (dict(in_flight=2, late=-1), "late must be an integer of at least 0, not -1"),
    (dict(in_flight=2, spare=1.5), "spare must be an integer of at least 0, not 1.5"),
    (dict(in_flight=2, copies=True), "copies must be an integer of at least 1, not True"),
    (dict(in_flight=2, room_late=2), "room_late must be 0 or 1, not 2"),
    (dict(in_flight=2, buffered=1), "buffered must be a bool, not 1"),
])
def test_bad_parameters_are_refused(arguments, message):
    with pytest.raises((ValueError, TypeError), match=message):
        ReservedQueue(ENTRY, **arguments)


def test_a_layout_is_required():
    with pytest.raises(TypeError, match="layout must be a data.Layout, not 16"):
        ReservedQueue(16, in_flight=2)


def _run(dut, ready, cycles, pipeline, seed=1):
    """Work offered every cycle, accepted with ``room``, reserved ``late`` cycles after, pushed ``pipeline`` edges
    after its acceptance; ``ready(cycle, rng)`` the consumer's. Checks that entries leave in order, none lost,
    ``latency`` edges after their push at the earliest; returns the cycles in which work was refused and each
    entry's (push, pop) cycles."""
    rng = np.random.default_rng(seed)
    refused, pushed_at, popped_at = [], {}, []

    async def bench(ctx):
        accepted = []  # cycles of acceptance, oldest first
        for cycle in range(cycles):
            consumer = ready(cycle, rng)
            ctx.set(dut.pop.ready, consumer)
            rooms = [ctx.get(dut.room[k]) for k in range(dut.copies)]
            assert rooms == [rooms[0]] * dut.copies, cycle
            if rooms[0]:
                accepted.append(cycle)
            else:
                refused.append(cycle)
            ctx.set(dut.reserve, cycle - dut.late in accepted)
            pushing = cycle - pipeline in accepted
            ctx.set(dut.push.valid, pushing)
            if pushing:
                n = accepted.index(cycle - pipeline)
                ctx.set(dut.push.payload.n, n)
                pushed_at[n] = cycle
            if ctx.get(dut.pop.valid) and consumer:
                assert ctx.get(dut.pop.payload.n) == len(popped_at), cycle
                assert cycle - pushed_at[len(popped_at)] >= dut.latency, cycle
                popped_at.append(cycle)
            assert ctx.get(dut.push.ready)
            await ctx.tick()
        assert len(popped_at) >= len(pushed_at) - dut.depth  # nothing lost: the rest still queued

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return refused, [(pushed_at[n], cycle) for n, cycle in enumerate(popped_at)]


@pytest.mark.parametrize("in_flight, late, room_late, spare, buffered", CASES)
def test_entries_leave_in_order_under_stalls(in_flight, late, room_late, spare, buffered):
    """Long stalls, random ready and always ready in turn: every entry out once, in order; the work refused only
    while the queue is full of reservations."""
    dut = ReservedQueue(ENTRY, in_flight=in_flight, late=late, room_late=room_late, spare=spare, buffered=buffered,
                        copies=3)
    refused, entries = _run(dut, lambda cycle, rng: [True, False, rng.random() < 0.5][cycle // 40 % 3], 600,
                            in_flight - 1)
    assert refused and len(entries) > 250


@pytest.mark.parametrize("in_flight, late, room_late, spare, buffered", CASES)
def test_always_ready_consumer_never_throttles(in_flight, late, room_late, spare, buffered):
    """With no spare entry the depth's terms (``in_flight + latency + room_late``) let work be accepted every cycle
    and every entry leave ``latency`` edges after its push; a pipeline one edge longer than ``in_flight`` says is
    throttled."""
    dut = ReservedQueue(ENTRY, in_flight=in_flight, late=late, room_late=room_late, buffered=buffered)
    assert dut.latency == (QUEUE_LATENCY if buffered else STORAGE_EDGES) == STORAGE_EDGES + OUTPUT_EDGES * buffered
    assert dut.depth == in_flight + dut.latency + room_late
    refused, entries = _run(dut, lambda cycle, rng: True, 80, in_flight - 1)
    assert refused == [] and all(pop - push == dut.latency for push, pop in entries)
    dut = ReservedQueue(ENTRY, in_flight=in_flight, late=late, room_late=room_late, buffered=buffered)
    refused, _ = _run(dut, lambda cycle, rng: True, 80, in_flight)
    assert refused
