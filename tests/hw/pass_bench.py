"""One Amaranth-simulator bench for the units that take passes of steps (``valid``, ``last``, the step's inputs) and
give one result per pass ``latency`` cycles after its last step: random idle cycles between steps, whose inputs and
``last`` the unit must ignore."""

from amaranth.sim import Simulator

__all__ = ["run_passes"]


def run_passes(dut, passes, drive, idle, rng, idle_rate=0.2):
    """Simulate ``dut`` on ``passes`` (each a list of step inputs, set by ``drive(ctx, inputs)``; ``idle()`` gives the
    inputs of an idle cycle); return its results in order and, for each, the cycles from its pass's last step."""
    results, lasts, finished = [], [], []  # results, cycle of each pass's last step and of its result

    async def bench(ctx):
        cycle = 0

        async def tick(valid, inputs, last):
            nonlocal cycle
            ctx.set(dut.valid, valid)
            drive(ctx, inputs)
            ctx.set(dut.last, last)
            if ctx.get(dut.result_valid):
                results.append(ctx.get(dut.result.as_value()))
                finished.append(cycle)
            if valid and last:
                lasts.append(cycle)
            cycle += 1
            await ctx.tick()

        for steps in passes:
            for index, inputs in enumerate(steps):
                while rng.random() < idle_rate:
                    await tick(False, idle(), rng.random() < 0.5)
                await tick(True, inputs, index == len(steps) - 1)
        for _ in range(dut.latency + 1):
            await tick(False, idle(), False)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return results, [done - last for last, done in zip(lasts, finished)]
