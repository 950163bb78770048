"""The stream contract every tile follows: one step of a pass in, one result per pass out.

A tile's ``steps`` port carries ``step_layout`` (or a design's group of such steps,
e.g. TensorDash's chunks; a two-thread TensorDash tile has a ``steps`` port per thread) and
its ``results`` port ``result_layout``: every PE's fp32 output and, for designs whose pass
cost depends on the data, the pass's ``cycles`` (and, where a tile has threads, the pass's
``thread``).
Testbenches and co-simulation encode and decode these payloads from the layouts
themselves (``dashraker.sim.codec``).
"""

from amaranth.lib import data

from dashraker.hw.numerics import FP32_LAYOUT, FloatLayout

__all__ = ["CYCLE_BITS", "step_layout", "result_layout", "push_results", "payload_layout"]

CYCLE_BITS = 32  # width of a pass's cycle count in a result


def step_layout(rows, cols, lanes, fmt):
    """One step of a pass: N operands per row and per column, and the end-of-pass flag ``last``."""
    lane_values = data.ArrayLayout(FloatLayout(fmt), lanes)
    return data.StructLayout({
        "rows": data.ArrayLayout(lane_values, rows),
        "cols": data.ArrayLayout(lane_values, cols),
        "last": 1,
    })


def result_layout(rows, cols, cycles=False, threads=1):
    """One result per pass: ``outputs`` [row][col], every PE's fp32 value, with ``cycles`` the pass's count, and
    with ``threads`` 2 the pass's ``thread``."""
    fields = {"outputs": data.ArrayLayout(data.ArrayLayout(FP32_LAYOUT, cols), rows)}
    if cycles:
        fields["cycles"] = CYCLE_BITS
    if threads > 1:
        fields["thread"] = range(threads)
    return data.StructLayout(fields)


def push_results(m, push, units):
    """Every unit's fp32 ``result`` [row][col] into ``push``'s ``outputs``, pushed when the first unit's
    ``result_valid`` says (the units run in lockstep)."""
    for r, row in enumerate(units):
        for c, unit in enumerate(row):
            m.d.comb += push.payload.outputs[r][c].eq(unit.result)
    m.d.comb += push.valid.eq(units[0][0].result_valid)


def payload_layout(tile, port):
    """The payload layout of a tile's stream ``port`` ("steps" or "results"), read from its signature."""
    return tile.signature.members[port].signature.members["payload"].shape
