"""The dataflow of SPEC section 5: a layer's forward, input-gradient and weight-gradient operations as tile passes.

An operation becomes one or more *problems*: independent sets of row streams and
column streams of equal length (``steps`` x ``lanes``), one per convolution group,
input-gradient stride phase (the s*s sub-kernels) or weight-gradient kernel offset.
A *pass* pairs a set of R row streams with a set of C column streams. The operand
with more zeros (after conversion to the operand format) goes on the rows, the
scheduled side.

``streams`` holds the containers, ``convolution`` the layer geometry and index maths that gather each
operation's problems, ``operations`` the plan API (a transposed convolution's operations are planned as the
mirrored operations of its convolution, explained there).
"""

from dashraker.mapping.dataflow.convolution import Geometry, conv_geometry
from dashraker.mapping.dataflow.operations import (DATAFLOWS, MIRRORED, OPS, check_dataflow, operands, passes, plan,
                                                   problem_passes)
from dashraker.mapping.dataflow.streams import OpPlan, PassBatch, Problem, Streams

__all__ = ["OPS", "MIRRORED", "DATAFLOWS", "Streams", "Problem", "OpPlan", "PassBatch", "Geometry", "conv_geometry",
           "operands", "check_dataflow", "plan", "passes", "problem_passes"]
