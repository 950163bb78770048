"""FPGA flows: a device top level for any design, Yosys synthesis, nextpnr place and route, reports."""

from dashraker.fpga.devices import DEVICES, device
from dashraker.fpga.flow import FlowError, FlowOptions, run_flow
from dashraker.fpga.wrapper import StreamTop

__all__ = ["DEVICES", "device", "FlowError", "FlowOptions", "run_flow", "StreamTop"]
