"""The fixed-point accumulator of a PE: a pass's sums added exactly in a frame wide enough for every fp32 number,
rounded once (SPEC section 2)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dashraker.formats import FIXED_POINT_FRAME
from dashraker.hw.numerics.accumulator import ACCUMULATOR_SIGNATURE, check_contexts, context_copies
from dashraker.hw.numerics.float import FP32_LAYOUT, canonical_nan, significand
from dashraker.hw.numerics.integer_rounder import INTEGER_ROUNDER_LATENCY, IntegerRounder

__all__ = ["FixedPointAccumulator", "FIXED_ACCUMULATOR_LATENCY", "SEGMENTS", "SHIFT_BITS", "addend_layout"]

SEGMENTS = 8  # the frame's add, cut into this many carry chains (48 bits each), each carry kept for the next cycle
SHIFT_BITS = 9  # an addend's place in the frame: its unit's exponent minus the frame's (0 to 383)
EXPONENT_BITS = 10  # signed biased exponents of the frame's places (its top, 2^191, is 318)
# Registers from a pass's last addend entering to its result, stage by stage (FixedPointAccumulator's stage methods;
# tests/hw/test_fixed_accumulator.py counts each stage's cycles on the pass's valid path).
ALIGN_STAGES, LOOP_STAGES, RESOLVE_STAGES, MAGNITUDE_STAGES, RESULT_STAGES = 2, 1, 2, 1, 1
FIXED_ACCUMULATOR_LATENCY = (ALIGN_STAGES + LOOP_STAGES + RESOLVE_STAGES + MAGNITUDE_STAGES + INTEGER_ROUNDER_LATENCY
                             + RESULT_STAGES)
FP32_SHIFT = 150 + FIXED_POINT_FRAME[1]  # an fp32 number's place: its biased exponent minus this

# What a pass's specials make of its result; NONE: its rounded sum.
SPECIALS = data.StructLayout({"nan": 1, "pos_inf": 1, "neg_inf": 1})
NONE, NAN, POS_INF, NEG_INF = range(4)


def addend_layout(magnitude_bits):
    """One addend: ``magnitude * 2**(shift + lsb)`` with its sign (lsb: the frame's, ``FIXED_POINT_FRAME``), and
    the specials of its step (their magnitude is 0)."""
    return data.StructLayout({"magnitude": magnitude_bits, "shift": SHIFT_BITS, "sign": 1, "specials": SPECIALS})


class FixedPointAccumulator(wiring.Component):
    """Adds the sums of a pass exactly in a two's complement frame and rounds the total once to fp32.

    The frame (``FIXED_POINT_FRAME``: 384 bits, least significant bit 2^-192) holds every
    fp32 number and every fused step sum exactly and any total below 2^191, so the
    result is the pass's exact sum rounded once, as the golden
    ``models.baseline.accumulate_addends`` (bit for bit): to nearest even, +-Inf past
    fp32's largest number, a zero of the total's sign below 2^-126 (FTZ), +0.0 for a
    zero total. No finite pass of fewer than 2^(63 - log2 N) steps can leave the frame;
    a longer one would wrap around (the golden model refuses it).

    Stages: the addend's magnitude shifted by its place's low 4 bits; placed in the
    frame by the high 5 (one of 24 places 16 bits apart: an AND-OR of a few terms per
    bit, no barrel shifter) and inverted where negative (its +1 is the add's carry in);
    the add, the only loop, cut into ``SEGMENTS`` carry chains of 48 bits, each carry
    out kept in a register and added into the next segment in the next cycle (the
    total is the segments plus those carries); at the end of a pass the carries are
    resolved in two stages: each kept carry added into its segment, then the carries
    from below, each segment's found from the flags of those under it (whether they
    make a carry or pass one on), no chain across segments; the total's magnitude
    (inverted where negative, its +1 added into each segment whose segments below are
    all zero); then the registered rounding stages (``IntegerRounder``) and the result
    register. No carry chain is longer than a segment (96-bit ones bounded the clock
    of 1x1 and 2x2 tiles on ECP5), and no control net spans the frame: each segment
    takes its enable and its end-of-pass clear from registers of its own.
    IEEE's specials stay sticky over the pass: a NaN or Infs of both signs give the
    canonical NaN, an Inf of one sign that Inf.

    Two contexts (a two-thread TensorDash tile's PE, SPEC section 3) accumulate two pass
    streams whose sums come on alternate cycles: the add loop's registers (the segments, their
    kept carries, the sticky specials) are doubled in series (``context_copies``), every other
    stage is shared, each pass's result leaving alone as with one.

    Parameters
    ----------
    magnitude_bits : int or None
        None: the ports are the ``Accumulator``'s (an fp32 ``sum`` per step), so ``MacUnit``
        takes either; else an ``addend`` port of ``addend_layout(magnitude_bits)`` (the
        fused dot product's step sums, ``FusedTree``).
    contexts : int
        Pass streams accumulated, 1 or 2 (``CONTEXTS``); with 2 their sums alternate cycle by cycle.

    Attributes
    ----------
    latency : int
        Cycles from a pass's last sum on ``sum`` to its ``result`` (``FIXED_ACCUMULATOR_LATENCY``).

    Ports
    -----
    valid, last, result, result_valid
        As ``Accumulator``'s.
    sum : In(FP32_LAYOUT)
        Without ``magnitude_bits``: the step's fp32 sum.
    addend : In(addend_layout(magnitude_bits))
        With ``magnitude_bits``: the step's sum.
    """

    def __init__(self, magnitude_bits=None, contexts=1):
        check_contexts("FixedPointAccumulator", contexts)
        self.latency = FIXED_ACCUMULATOR_LATENCY
        self.magnitude_bits, self.contexts = magnitude_bits, contexts
        if magnitude_bits is None:
            signature = ACCUMULATOR_SIGNATURE
        else:
            signature = wiring.Signature({"valid": In(1), "last": In(1), "addend": In(addend_layout(magnitude_bits)),
                                          "result": Out(FP32_LAYOUT), "result_valid": Out(1)})
        super().__init__(signature)

    def elaborate(self, platform):
        m = Module()
        width, lsb = FIXED_POINT_FRAME
        assert width % (16 * SEGMENTS) == 0 and width - 1 + lsb + 127 < 512
        self.stage_valids = {}  # each stage's valid register, by stage: what tests count the latency stages by
        aligned = self._align(m, self._addend(m))
        passed = self._loop(m, *aligned)
        resolved = self._resolve(m, *passed)
        magnitude = self._magnitude(m, *resolved)
        self._round(m, *magnitude)
        return m

    def _addend(self, m):
        """The addend port, or an fp32 sum's significand at its place."""
        if self.magnitude_bits is not None:
            return self.addend
        addend = Signal(addend_layout(24))
        value = self.sum
        special = value.exp == 255
        m.d.comb += [addend.magnitude.eq(Mux(special, 0, significand(value))),
                     addend.shift.eq(value.exp - FP32_SHIFT), addend.sign.eq(value.sign),
                     addend.specials.eq(Cat(special & (value.frac != 0), special & (value.frac == 0) & ~value.sign,
                                            special & (value.frac == 0) & value.sign))]
        return addend

    def _align(self, m, addend):
        """``ALIGN_STAGES`` registers: the addend aligned by its place's low 4 bits, then by 16 times its high bits
        into the frame, inverted where negative (two's complement: the inversion here, its +1 the add's carry in).
        Returns the aligned addend, its sign, specials and (valid, last), and the first stage's (valid, last)."""
        width = FIXED_POINT_FRAME[0]
        fine = Signal(len(addend.magnitude) + 15)
        coarse = Signal(SHIFT_BITS - 4)
        fine_sign = Signal()
        fine_specials = Signal(SPECIALS)
        fine_flags = Signal(2)  # (valid, last) beside the data, stage by stage
        m.d.sync += [fine.eq(addend.magnitude << addend.shift[:4]), coarse.eq(addend.shift[4:]),
                     fine_sign.eq(addend.sign), fine_specials.eq(addend.specials),
                     fine_flags.eq(Cat(self.valid, self.last))]
        placed = 0
        for place in range(width // 16):
            placed = placed | Mux(coarse == place, Cat(Const(0, 16 * place), fine)[:width], 0)
        aligned = Signal(width)
        aligned_sign = Signal()
        aligned_specials = Signal(SPECIALS)
        aligned_flags = Signal(2)
        m.d.sync += [aligned.eq(placed ^ fine_sign.replicate(width)), aligned_sign.eq(fine_sign),
                     aligned_specials.eq(fine_specials), aligned_flags.eq(fine_flags)]
        self.stage_valids["align"] = aligned_flags[0]
        return aligned, aligned_sign, aligned_specials, aligned_flags, fine_flags

    def _loop(self, m, aligned, aligned_sign, aligned_specials, aligned_flags, fine_flags):
        """``LOOP_STAGES`` register: the add loop, segments and their carries, and the pass's sticky specials; the
        pass's last sum hands them on. Returns the handed segments, carries and specials, and their valid."""
        segment = FIXED_POINT_FRAME[0] // SEGMENTS
        aligned_valid, aligned_last = aligned_flags
        segments = [Signal(segment, name=f"segment{index}") for index in range(SEGMENTS)]
        carries = [Signal(name=f"carry{index}") for index in range(SEGMENTS - 1)]
        sums = [Signal(segment + 1, name=f"sum{index}") for index in range(SEGMENTS)]
        total_specials = Signal(SPECIALS)
        read_segments, read_carries, (read_specials,) = (
            context_copies(m, registers, self.contexts) for registers in (segments, carries, [total_specials]))
        for index, (total, carry_in) in enumerate(zip(read_segments, [aligned_sign, *read_carries])):
            m.d.comb += sums[index].eq(total + aligned[index * segment:(index + 1) * segment] + carry_in)
        specials = Signal(SPECIALS)
        m.d.comb += specials.eq(read_specials.as_value() | aligned_specials.as_value())
        passed = [Signal(segment, name=f"passed{index}") for index in range(SEGMENTS)]
        passed_carries = [Signal(name=f"passed_carry{index}") for index in range(SEGMENTS - 1)]
        passed_specials = Signal(SPECIALS)
        passed_valid = Signal()
        m.d.sync += passed_valid.eq(aligned_valid & aligned_last)
        with m.If(aligned_valid & aligned_last):
            m.d.sync += [total_specials.eq(0), passed_specials.eq(specials)]
        with m.Elif(aligned_valid):
            m.d.sync += total_specials.eq(specials)
        self._keep_context(m, [(total_specials, read_specials)])
        # Each segment's registers (its part of the total, its kept carry and what it hands on) take the stage's
        # valid and pass end from copies of their own, registered beside ``aligned_flags`` and marked ``keep`` (the
        # FPGA flow keeps such registers apart: docs/results/fpga-history.md).
        for index in range(SEGMENTS):
            adds = Signal(name=f"adds{index}", attrs={"keep": 1})
            ends = Signal(name=f"ends{index}", attrs={"keep": 1})
            m.d.sync += [adds.eq(fine_flags[0]), ends.eq(fine_flags[0] & fine_flags[1])]
            value = sums[index]
            registers = [(segments[index], value[:segment], passed[index])]
            kept = [(segments[index], read_segments[index])]
            if index < SEGMENTS - 1:  # the top segment's carry out is dropped
                registers.append((carries[index], value[segment], passed_carries[index]))
                kept.append((carries[index], read_carries[index]))
            with m.If(ends):
                m.d.sync += [total.eq(0) for total, _, _ in registers]
                m.d.sync += [handed.eq(part) for _, part, handed in registers]
            with m.Elif(adds):
                m.d.sync += [total.eq(part) for total, part, _ in registers]
            self._keep_context(m, kept)
        self.stage_valids["loop"] = passed_valid
        return passed, passed_carries, passed_specials, passed_valid

    def _keep_context(self, m, registers):
        """With two contexts, a loop register (of ``(register, copy)`` pairs) that the cycle leaves alone takes its
        copy back, the entering sum's context (``context_copies``); with one it holds (nothing to add)."""
        if self.contexts == 2:
            with m.Else():
                m.d.sync += [register.eq(copy) for register, copy in registers]

    def _resolve(self, m, passed, passed_carries, passed_specials, passed_valid):
        """``RESOLVE_STAGES`` registers: the kept carries resolved, no chain across segments. Returns the resolved
        segments, whether each is zero, the total's sign (a copy per segment), the pass's kind and its valid."""
        segment = FIXED_POINT_FRAME[0] // SEGMENTS
        # First each kept carry added into the segment above it, with whether that sum passes a carry from below on
        # (all ones) and whether it is zero, both from the segment and the kept carry beside the add.
        added = [Signal(segment + 1, name=f"added{index}") for index in range(SEGMENTS)]
        propagates = [Signal(name=f"propagates{index}") for index in range(SEGMENTS)]
        added_zeros = [Signal(name=f"added_zero{index}") for index in range(SEGMENTS)]
        for index, (part, kept) in enumerate(zip(passed, [Const(0, 1), *passed_carries])):
            m.d.sync += [added[index].eq(part + kept), propagates[index].eq(_all_ones_after(part, kept)),
                         added_zeros[index].eq(part == kept.replicate(segment))]
        # Whether the top segment's sum has all ones below its top bit (a carry from below then flips the sign).
        below_sign_ones = Signal()
        m.d.sync += below_sign_ones.eq(_all_ones_after(passed[-1][:segment - 1], passed_carries[-1]))
        added_kind, added_valid = Signal(range(4)), Signal()
        m.d.sync += [added_kind.eq(_kind(passed_specials)), added_valid.eq(passed_valid)]
        # Then each segment's carry from below, made by a segment under it and passed on by those between, added in
        # (the top segment's carry out is dropped: two's complement wraps); a segment is zero if its sum was zero
        # without a carry or all ones with one.
        resolved = [Signal(segment, name=f"resolved{index}") for index in range(SEGMENTS)]
        resolved_zeros = [Signal(name=f"resolved_zero{index}") for index in range(SEGMENTS)]
        carry = Const(0, 1)
        for index in range(SEGMENTS):
            m.d.sync += [resolved[index].eq(added[index][:segment] + carry),
                         resolved_zeros[index].eq(Mux(carry, propagates[index], added_zeros[index]))]
            top_carry, carry = carry, added[index][segment] | (propagates[index] & carry)
        # The total's sign: the top segment's top bit once its carry is in (which flips it where all the bits below
        # are ones: known a stage before, so that the sign does not wait on the segment's carry chain), registered
        # beside it in a copy per segment, marked keep (one register driving the whole frame's inversion bounded the
        # fused 2x2 baseline tile: docs/results/fpga-history.md).
        sign = added[-1][segment - 1] ^ (top_carry & below_sign_ones)
        negatives = [Signal(name=f"negative{index}", attrs={"keep": 1}) for index in range(SEGMENTS)]
        m.d.sync += [negative.eq(sign) for negative in negatives]
        kind, valid = Signal(range(4)), Signal()
        m.d.sync += [kind.eq(added_kind), valid.eq(added_valid)]
        self.stage_valids["resolve"] = valid
        return resolved, resolved_zeros, negatives, kind, valid

    def _magnitude(self, m, resolved, resolved_zeros, negatives, kind, valid):
        """``MAGNITUDE_STAGES`` register: the total inverted where negative, the +1 of its negation added into each
        segment whose segments below are all zero, no chain across segments (a 384-bit negation, and 96-bit chains,
        bounded the tiles' clock on ECP5: docs/results/fused-dot.md). Returns the magnitude's segments, its sign, the
        pass's kind and its valid."""
        segment = FIXED_POINT_FRAME[0] // SEGMENTS
        magnitude = [Signal(segment, name=f"magnitude{index}") for index in range(SEGMENTS)]
        for index, (part, negative) in enumerate(zip(resolved, negatives)):
            carry = negative & Cat(*resolved_zeros[:index]).all()
            m.d.sync += magnitude[index].eq((part ^ negative.replicate(segment)) + carry)
        magnitude_negative, magnitude_kind, magnitude_valid = Signal(), Signal(range(4)), Signal()
        m.d.sync += [magnitude_negative.eq(negatives[-1]), magnitude_kind.eq(kind), magnitude_valid.eq(valid)]
        self.stage_valids["magnitude"] = magnitude_valid
        return magnitude, magnitude_negative, magnitude_kind, magnitude_valid

    def _round(self, m, magnitude, magnitude_negative, magnitude_kind, magnitude_valid):
        """The registered stages of ``IntegerRounder`` (the pass's kind beside the value), then the result register
        (``RESULT_STAGES``): the rounded fp32 number or the pass's special."""
        width, lsb = FIXED_POINT_FRAME
        m.submodules.rounder = rounder = IntegerRounder(width, EXPONENT_BITS, range(4), magnitude=True)
        m.d.comb += [rounder.valid.eq(magnitude_valid), rounder.value.eq(Cat(*magnitude)),
                     rounder.negative.eq(magnitude_negative), rounder.top.eq(width - 1 + lsb + 127),
                     rounder.tag.eq(magnitude_kind)]
        self.stage_valids["rounder"] = rounder.result_valid
        self.stage_valids["result"] = self.result_valid
        exponent = rounder.exponent
        m.d.sync += self.result_valid.eq(rounder.result_valid)
        with m.If(rounder.result_valid):
            with m.Switch(rounder.result_tag):
                with m.Case(NONE):
                    with m.If(exponent >= 255):
                        m.d.sync += self.result.eq(Cat(Const(0, 23), Const(255, 8), rounder.sign))
                    with m.Elif(exponent <= 0):  # zero, or below fp32's normal numbers: flushed
                        m.d.sync += self.result.eq(Cat(Const(0, 31), rounder.sign))
                    with m.Else():
                        m.d.sync += self.result.eq(Cat(rounder.mantissa[:23], exponent[:8], rounder.sign))
                with m.Case(NAN):
                    m.d.sync += self.result.eq(canonical_nan())
                with m.Case(POS_INF):
                    m.d.sync += self.result.eq(Cat(Const(0, 23), Const(255, 8), Const(0, 1)))
                with m.Case(NEG_INF):
                    m.d.sync += self.result.eq(Cat(Const(0, 23), Const(255, 8), Const(1, 1)))


def _all_ones_after(part, kept):
    """Whether ``part + kept`` (``kept`` one bit) is all ones in ``part``'s width, from ``part`` and ``kept`` alone."""
    return part[1:].all() & (part[0] ^ kept)


def _kind(specials):
    """What a pass's sticky specials make of its result: NONE, NAN, POS_INF or NEG_INF."""
    both = specials.pos_inf & specials.neg_inf
    return Mux(specials.nan | both, NAN, Mux(specials.pos_inf, POS_INF, Mux(specials.neg_inf, NEG_INF, NONE)))
