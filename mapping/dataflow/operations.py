"""The plan API: a layer's operations in the operand format, planned as problems and handed out as passes.

A transposed convolution (``conv_transpose2d``) with weight W is the adjoint of the convolution with the
same W, stride, padding, dilation and groups whose input is the transposed layer's output: its forward is
that convolution's input gradient, its input gradient that convolution's forward, and its weight
gradient that convolution's weight gradient, each with the transposed layer's input in the place of the
convolution's output gradient and its output gradient in the place of the convolution's input. Its
operations are planned as those (``MIRRORED``), so the zeros a stride would insert between its inputs are
never issued; the plans keep the transposed layer's own operation and tensor names.
"""

import numpy as np

from dashraker.mapping.config import DATAFLOWS  # dnnsim: windows and taps W-outer, H-inner; dW per sample, lanes along H
from dashraker.mapping.dataflow import convolution
from dashraker.mapping.dataflow.convolution import conv_geometry, is_transposed
from dashraker.mapping.dataflow.streams import OpPlan, PassBatch, Problem
from dashraker.mapping.ops import OPS
from dashraker.models.kernels.numerics import quantize

__all__ = ["OPS", "MIRRORED", "DATAFLOWS", "operands", "check_dataflow", "plan", "passes", "problem_passes"]

# A transposed convolution's operation -> the operation of the convolution it is the adjoint of that computes it.
MIRRORED = {"fwd": "bwd_input", "bwd_input": "fwd", "bwd_weight": "bwd_weight"}
# The convolution's tensors and results as the transposed layer names them: its input is their output gradient.
_ADJOINT_NAMES = {"A": "G", "G": "A", "W": "W", "out": "dA", "dA": "out", "dW": "dW"}


def _to_nchw(x, shape, features_last):
    """A recorded activation or gradient as the NCHW tensor ``shape`` of the layer's convolution.

    ``features_last``: a Linear's [n, ..., features] or a matmul's [b, M, features], which become
    [n, features, positions, 1] (a matmul's b then folds into one sample of b channel groups); a
    convolution's tensor is only reshaped (a Conv1d's [n, c, L] to [n, c, 1, L]).
    """
    if features_last:
        x = np.ascontiguousarray(x.reshape(x.shape[0], -1, x.shape[-1]).transpose(0, 2, 1))
    return x.reshape(shape)


_OPERATIONS = {
    "fwd": (convolution.forward, ("A", "W"), "out"),
    "bwd_input": (convolution.input_grad, ("G", "W"), "dA"),
    "bwd_weight": (convolution.weight_grad, ("A", "G"), "dW"),
}


