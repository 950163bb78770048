"""Device top level: any stream design behind a narrow, fully registered word interface."""

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamTop", "check_wrappable", "payload_bits", "step_ports", "words_per"]


def payload_bits(port):
    """Width in bits of a stream port's payload."""
    return len(Value.cast(port.payload))


def check_wrappable(design):
    """``TypeError`` unless ``design`` is a component with ``steps`` (one stream port, or a one-dimensional array of
    them: a two-thread TensorDash tile's) and ``results`` stream ports."""
    members = getattr(getattr(design, "signature", None), "members", {})
    if "steps" not in members or "results" not in members:
        raise TypeError(f"the design must be a component with 'steps' and 'results' stream ports, not {design!r}")
    if len(members["steps"].dimensions) > 1:
        raise TypeError(f"'steps' must be a stream port or a one-dimensional array of them, not "
                        f"{members['steps'].dimensions}")


def step_ports(design):
    """The design's ``steps`` stream ports, in order: the port itself, or each of an array's."""
    return list(design.steps) if design.signature.members["steps"].dimensions else [design.steps]


def words_per(bits, word_bits):
    """Words of ``word_bits`` that carry ``bits`` bits (at least one)."""
    return max(1, -(-bits // word_bits))


class StreamTop(wiring.Component):
    """Wraps a design with stream ports ``steps`` (in) and ``results`` (out) for a real device.

    A tile's step payload is thousands of bits wide; no package has that many pins.
    The wrapper deserialises each step from ``ceil(step bits / W)`` words (first word
    = least significant bits) into a register, hands it to the design, and
    serialises every result transfer back out the same way. Every input pin is
    captured by a flip-flop before any logic and every output pin is driven by a
    flip-flop, so the pins add no logic to the design's timing paths.

    Pin protocols:

    * ``rx`` is an ordinary stream: a word transfers on a clock edge where
      ``valid`` and ``ready`` are both high. ``ready`` is a register.
    * ``tx`` has a ready latency of three cycles: ``tx.valid`` is high in a cycle only
      if ``tx.ready`` was high three cycles before, and every word presented with
      ``tx.valid`` high is taken. Words of one result come out in order.

    The pin registers drive nothing but the pins (and take nothing but the pins):
    the logic counting words works on registers of its own, so that no path runs
    from the logic to a pin's register across the die.

    The interface moves one word per cycle; a step of K words takes about K + 4
    cycles, so the wrapper is for fitting and timing the design, not for feeding it
    at full rate.

    A design with an array of P ``steps`` ports (a two-thread TensorDash tile's, one
    per thread) takes each step word-assembled as above with ``ceil(log2 P)`` more bits
    above the port's payload: the index of the port it goes to. The ports share the
    assembled payload; only the indexed one sees ``valid``.

    Parameters
    ----------
    design : wiring.Component
        A component with ``steps: In(stream.Signature(...))`` (or an array of such ports) and
        ``results: Out(stream.Signature(...))``.
    word_bits : int
        W, the width of the pin words (default 16).

    Attributes
    ----------
    step_words, result_words : int
        Words per step (its payload and port index) and per result transfer.
    select_bits : int
        Bits of a step's port index (0 with one ``steps`` port).

    Ports
    -----
    rx : In(stream.Signature(word_bits))
        Step words.
    tx : Out(stream.Signature(word_bits))
        Result words (ready latency 3).
    """

    def __init__(self, design, word_bits=16):
        if not isinstance(word_bits, int) or word_bits < 1:
            raise ValueError(f"word_bits must be a positive integer, not {word_bits!r}")
        check_wrappable(design)
        self.design = design
        self.word_bits = word_bits
        ports = step_ports(design)
        self.select_bits = (len(ports) - 1).bit_length()
        self.step_bits = payload_bits(ports[0]) + self.select_bits
        self.result_bits = payload_bits(design.results)
        self.step_words = words_per(self.step_bits, word_bits)
        self.result_words = words_per(self.result_bits, word_bits)
        super().__init__({
            "rx": In(stream.Signature(word_bits)),
            "tx": Out(stream.Signature(word_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.design = design = self.design
        self._deserialise(m, step_ports(design))
        self._serialise(m, design.results)
        return m

    def _deserialise(self, m, ports):
        w, k = self.word_bits, self.step_words
        word, word_valid = Signal(w), Signal()  # the input pins, registered
        m.d.sync += [word.eq(self.rx.payload), word_valid.eq(self.rx.valid & self.rx.ready)]
        buffer = Signal(k * w)
        count = Signal(range(k + 1))
        slot = Signal(k + 1, init=1)  # one-hot: the word the next word becomes (bit k: the buffer is full)
        # `taken`: the design took the buffered step at the last edge. Only this register
        # listens to the design's `ready`, so the design's handshake logic ends there
        # instead of running on into the word counting (one idle cycle per step).
        taken = Signal()
        # `full` (count == k) is a register of its own, compared from the count's next value, so that the design's
        # `valid` is two registers ANDed rather than the count's comparison (a 49-word step's was the first two
        # levels of TensorDash's critical path into its window).
        full, count_next = Signal(), Signal.like(count)
        payload_end = self.step_bits - self.select_bits
        select = buffer[payload_end:self.step_bits]
        for index, port in enumerate(ports):
            chosen = select == index if len(ports) > 1 else 1
            m.d.comb += [port.valid.eq(full & ~taken & chosen), Value.cast(port.payload).eq(buffer[:payload_end])]
        m.d.sync += taken.eq(Cat(port.valid & port.ready for port in ports).any())
        # Each word of the buffer has its own enable, so that no one net reaches every bit of a wide step.
        for index in range(k):
            with m.If(word_valid & slot[index]):
                m.d.sync += buffer[index * w:(index + 1) * w].eq(word)
        m.d.comb += count_next.eq(count)
        with m.If(word_valid):
            m.d.sync += slot.eq(slot << 1)
            m.d.comb += count_next.eq(count + 1)
        with m.Elif(taken):
            m.d.sync += slot.eq(1)
            m.d.comb += count_next.eq(0)
        m.d.sync += [count.eq(count_next), full.eq(count_next == k)]
        # Words that may be in the buffer two edges from now, before any consumption then: a word taken now is
        # shifted in two edges later, so ready must leave room for it. Whether one is taken now is bounded by
        # ``ready``, the pin's ready as a register of its own (the pin's register drives only the pin).
        ready, ready_pin = Signal(attrs={"keep": 1}), Signal(attrs={"keep": 1})
        committed = Mux(taken, 0, count) + word_valid + ready
        m.d.sync += [ready.eq(committed < k), ready_pin.eq(committed < k)]
        m.d.comb += self.rx.ready.eq(ready_pin)

    def _serialise(self, m, results):
        w, k = self.word_bits, self.result_words
        ready = Signal()  # the output pin's ready, registered
        m.d.sync += ready.eq(self.tx.ready)
        buffer = Signal(k * w)
        remaining = Signal(range(k + 1))
        empty = Signal(init=1)  # remaining == 0, as a register
        sending = Signal()  # buffer[:w] goes to the pins' registers at this edge; they present it next cycle
        load = results.valid & empty
        m.d.comb += results.ready.eq(empty)
        with m.If(load):
            m.d.sync += [buffer.eq(Value.cast(results.payload)), remaining.eq(k)]
        with m.Elif(sending):
            m.d.sync += [buffer.eq(buffer[w:]), remaining.eq(remaining - 1)]
        after = Mux(load, k, remaining - sending)
        m.d.sync += [empty.eq(after == 0), sending.eq(ready & (after != 0))]
        m.d.sync += [self.tx.payload.eq(buffer[:w]), self.tx.valid.eq(sending)]
