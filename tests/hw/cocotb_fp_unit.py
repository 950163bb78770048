"""cocotb test of one FP unit (adder or multiplier), combinational or pipelined, against the PyTorch golden model.

A pipelined unit (``latency`` > 0 in the config) gets a new operand pair in a random
subset of cycles (idle cycles carry random bits that must never come out).
"""

import random
import struct

import cocotb
from cocotb.triggers import RisingEdge, Timer

from dashraker.models import numerics
from dashraker.sim.runner import tb_config
from dashraker.sim.streams import TB

# Zeros of both signs, subnormals, the smallest and largest normals, Inf, NaNs, ones and
# values whose sums and products round, tie or cancel exactly.
FP32_SPECIALS = [
    0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00400000, 0x00800000, 0x80800000,
    0x00800001, 0x00FFFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F000000, 0x7F800000, 0xFF800000,
    0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0x3F800000, 0xBF800000, 0x3F800001,
    0x33800000, 0xB3800000, 0x33C00000, 0x34000000, 0x3FFFFFFF, 0x4B800000, 0xCB7FFFFF,
    0x1F800000, 0x20000000, 0x5F800000, 0x5F7FFFFF, 0x40490FDB, 0xC0490FDB,
]


def _random_fp32(rng):
    """Random patterns, biased towards operands that interact (close exponents) and edges."""
    kind = rng.random()
    if kind < 0.4:
        return rng.getrandbits(32)
    if kind < 0.8:
        return struct.unpack("<I", struct.pack("<f", rng.uniform(-8, 8)))[0]
    if kind < 0.9:
        return (rng.getrandbits(1) << 31) | (rng.choice([1, 2, 3, 125, 126, 127, 128, 253, 254]) << 23) | rng.getrandbits(23)
    return rng.choice(FP32_SPECIALS)


def _operand_pairs(config):
    rng = random.Random(config["seed"])
    pairs = [(x, y) for x in FP32_SPECIALS for y in FP32_SPECIALS]
    for _ in range(config["count"]):
        x = _random_fp32(rng)
        choice = rng.random()
        if choice < 0.2:  # cancellation: nearly equal magnitudes, opposite signs
            y = (x ^ 0x80000000) ^ rng.getrandbits(rng.choice([0, 1, 4, 12]))
        elif choice < 0.3:  # rounding ties: a far smaller operand
            y = (x & 0xFF800000) - (24 << 23) if (x >> 23) & 0xFF > 30 else x
        else:
            y = _random_fp32(rng)
        pairs.append((x & 0xFFFFFFFF, y & 0xFFFFFFFF))
    if config["format"] == "bf16":
        pairs = sorted({(x >> 16, y >> 16) for x, y in pairs})
    return pairs


def _golden(config, xs, ys):
    if config["format"] == "bf16":
        a, b = numerics.bf16_bits_to_fp32(xs), numerics.bf16_bits_to_fp32(ys)
    else:
        a, b = numerics.fp32_from_bits(xs), numerics.fp32_from_bits(ys)
    op = numerics.fp32_add if config["op"] == "add" else numerics.fp32_mul
    return numerics.fp32_bits(op(a, b)).tolist()


async def _combinational(dut, pairs, output):
    results = []
    for x, y in pairs:
        dut.a.value = x
        dut.b.value = y
        await Timer(1, "ns")
        results.append(int(output.value))
    return results


async def _pipelined(dut, config, pairs, output):
    """Results of ``pairs`` fed with idle cycles: the entry ``latency`` edges old is on the output (read at each
    edge, before it updates)."""
    tb = TB(dut)
    await tb.reset()
    rng = random.Random(config["seed"] + 1)
    latency, bits = config["latency"], (16 if config["format"] == "bf16" else 32)
    entered = []  # the pair index of every edge's entry, None for an idle one
    results = {}
    position, driven = 0, None
    while len(results) < len(pairs):
        await RisingEdge(dut.clk)
        if len(entered) >= latency:
            index = entered[len(entered) - latency]
            if index is not None and index not in results:
                results[index] = int(output.value)
        entered.append(driven)
        if position < len(pairs) and rng.random() >= config["idle"]:
            driven = position
            dut.a.value, dut.b.value = pairs[position]
            position += 1
        else:
            driven = None
            dut.a.value, dut.b.value = rng.getrandbits(bits), rng.getrandbits(bits)
    return [results[index] for index in range(len(pairs))]


@cocotb.test()
async def bit_exact_against_pytorch(dut):
    config = tb_config()
    pairs = _operand_pairs(config)
    output = getattr(dut, config["output"])
    if config.get("latency"):
        results = await _pipelined(dut, config, pairs, output)
    else:
        results = await _combinational(dut, pairs, output)
    expected = _golden(config, [x for x, _ in pairs], [y for _, y in pairs])
    mismatches = [(hex(x), hex(y), hex(got), hex(want))
                  for (x, y), got, want in zip(pairs, results, expected) if got != want]
    dut._log.info("%d operand pairs, %d mismatches", len(pairs), len(mismatches))
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:10]}"