def operands(layer, tensors, fmt="bf16", rounding="nearest"):
    """A layer's tensors in the operand format as NCHW arrays: ``{"A": input, "W": weight, "G": output grad}``.

    Values are converted to ``fmt`` (round to nearest even or truncate, subnormals flushed);
    Linear, Conv1d and matmul tensors become those of their convolution (``conv_geometry``); a transposed
    convolution's stay its own (``plan`` hands them to its convolution).
    """
    geo = conv_geometry(layer, tensors.input.shape, tensors.weight.shape)
    (m, kh, kw), shape = geo.kernel, geo.input
    a_shape, g_shape = shape, (shape[0], m, *geo.output())
    if is_transposed(layer):  # the convolution's input is the size of this layer's output
        a_shape, g_shape = tensors.input.shape, shape
    weight, matmul = tensors.weight, getattr(layer, "type", None) == "matmul"
    if matmul:
        weight = weight.swapaxes(1, 2)  # [b, N, K]: b*N filters of K channels
    features_last = matmul or weight.ndim == 2
    return {
        "A": _to_nchw(quantize(tensors.input, fmt, rounding), a_shape, features_last),
        "W": quantize(weight, fmt, rounding).reshape(m, shape[1] // geo.groups, kh, kw),
        "G": _to_nchw(quantize(tensors.output_grad, fmt, rounding), g_shape, features_last),
    }


def check_dataflow(layer, dataflow):
    """Refuse (``ValueError``) a ``dataflow`` (in ``DATAFLOWS``) that cannot form ``layer``'s passes: DNNsim has no
    transposed convolution, so the ``dnnsim`` preset has no pass formation for one."""
    if dataflow not in DATAFLOWS:
        raise ValueError(f"unknown dataflow {dataflow!r}; expected one of {list(DATAFLOWS)}")
    if dataflow == "dnnsim" and is_transposed(layer):
        raise ValueError(f"layer {layer.name!r}: the dnnsim dataflow forms no transposed convolution's passes "
                         "(DNNsim simulates none); map it with the default dataflow")


def _dnnsim_sparsity(x, op, geo):
    """The share of zeros DNNsim weighs the windows' operand by (``x``: the activations, or the output gradients of
    the input gradient) to choose the scheduled side: over the zero-padded map it slides its windows on (the layer's
    padding; for the input gradient the full convolution's, (K - 1) * d - p), padding included."""
    n, c, h, w = x.shape
    kernel = geo.kernel[1:]
    pads = geo.padding if op != "bwd_input" else [max(0, (k - 1) * d - p) for k, d, p in
                                                  zip(kernel, geo.dilation, geo.padding)]
    padded = n * c * (h + 2 * pads[0]) * (w + 2 * pads[1])
    return (padded - np.count_nonzero(x)) / max(padded, 1)


def plan(layer, tensors, op, lanes, fmt="bf16", rounding="nearest", arrays=None, dataflow="default"):
    """The problems of one operation of a layer (``op`` in ``OPS``), the sparser operand on the rows.

    ``dataflow`` (in ``DATAFLOWS``) picks the pass formation: SPEC section 5's, or DNNsim's, which also chooses the
    scheduled side as DNNsim does: the windows' operand (activations; gradients of the input gradient), its zeros
    counted over its zero-padded map, only when strictly sparser than the other (weights, or gradients).
    A transposed convolution's ``op`` is planned as the ``MIRRORED`` operation of its convolution (module docstring).

    ``layer`` has ``name``, ``stride``, ``padding``, ``dilation``, ``groups`` (a LayerInfo); ``tensors`` has
    ``input``, ``weight`` and ``output_grad`` arrays as PyTorch lays them out; ``arrays`` may
    give their ``operands(...)`` already converted, to share the conversion between operations.
    """
    if op not in _OPERATIONS:
        raise ValueError(f"unknown operation {op!r}; expected one of {list(OPS)}")
    check_dataflow(layer, dataflow)
    geo = conv_geometry(layer, tensors.input.shape, tensors.weight.shape)
    arrays = operands(layer, tensors, fmt, rounding) if arrays is None else arrays
    build, names, result = _OPERATIONS[op]
    conv = arrays  # the convolution's tensors, by its names
    if is_transposed(layer):
        build, names, result = _OPERATIONS[MIRRORED[op]]
        names, result = tuple(_ADJOINT_NAMES[name] for name in names), _ADJOINT_NAMES[result]
        conv = {_ADJOINT_NAMES[name]: array for name, array in arrays.items()}
    a, w, g = conv["A"], conv["W"], conv["G"]
    zeros = {name: 1.0 - np.count_nonzero(arrays[name]) / max(arrays[name].size, 1) for name in names}
    if dataflow == "dnnsim":
        swap = not _dnnsim_sparsity(arrays[names[0]], op, geo) > zeros[names[1]]
    else:
        swap = bool(zeros[names[1]] > zeros[names[0]])
    problems = [
        Problem(label, *((second, first) if swap else (first, second)))
        for label, first, second in build(a, w, g, geo, lanes, dataflow == "dnnsim")
    ]
    out_elements = {"out": arrays["G"].size, "dA": arrays["A"].size, "dW": arrays["W"].size}[result]
    return OpPlan(
        op=op,
        scheduled=names[swap],
        partner=names[not swap],
        zero_fraction=zeros,
        elements={**{name: int(arrays[name].size) for name in names}, result: int(out_elements)},
        problems=problems,
    )


def passes(layer, tensors, op, rows, cols, lanes, fmt="bf16", rounding="nearest", max_values=1 << 24,
           dataflow="default"):
    """Yield the passes of one operation in batches (the public face of this module).

    Each ``PassBatch`` holds P passes of one problem, the scheduled side [P, rows, steps, lanes]
    and the partner side [P, cols, steps, lanes] as float32 values in the operand format; passes run
    row set by row set, the column sets innermost, and a batch holds at most about ``max_values``
    values. Missing streams of a partial set are zero (``rows_used``/``cols_used`` say how many are real).
    """
    for index, problem in enumerate(plan(layer, tensors, op, lanes, fmt, rounding, dataflow=dataflow).problems):
        yield from problem_passes(index, problem, rows, cols, max_values)


def problem_passes(index, problem, rows, cols, max_values=1 << 24):
    """The passes of one problem, in batches (see ``passes``)."""
    col_sets = problem.cols.num_sets(cols)
    total = problem.rows.num_sets(rows) * col_sets
    batch = max(1, max_values // ((rows + cols) * problem.steps * problem.rows.lanes))
    for start in range(0, total, batch):
        numbers = np.arange(start, min(start + batch, total))
        row_set, col_set = np.divmod(numbers, col_sets)
        r0, r1 = row_set[0], row_set[-1] + 1
        c0, c1 = (col_set.min(), col_set.max() + 1)
        yield PassBatch(
            problem=index,
            label=problem.label,
            scheduled_sets=problem.rows.sets(rows, r0, r1),
            partner_sets=problem.cols.sets(cols, c0, c1),
            row_pick=row_set - r0,
            col_pick=col_set - c0,
            row_set=row_set,
            col_set=col_set,
            rows_used=problem.rows.used(rows, row_set),
            cols_used=problem.cols.used(cols, col_set),
        )
