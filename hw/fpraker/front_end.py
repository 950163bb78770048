"""The FPRaker tile's front end: steps decoded, aligned and bounded in a pipeline, ahead of the PEs."""

import operator
from functools import reduce

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import FPRAKER_MAX_TERMS as MAX_TERMS
from dashraker.hw.checks import check_count
from dashraker.hw.fpraker.bounds import MAX_GUARD_BITS, Bounds, bounded_lane_layout, frame_layout, lane_more_cycles
from dashraker.hw.fpraker.decoder import EXPONENT_BITS, Decoder, decoded_layout, operands_layout, specials_layout
from dashraker.hw.fpraker.exponent_unit import ExponentUnit, maximum
from dashraker.hw.reserved_queue import STORAGE_EDGES, ReservedQueue
from dashraker.hw.tile_stream import step_layout

__all__ = ["front_end_stages", "pe_step_layout", "pe_scheduled_layout", "FrontEnd"]


def _maximum_levels(lanes):
    """Comparator levels that bring ``lanes`` exponents down to the exponent unit's two candidates."""
    return max(0, (lanes - 1).bit_length() - 1)


# Registers a step passes through, stage by stage (``FrontEnd``'s methods; elaboration checks their sum).
DECODE_EDGES = 3  # the operands taken, their second copy, decoded
ALIGN_EDGES = 1  # after the running exponent
BOUND_EDGES = 1  # after the bounds
LENGTH_EDGES = 2  # after the lanes' lengths and after the PE's (beside two more registers of the bounded step)
QUEUE_EDGES = STORAGE_EDGES  # the queues' write (they have no output register)


def front_end_stages(lanes):
    """Clock edges from a step's transfer to its transfer out at the earliest: the stages' registers (one per
    comparator level of the lane maxima) and the queue's."""
    return DECODE_EDGES + _maximum_levels(lanes) + ALIGN_EDGES + BOUND_EDGES + LENGTH_EDGES + QUEUE_EDGES


def pe_step_layout(lanes):
    """A PE's step as it enters the PE: bounded lanes, frame, the pass's specials so far."""
    return data.StructLayout({
        "lanes": data.ArrayLayout(bounded_lane_layout(), lanes),
        "frame": frame_layout(),
        "specials": specials_layout(),
    })


def _tile_step_layout(pe, rows, cols, **fields):
    """A step of the tile: every PE's part ``pe`` [row][col], whether any PE has a live lane, end of pass, and
    ``fields``."""
    return data.StructLayout({
        "pes": data.ArrayLayout(data.ArrayLayout(pe, cols), rows),
        "any_live": 1,
        "last": 1,
        **fields,
    })


def pe_scheduled_layout(lanes):
    """A step ready for a PE and its sequencer: the PE's step, and the tile's: whether any PE has a live lane,
    end of pass, and the step's length as a thermometer (bit j: some lane of some PE holds more than j + 1
    terms)."""
    return data.StructLayout({"step": pe_step_layout(lanes), "any_live": 1, "last": 1, "more": MAX_TERMS - 1})


