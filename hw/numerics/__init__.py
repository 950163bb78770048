"""Floating-point building blocks shared by every design (SPEC section 2)."""

from dashraker.hw.numerics.accumulator import Accumulator
from dashraker.hw.numerics.adder_tree import AdderTree
from dashraker.hw.numerics.fixed_accumulator import FixedPointAccumulator
from dashraker.hw.numerics.float import FP32_LAYOUT, FloatLayout
from dashraker.hw.numerics.fp_add import FPAdder
from dashraker.hw.numerics.fp_mul import FPMultiplier
from dashraker.hw.numerics.fused_dot import ExactMultiplier, FusedTree
from dashraker.hw.numerics.mac import ADDER_STAGES, MacUnit, mac_latency, mac_stages

__all__ = ["Accumulator", "ADDER_STAGES", "AdderTree", "ExactMultiplier", "FP32_LAYOUT", "FixedPointAccumulator",
           "FloatLayout", "FPAdder", "FPMultiplier", "FusedTree", "MacUnit", "mac_latency", "mac_stages"]
