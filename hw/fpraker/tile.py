"""The FPRaker R x C tile: a decode stage, lockstep term-serial PEs, and a rounding output stage."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker.hw.baseline.tile import result_layout, step_layout
from dashraker.hw.fpraker.encoder import TermEncoder
from dashraker.hw.fpraker.pe import PE, block_layout
from dashraker.hw.fpraker.rounder import EXPONENT_BITS, Rounder, accumulator_layout
from dashraker.hw.numerics.float import classify, significand

__all__ = ["Tile", "output_layout", "MAX_GUARD_BITS"]

MAX_GUARD_BITS = 7  # the lane shifter's 5-bit amount covers shifts up to 17 + G + 7 < 32
CYCLE_BITS = 32


def output_layout(rows, cols):
    """One transfer per pass: every PE's fp32 result [row][col] and the pass's cycle count."""
    return data.StructLayout({"results": result_layout(rows, cols), "cycles": CYCLE_BITS})


def _flags_layout():
    return data.StructLayout({"nan": 1, "pos_inf": 1, "neg_inf": 1})


def _decoded_layout(rows, cols, lanes):
    """A decoded block: per-PE blocks and special flags, whether any PE has a live lane, end of pass."""
    return data.StructLayout({
        "blocks": data.ArrayLayout(block_layout(lanes), rows * cols),
        "flags": data.ArrayLayout(_flags_layout(), rows * cols),
        "any_live": 1,
        "last": 1,
    })


def _maximum(values):
    """Balanced tree of comparators."""
    while len(values) > 1:
        values = [Mux(values[i] > values[i + 1], values[i], values[i + 1]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


class Tile(wiring.Component):
    """R x C FPRaker PEs in lockstep: row r's ``a`` operands are shared along the row (term-serial),
    column c's ``b`` operands along the column (bit-parallel).

    Pipeline: the step payload is decoded (classification, NAF term encoding of
    ``a``, product exponents and signs, per-PE exponent maximum) into a register;
    the PEs take a decoded block when the previous one finishes, so blocks follow
    each other without bubbles; a block lasts the maximum over PEs and lanes of the
    in-bound terms (at least one cycle). A pass's windows are captured at its last
    block, rounded to fp32 in the next stage and presented on ``results``.

    ``cycles`` counts the cycles the PEs spent on the pass's blocks. With
    ``zero_block_cycles=0`` a block without any live lane (in every PE) is not
    counted: it models such blocks being skipped before they reach the tile, as
    the golden model's cost does; this RTL still takes one clock to consume it.

    Parameters
    ----------
    rows, cols : int
        PEs per column and per row.
    lanes : int
        Lanes N per PE (default 8).
    guard_bits : int
        G, guard bits of the accumulator window below the fp32 significand (default 3, at most 7).
    zero_block_cycles : 0 | 1
        Cost of an all-zero block (default 1).

    Attributes
    ----------
    latency : int
        Cycles from a pass's last block finishing to its result being valid (2).

    Ports
    -----
    steps : In(stream.Signature(step_layout(rows, cols, lanes, "bf16")))
        One block per transfer: N bf16 operands per row and per column; ``last`` closes a pass.
    results : Out(stream.Signature(output_layout(rows, cols)))
        One transfer per pass: the fp32 results [row][col] and the pass's ``cycles``.
    """

    def __init__(self, rows=1, cols=1, lanes=8, guard_bits=3, zero_block_cycles=1):
        for name, value in (("rows", rows), ("cols", cols), ("lanes", lanes)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"FPRaker tile {name} must be a positive integer, not {value!r}")
        if not isinstance(guard_bits, int) or not 0 <= guard_bits <= MAX_GUARD_BITS:
            raise ValueError(f"FPRaker guard_bits must be an integer in 0..{MAX_GUARD_BITS}, not {guard_bits!r}")
        if zero_block_cycles not in (0, 1):
            raise ValueError(f"FPRaker zero_block_cycles must be 0 or 1, not {zero_block_cycles!r}")
        self.rows, self.cols, self.lanes = rows, cols, lanes
        self.guard_bits, self.zero_block_cycles = guard_bits, zero_block_cycles
        self.latency = 2
        super().__init__({
            "steps": In(stream.Signature(step_layout(rows, cols, lanes, "bf16"))),
            "results": Out(stream.Signature(output_layout(rows, cols))),
        })

    def _decode(self, m, payload, decoded):
        """Combinational decode of a step payload into ``decoded``."""
        rows, cols, lanes = self.rows, self.cols, self.lanes
        terms = {}
        for r in range(rows):
            for n in range(lanes):
                encoder = m.submodules[f"encoder{r}_{n}"] = TermEncoder()
                m.d.comb += encoder.significand.eq(significand(payload.rows[r][n]))
                terms[r, n] = encoder
        m.d.comb += decoded.last.eq(payload.last)
        pe_live = []
        for r in range(rows):
            for c in range(cols):
                block, flags = decoded.blocks[r * cols + c], decoded.flags[r * cols + c]
                exponents, lane_live, lane_nan, lane_pos, lane_neg = [], [], [], [], []
                for n in range(lanes):
                    a, b = payload.rows[r][n], payload.cols[c][n]
                    a_zero, a_inf, a_nan = classify(a)
                    b_zero, b_inf, b_nan = classify(b)
                    lane = block.lanes[n]
                    live = ~a_zero & ~a_inf & ~a_nan & ~b_zero & ~b_inf & ~b_nan
                    sig_b = significand(b)
                    exponent = Signal(signed(EXPONENT_BITS), name=f"pexp{r}_{c}_{n}")
                    m.d.comb += [
                        lane.plus.eq(terms[r, n].plus),
                        lane.minus.eq(terms[r, n].minus),
                        lane.b.eq(Mux(a.sign ^ b.sign, -sig_b, sig_b)),
                        exponent.eq(a.exp + b.exp - 127),
                        lane.exponent.eq(exponent),
                        lane.live.eq(live),
                    ]
                    exponents.append(Mux(live, exponent, -(1 << (EXPONENT_BITS - 1))))
                    nan = a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)
                    inf = (a_inf | b_inf) & ~nan
                    lane_nan.append(nan)
                    lane_pos.append(inf & ~(a.sign ^ b.sign))
                    lane_neg.append(inf & (a.sign ^ b.sign))
                    lane_live.append(live)
                pe_live.extend(lane_live)
                m.d.comb += [
                    block.any_live.eq(Cat(*lane_live).any()),
                    block.max_exponent.eq(_maximum(exponents)),
                    flags.nan.eq(Cat(*lane_nan).any()),
                    flags.pos_inf.eq(Cat(*lane_pos).any()),
                    flags.neg_inf.eq(Cat(*lane_neg).any()),
                ]
        m.d.comb += decoded.any_live.eq(Cat(*pe_live).any())

    def elaborate(self, platform):
        m = Module()
        rows, cols, lanes, g = self.rows, self.cols, self.lanes, self.guard_bits
        count = rows * cols

        # stage 1: decode into a register
        decoded_next = Signal(_decoded_layout(rows, cols, lanes))
        self._decode(m, self.steps.payload, decoded_next)
        decoded = Signal(_decoded_layout(rows, cols, lanes))
        decoded_valid = Signal()

        # stage 2: the PEs in lockstep
        busy, first, last, counted = Signal(), Signal(), Signal(), Signal()
        flags = Signal(data.ArrayLayout(_flags_layout(), count))  # the current block's
        sticky = Signal(data.ArrayLayout(_flags_layout(), count))  # the pass's so far
        cycles = Signal(CYCLE_BITS)
        pes = []
        for i in range(count):
            pes.append(PE(lanes, g))
            m.submodules[f"pe{i // cols}_{i % cols}"] = pes[-1]

        # stage 3: capture at the end of a pass, stage 4: rounded output
        captured = Signal(data.ArrayLayout(accumulator_layout(g), count))
        captured_cycles = Signal(CYCLE_BITS)
        captured_valid = Signal()
        advance_out = ~self.results.valid | self.results.ready
        capture_free = ~captured_valid | advance_out

        done = ~Cat(*(pe.more for pe in pes)).any()
        stall = busy & done & last & ~capture_free
        active = busy & ~stall
        finish = busy & done & ~stall
        pass_end = finish & last
        take = decoded_valid & (~busy | finish)
        cycle_here = active & counted
        m.d.comb += self.steps.ready.eq(~decoded_valid | take)

        for i, pe in enumerate(pes):
            merged = Signal(_flags_layout(), name=f"merged{i}")
            m.d.comb += [
                pe.block.eq(decoded.blocks[i]),
                pe.load.eq(take),
                pe.active.eq(active),
                pe.first.eq(first),
                pe.finish.eq(finish),
                pe.clear.eq(pass_end),
                merged.as_value().eq(sticky[i].as_value() | flags[i].as_value()),
            ]
            with m.If(finish):
                m.d.sync += sticky[i].eq(Mux(last, 0, merged))
            with m.If(pass_end):
                m.d.sync += [
                    captured[i].window.eq(pe.result.window),
                    captured[i].exponent.eq(pe.result.exponent),
                    captured[i].nonempty.eq(pe.result.nonempty),
                    captured[i].nan.eq(merged.nan),
                    captured[i].pos_inf.eq(merged.pos_inf),
                    captured[i].neg_inf.eq(merged.neg_inf),
                ]

        with m.If(self.steps.valid & self.steps.ready):
            m.d.sync += [decoded.eq(decoded_next), decoded_valid.eq(1)]
        with m.Elif(take):
            m.d.sync += decoded_valid.eq(0)

        with m.If(active):
            m.d.sync += first.eq(0)
        with m.If(finish):
            m.d.sync += busy.eq(0)
        with m.If(cycle_here):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(take):
            m.d.sync += [
                busy.eq(1),
                first.eq(1),
                last.eq(decoded.last),
                counted.eq(decoded.any_live | int(self.zero_block_cycles == 1)),
                flags.eq(decoded.flags),
            ]

        rounded = []
        for i in range(count):
            rounder = m.submodules[f"rounder{i // cols}_{i % cols}"] = Rounder(g)
            m.d.comb += rounder.accumulator.eq(captured[i])
            rounded.append(rounder.result)
        with m.If(advance_out):
            m.d.sync += [self.results.valid.eq(captured_valid), captured_valid.eq(0),
                         self.results.payload.cycles.eq(captured_cycles)]
            for i in range(count):
                m.d.sync += self.results.payload.results[i // cols][i % cols].eq(rounded[i])
        with m.If(pass_end):
            m.d.sync += [
                captured_valid.eq(1),
                captured_cycles.eq(cycles + cycle_here),
                cycles.eq(0),
            ]
        return m