class FrontEnd(wiring.Component):
    """Registered stages between the tile's ``steps`` and the PEs' sequencers, and a queue of the steps they make
    for each PE.

    1. Each PE's operands, registered twice as the step is taken (a copy per PE: the
       tile's input reaches the PEs by nets with no logic on them, in two hops); the
       PE's ``Decoder``: NAF digits, signed ``b``, product exponents, specials.
    2. Each PE's lane exponents reduced to two maxima, one comparator level per stage.
    3. ``ExponentUnit``: each PE's running maximum ``E``; the pass's specials so far.
    4. ``Bounds``: in-bound digits, lane shifts, the frame's move.
    5. Each lane's length (``lane_more_cycles``), then their OR, the PE's step length,
       each registered, beside two more registers of each PE's bounded step (the way to
       its queue); ORed over the PEs into the step's length as it enters the queues.

    Everything the PEs' accumulators need is thus known before a step starts: the
    only loops here are the 12-bit running maximum and the sticky specials. The
    stages have no enable (an enable would reach every register of every PE's lanes
    from the sequencer in one cycle): a step is taken only when an entry of the
    queues behind them is free for it, and each queue holds as many steps as the
    stages and itself take to pass one, so a steady input gives a steady output.
    Each PE has its own queue and stream (each PE has its own sequencer), so that no
    queue's pointers or read enable reach across the tile; the PEs' streams must be
    taken in lockstep (the sequencers are identical), and the first PE's ``room``
    gates the tile's ``steps``. The queues are reserved queues (``ReservedQueue``)
    without an output register (each PE registers its step).

    Attributes
    ----------
    depth : int
        The queues' entries.

    Parameters
    ----------
    rows, cols, lanes, guard_bits :
        As the tile's.

    Ports
    -----
    steps : In(stream.Signature(step_layout(rows, cols, lanes, "bf16")))
        One step per transfer; ``last`` closes a pass.
    scheduled : Out(stream.Signature(pe_scheduled_layout(lanes))).array(rows, cols)
        Each PE's part of the steps, ``front_end_stages(lanes)`` clock edges later at the earliest; taken in
        lockstep.
    """

    def __init__(self, rows, cols, lanes, guard_bits):
        for name, value in (("rows", rows), ("cols", cols), ("lanes", lanes)):
            check_count(name, value)
        check_count("guard_bits", guard_bits, 0, MAX_GUARD_BITS)
        self.rows, self.cols, self.lanes, self.guard_bits = rows, cols, lanes, guard_bits
        self._queues = {(r, c): self._pe_queue() for r, c in self._pes()}
        self.depth = self._queues[0, 0].depth
        super().__init__({
            "steps": In(stream.Signature(step_layout(rows, cols, lanes, "bf16"))),
            "scheduled": Out(stream.Signature(pe_scheduled_layout(lanes))).array(rows, cols),
        })

    def elaborate(self, platform):
        m = Module()
        self._edges = 0  # registers on the steps' way through the stages, checked against ``front_end_stages``
        decoded, decoded_valid = self._decode(m)
        reduced, reduced_valid, maxima = self._reduce(m, decoded, decoded_valid)
        aligned, aligned_valid, exponents = self._align(m, reduced, reduced_valid, maxima)
        bounded, bounded_valid = self._bound(m, aligned, aligned_valid, exponents)
        self._queue(m, bounded, bounded_valid)
        assert self._edges + QUEUE_EDGES == front_end_stages(self.lanes)
        return m

    def _pes(self):
        return [(r, c) for r in range(self.rows) for c in range(self.cols)]

    def _decode(self, m):
        """Stage 1: two copies of its operands per PE, one after the other (marked ``keep``: the FPGA flow keeps such
        copies apart), decoded."""
        step = self.steps.payload
        received_last, received_valid = self._stage(m, step.last, self.steps.valid & self.steps.ready,
                                                    "received_last")
        taken_last, taken_valid = self._stage(m, received_last, received_valid, "taken_last")
        decoding = Signal(data.ArrayLayout(data.ArrayLayout(decoded_layout(self.lanes), self.cols), self.rows))
        for r, c in self._pes():
            received = Signal(operands_layout(self.lanes), name=f"received{r}_{c}", attrs={"keep": 1})
            operands = Signal(operands_layout(self.lanes), name=f"taken{r}_{c}", attrs={"keep": 1})
            m.d.sync += [received.a.eq(step.rows[r]), received.b.eq(step.cols[c]), operands.eq(received)]
            decoder = m.submodules[f"decoder{r}_{c}"] = Decoder(self.lanes)
            m.d.comb += [decoder.operands.eq(operands), decoding[r][c].eq(decoder.decoded)]
        decoded_pes, decoded_valid = self._stage(m, decoding, taken_valid, "decoded")
        decoded = Signal(_tile_step_layout(decoded_layout(self.lanes), self.rows, self.cols))
        m.d.comb += [
            decoded.pes.eq(decoded_pes),
            decoded.any_live.eq(Cat(*(decoded_pes[r][c].any_live for r, c in self._pes())).any()),
            decoded.last.eq(self._stage(m, taken_last, None, "decoded_last")[0]),
        ]
        return decoded, decoded_valid

    def _reduce(self, m, decoded, decoded_valid):
        """Stage 2: each PE's lane exponents reduced to the exponent unit's candidates, one comparator level per
        register; returns the step, its valid and each PE's maxima [row][col]."""
        levels = [[[lane.exponent for lane in decoded.pes[r][c].lanes] for c in range(self.cols)]
                  for r in range(self.rows)]
        reduced, reduced_valid = decoded, decoded_valid
        for level in range(_maximum_levels(self.lanes)):
            for r, c in self._pes():
                values = levels[r][c]
                levels[r][c] = [self._stage(m, maximum(values[i:i + 2]), None, f"maximum{r}_{c}_{level}_{i}")[0]
                                for i in range(0, len(values), 2)]
            reduced, reduced_valid = self._stage(m, reduced, reduced_valid, f"reduced{level}")
        return reduced, reduced_valid, levels

    def _align(self, m, reduced, reduced_valid, maxima):
        """Stage 3: the running exponent ``E`` and the pass's specials so far; returns the step, its valid and each
        PE's exponents (``exponent``, ``previous``, ``specials``), registered."""
        take = reduced_valid
        exponents = Signal(data.ArrayLayout(data.ArrayLayout(data.StructLayout({
            "exponent": signed(EXPONENT_BITS), "previous": signed(EXPONENT_BITS),
            "specials": specials_layout()}), self.cols), self.rows))
        fresh = Signal(init=1)  # the next step starts a pass
        with m.If(take):
            m.d.sync += fresh.eq(reduced.last)
        for r, c in self._pes():
            unit = m.submodules[f"exponent_unit{r}_{c}"] = ExponentUnit(min(2, self.lanes))
            sticky = Signal(specials_layout(), name=f"sticky{r}_{c}")
            pass_specials = exponents[r][c].specials
            m.d.comb += [
                *(unit.maxima[k].eq(value) for k, value in enumerate(maxima[r][c])),
                unit.take.eq(take),
                unit.last.eq(reduced.last),
                exponents[r][c].exponent.eq(unit.exponent),
                exponents[r][c].previous.eq(unit.previous),
                pass_specials.as_value().eq(Mux(fresh, 0, sticky.as_value()) | reduced.pes[r][c].specials.as_value()),
            ]
            with m.If(take):
                m.d.sync += sticky.eq(pass_specials)
        aligned, aligned_valid = self._stage(m, reduced, reduced_valid, "aligned")
        return aligned, aligned_valid, self._stage(m, exponents, None, "exponents")[0]

    def _bound(self, m, aligned, aligned_valid, exponents):
        """Stage 4: each PE's in-bound digits, lane shifts and frame move (``Bounds``)."""
        bounded = Signal(_tile_step_layout(pe_step_layout(self.lanes), self.rows, self.cols))
        for r, c in self._pes():
            unit = m.submodules[f"bounds{r}_{c}"] = Bounds(self.lanes, self.guard_bits)
            pe = bounded.pes[r][c]
            m.d.comb += [
                unit.lanes.eq(aligned.pes[r][c].lanes),
                unit.exponent.eq(exponents[r][c].exponent),
                unit.previous.eq(exponents[r][c].previous),
                pe.lanes.eq(unit.bounded),
                pe.frame.eq(unit.frame),
                pe.specials.eq(exponents[r][c].specials),
            ]
        m.d.comb += [bounded.any_live.eq(aligned.any_live), bounded.last.eq(aligned.last)]
        return self._stage(m, bounded, aligned_valid, "bounded")

    def _queue(self, m, limited, limited_valid):
        """Stage 5: each lane's length (a lookup of its digits) registered beside its lanes, ORed over the PE's lanes
        into the PE's, registered; both beside two more registers of the bounded steps and flags, the way to the
        queues. Each PE's queue takes its step with the tile's flags and length (ORed over the PEs). A step is
        taken only with a queue entry reserved for it, so the stages never stall."""
        lengths = []
        for r, c in self._pes():
            lane_lengths = [self._stage(m, lane_more_cycles(lane), None, f"lane_more{r}_{c}_{n}")[0]
                            for n, lane in enumerate(limited.pes[r][c].lanes)]
            lengths.append(self._stage(m, reduce(operator.or_, lane_lengths), None, f"more{r}_{c}")[0])
        flags, carried, carried_valid = Cat(limited.any_live, limited.last), limited.pes, limited_valid
        for hop in range(LENGTH_EDGES):
            flags, _ = self._stage(m, flags, None, f"flags{hop}")
            carried, carried_valid = self._stage(m, carried, carried_valid, f"carried{hop}")
        taken = self.steps.valid & self.steps.ready
        for r, c in self._pes():
            queue = m.submodules[f"queue{r}_{c}"] = self._queues[r, c]
            written = queue.push.payload
            m.d.comb += [written.step.eq(carried[r][c]), Cat(written.any_live, written.last).eq(flags),
                         written.more.eq(reduce(operator.or_, lengths)), queue.push.valid.eq(carried_valid),
                         queue.reserve.eq(taken)]
            wiring.connect(m, queue.pop, wiring.flipped(self.scheduled[r][c]))
            if r == c == 0:
                m.d.comb += self.steps.ready.eq(queue.room)

    def _pe_queue(self):
        """A PE's queue: a step's entry is reserved as the step is taken, and pushed ``front_end_stages(lanes) -
        QUEUE_EDGES`` edges later."""
        return ReservedQueue(pe_scheduled_layout(self.lanes), in_flight=front_end_stages(self.lanes) - QUEUE_EDGES + 1,
                             buffered=False)

    def _stage(self, m, value, valid, name):
        """``value`` and its ``valid`` (if any: a register on the steps' way, counted) registered."""
        register = Signal(value.shape(), name=name)
        register_valid = Signal(name=f"{name}_valid")
        m.d.sync += register.eq(value)
        if valid is not None:
            m.d.sync += register_valid.eq(valid)
            self._edges += 1
        return register, register_valid

