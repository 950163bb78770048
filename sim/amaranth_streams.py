"""Drivers of ``amaranth.lib.stream`` ports in Amaranth's own simulator: the counterparts of the cocotb
``StreamSource`` and ``StreamSink`` (``sim/streams.py``) for the tests that run there.

Payloads travel as integers, the port's payload bits (``dashraker.sim.codec`` encodes and decodes them from the
layout). The source waits a random ``idle`` share of its cycles before each transfer, the sink refuses a random
``backpressure`` share, so that every data test runs with stalls on both sides.
"""

__all__ = ["stream_put", "stream_get"]


async def stream_put(ctx, stream, payloads, rng, idle=0.0):
    """Transfer ``payloads`` (integers) into ``stream`` in order, each after an idle cycle with probability
    ``idle`` (again and again); ``valid`` is low once the last is taken."""
    for payload in payloads:
        while rng.random() < idle:
            ctx.set(stream.valid, 0)
            await ctx.tick()
        ctx.set(stream.valid, 1)
        ctx.set(stream.payload.as_value(), payload)
        await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


async def stream_get(ctx, stream, count, rng, backpressure=0.0, quiet=8):
    """The first ``count`` transfers out of ``stream``: their payloads (integers) and the clock edge of each,
    counted from the call (the first edge is 1). ``ready`` is low in a random ``backpressure`` share of the cycles;
    afterwards it stays high for ``quiet`` cycles in which no further transfer may come (``AssertionError``)."""
    payloads, edges, edge = [], [], 0
    while len(payloads) < count:
        ready = rng.random() >= backpressure
        ctx.set(stream.ready, ready)
        _, _, valid, payload = await ctx.tick().sample(stream.valid, stream.payload.as_value())
        edge += 1
        if valid and ready:
            payloads.append(payload)
            edges.append(edge)
    ctx.set(stream.ready, 1)
    for _ in range(quiet):
        _, _, valid = await ctx.tick().sample(stream.valid)
        edge += 1
        assert not valid, f"a transfer beyond the {count} expected, at clock edge {edge}"
    return payloads, edges
