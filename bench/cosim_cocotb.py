"""cocotb side of ``bench/cosim_speed.py``: stream the bench's transfers through the tile, time it, save the results."""

import json
import time

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge
from cocotb.utils import get_sim_time

from dashraker.sim.runner import tb_config
from dashraker.sim.streams import TB, StreamSink, StreamSource

PERIOD_NS = 10


@cocotb.test()
async def stream_stimulus(dut):
    """The same transfers and always-ready sink as the pyverilator loop; records wall time and simulated cycles."""
    config = tb_config()
    stimulus = np.load(config["stimulus"])
    payloads = [int.from_bytes(row.tobytes(), "little") for row in stimulus["transfers"]]
    expected = int(stimulus["passes"])
    tb = TB(dut, period_ns=PERIOD_NS)
    source = StreamSource(dut, "steps", dut.clk)
    sink = StreamSink(dut, "results", dut.clk)
    await tb.reset()
    began_ns, began = get_sim_time("ns"), time.perf_counter()
    source.send(payloads)
    results = [await sink.recv() for _ in range(expected)]
    await RisingEdge(dut.clk)
    seconds = time.perf_counter() - began
    cycles = round((get_sim_time("ns") - began_ns) / PERIOD_NS)
    words = stimulus["out_words"]
    out = np.array([[(value >> (32 * w)) & 0xFFFFFFFF for w in range(words)] for value in results], np.uint32)
    np.save(config["results"], out)
    with open(config["timing"], "w") as file:
        json.dump({"cycles": cycles, "seconds": seconds}, file)
