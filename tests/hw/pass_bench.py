"""One Amaranth-simulator bench for the units that take passes of steps (``valid``, ``last``, the step's inputs) and
give one result per pass ``latency`` cycles after its last step: random idle cycles between steps, whose inputs and
``last`` the unit must ignore. A unit of two contexts takes two pass streams on alternate cycles."""

from amaranth.sim import Simulator

__all__ = ["run_passes"]


def run_passes(dut, passes, drive, idle, rng, idle_rate=0.2, contexts=1):
    """Simulate ``dut`` on ``passes`` (each a list of step inputs, set by ``drive(ctx, inputs)``; ``idle()`` gives the
    inputs of an idle cycle); return its results and, for each, the cycles from its pass's last step, in pass order.

    With ``contexts`` 2, pass k is context k mod 2's, each context's passes in order on the cycles of its parity
    (context 0's even), so that the two streams' steps alternate; a context with no step left idles. The results
    come as the passes end and are matched to them in that order."""
    streams = [_cycles(passes, context, contexts, idle, idle_rate, rng) for context in range(contexts)]
    lasts, finished = [], []  # the pass and cycle of each pass's last step, each result and its cycle

    async def bench(ctx):
        cycle, trailing = 0, dut.latency + 1

        async def tick(valid, inputs, last, index):
            nonlocal cycle
            ctx.set(dut.valid, valid)
            drive(ctx, inputs)
            ctx.set(dut.last, last)
            if ctx.get(dut.result_valid):
                finished.append((ctx.get(dut.result.as_value()), cycle))
            if valid and last:
                lasts.append((index, cycle))
            cycle += 1
            await ctx.tick()

        while any(streams):
            stream = streams[cycle % contexts]
            await tick(*(stream.pop(0) if stream else (False, idle(), False, None)))
        for _ in range(trailing):
            await tick(False, idle(), False, None)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(finished) == len(lasts), f"{len(finished)} results for {len(lasts)} passes"
    ended = sorted(zip(lasts, finished))  # in pass order
    return [result for _, (result, _) in ended], [done - last for (_, last), (_, done) in ended]


def _cycles(passes, context, contexts, idle, idle_rate, rng):
    """The cycles of one context's passes (k = context, context + contexts, ...): (valid, inputs, last, k) of each,
    random idle cycles before each step."""
    cycles = []
    for index in range(context, len(passes), contexts):
        steps = passes[index]
        for step, inputs in enumerate(steps):
            while rng.random() < idle_rate:
                cycles.append((False, idle(), rng.random() < 0.5, None))
            cycles.append((True, inputs, step == len(steps) - 1, index))
    return cycles
