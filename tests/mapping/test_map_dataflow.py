"""The passes of SPEC section 5 reproduce PyTorch's convolution and its gradients, stream by stream."""

import dataclasses
import re
from types import SimpleNamespace

import numpy as np
import pytest

from dashraker.mapping.dataflow import MIRRORED, passes, plan

CASES = {
    "conv3x3": dict(),
    "stride2": dict(size=7, stride=2, padding=1),
    "stride2_1x1": dict(size=6, kernel=1, stride=2, padding=0),
    "stride3_k5": dict(size=9, kernel=5, stride=3, padding=2),
    "grouped": dict(c=8, m=6, groups=2),
    "depthwise": dict(c=6, m=6, groups=6, stride=2),
    "many_channels": dict(c=20, m=5, size=4),
    "dilated": dict(size=7, dilation=2, padding=2),
    "dilated_stride2": dict(size=9, stride=2, dilation=2, padding=2),  # odd input positions: no tap reaches them
    "dilated_stride3_k5": dict(size=12, kernel=5, stride=3, dilation=2, padding=3),
    "dilated_depthwise": dict(c=6, m=6, groups=6, size=8, dilation=3, padding=3, stride=2),
    "linear": dict(kind="linear", n=5, c=20, m=7),
    "conv1d": dict(kind="conv1d", size=11, kernel=5, stride=2, padding=2),
    "conv1d_grouped_dilated": dict(kind="conv1d", c=8, m=6, groups=2, size=12, dilation=2, padding=2),
    "matmul": dict(kind="matmul", n=3, c=20, m=7, size=9),
    "linear_tokens": dict(kind="tokens", n=2, c=20, m=7, size=19),  # 19 positions: dW lanes over tokens
}


def _conv_form(layer, reference):
    """The layer and references as the convolution the mapper sees (``conv_geometry``): a Linear 1x1 on 1x1 maps,
    a Conv1d of height 1, a matmul of b products a grouped 1x1 convolution of one sample over the M rows."""
    if layer.type == "matmul":
        b = reference["fwd"].shape[0]
        out, d_a, d_b = (reference[op].transpose(0, 2, 1) for op in ("fwd", "bwd_input", "bwd_weight"))
        reference = {"fwd": out.reshape(1, -1, out.shape[2], 1), "bwd_input": d_a.reshape(1, -1, d_a.shape[2], 1),
                     "bwd_weight": d_b.reshape(-1, d_b.shape[2], 1, 1)}  # [b, M, X] -> [1, b*X, M, 1]; dB [b*N, K]
        return SimpleNamespace(**{**vars(layer), "groups": b}), reference
    if layer.type == "linear" and reference["fwd"].ndim == 3:  # [n, tokens, features] -> [n, features, tokens, 1]
        return layer, {k: (v.transpose(0, 2, 1)[..., None] if v.ndim == 3 else v[..., None, None])
                       for k, v in reference.items()}
    if layer.type == "linear":
        return layer, {k: v.reshape(v.shape + (1, 1)) for k, v in reference.items()}
    if layer.type == "conv1d":
        return layer, {k: np.expand_dims(v, 2) for k, v in reference.items()}
    return layer, reference


def _products(problem):
    """[row streams, column streams] sums of products over steps and lanes, in fp64."""
    rows = problem.rows.take(0, problem.rows.count).reshape(problem.rows.count, -1).astype(np.float64)
    cols = problem.cols.take(0, problem.cols.count).reshape(problem.cols.count, -1).astype(np.float64)
    return rows @ cols.T


def _phase_positions(size, stride, pad, phase):
    return [x for x in range(size) if (x + pad) % stride == phase]


def _positions(products, n, size_h, size_w, channels, dataflow):
    """Products [positions, channels] as [n, channels, H, W]: positions H-major (default) or W-major (dnnsim)."""
    if dataflow == "dnnsim":
        return products.reshape(n, size_w, size_h, channels).transpose(0, 3, 2, 1)
    return products.reshape(n, size_h, size_w, channels).transpose(0, 3, 1, 2)


def _assemble(op, op_plan, shapes, layer, lanes, dataflow="default"):
    """Put every problem's products where PyTorch has the result, from the labels of the problems."""
    result = np.full(shapes[op], np.nan)
    n = shapes["bwd_input"][0]
    groups = layer.groups
    for problem in op_plan.problems:
        products = _products(problem)
        if op_plan.scheduled == ("W" if op != "bwd_weight" else "G"):
            products = products.T  # the second operand went on the rows
        k = int(re.search(r"group (\d+)", problem.label)[1])
        sample = re.search(r"sample (\d+)", problem.label)  # dnnsim: a problem per sample
        samples = slice(int(sample[1]), int(sample[1]) + 1) if sample else slice(None)
        windows_n = 1 if sample else n
        if op == "fwd":
            out = shapes["fwd"]
            mg = out[1] // groups
            block = _positions(products, windows_n, out[2], out[3], mg, dataflow)
            result[samples, k * mg : (k + 1) * mg] = block
        elif op == "bwd_input":
            qh, qw = map(int, re.search(r"phase \((\d+),(\d+)\)", problem.label).groups())
            size_h, size_w = shapes["bwd_input"][2:]
            xs = _phase_positions(size_h, layer.stride[0], layer.padding[0], qh)
            ys = _phase_positions(size_w, layer.stride[1], layer.padding[1], qw)
            cg = shapes["bwd_input"][1] // groups
            block = _positions(products, windows_n, len(xs), len(ys), cg, dataflow)
            result[samples, k * cg : (k + 1) * cg][:, :, np.ix_(xs, ys)[0], np.ix_(xs, ys)[1]] = block
        else:
            i, j = map(int, re.search(r"offset \((\d+),(\d+)\)", problem.label).groups())
            mg = shapes["bwd_weight"][0] // groups
            block = result[k * mg : (k + 1) * mg, :, i, j]
            result[k * mg : (k + 1) * mg, :, i, j] = np.nan_to_num(block) + products.T  # dnnsim: per sample
    # positions that no tap reaches (stride > kernel) get no problem: their gradient is zero
    return np.nan_to_num(result, nan=0.0)


@pytest.mark.parametrize("dataflow", ["default", "dnnsim"])
@pytest.mark.parametrize("lanes", [4, 16])
@pytest.mark.parametrize("case", CASES)
def test_passes_reproduce_pytorch(layer_case, case, lanes, dataflow):
    layer, tensors, reference = layer_case(**CASES[case])
    conv, reference = _conv_form(layer, reference)
    shapes = {op: value.shape for op, value in reference.items()}
    for op, expected in reference.items():
        op_plan = plan(layer, tensors, op, lanes, dataflow=dataflow)
        got = _assemble(op, op_plan, shapes, conv, lanes, dataflow)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9, err_msg=f"{case} {op} {dataflow}")


# Transposed convolutions (``make_layer`` kind conv_transpose2d: c to m channels); weight_zeros: share of zero weights.
TRANSPOSED = {
    "stride1": dict(),
    "stride2_output_padding": dict(size=4, stride=2, output_padding=1),
    "stride3_k5": dict(size=4, kernel=5, stride=3, padding=2, output_padding=2),
    "grouped_sparse_weights": dict(c=6, m=4, groups=2, stride=2, weight_zeros=0.8),
    "depthwise_dilated": dict(c=4, m=4, groups=4, size=5, stride=2, dilation=2, padding=1, output_padding=1),
    "output_padding_beyond_stride": dict(size=5, dilation=3, padding=2, output_padding=2),  # its convolution is larger
}


def _conv_transpose_reference(layer, tensors):
    """PyTorch's transposed convolution of the layer's tensors and its gradients by autograd, in fp64."""
    import torch

    x, w = (torch.tensor(t, dtype=torch.float64, requires_grad=True) for t in (tensors.input, tensors.weight))
    out = torch.nn.functional.conv_transpose2d(x, w, stride=layer.stride, padding=layer.padding,
                                               output_padding=layer.output_padding, groups=layer.groups,
                                               dilation=layer.dilation)
    out.backward(torch.tensor(tensors.output_grad, dtype=torch.float64))
    return {"fwd": out.detach().numpy(), "bwd_input": x.grad.numpy(), "bwd_weight": w.grad.numpy()}


@pytest.mark.parametrize("lanes", [4, 16])
@pytest.mark.parametrize("case", TRANSPOSED)
def test_transposed_passes_reproduce_pytorch(layer_case, case, lanes):
    """A transposed layer's operations are planned as its convolution's mirrored ones (``MIRRORED``): put where that
    convolution has its results, the passes' products give PyTorch's transposed convolution and its gradients."""
    options = dict(TRANSPOSED[case])
    weight_zeros = options.pop("weight_zeros", 0.0)
    layer, tensors, _ = layer_case(kind="conv_transpose2d", **options)
    tensors.weight[np.random.default_rng(0).random(tensors.weight.shape) < weight_zeros] = 0.0
    reference = _conv_transpose_reference(layer, tensors)
    conv = SimpleNamespace(**{**vars(layer), "type": "conv2d"})
    shapes = {MIRRORED[op]: value.shape for op, value in reference.items()}
    adjoint = {"A": "G", "G": "A", "W": "W"}
    for op, expected in reference.items():
        op_plan = plan(layer, tensors, op, lanes)
        assert op_plan.op == op and op_plan.scheduled in (("W",) if weight_zeros and op != "bwd_weight" else "AG")
        as_conv = dataclasses.replace(op_plan, scheduled=adjoint[op_plan.scheduled])
        got = _assemble(MIRRORED[op], as_conv, shapes, conv, lanes)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9, err_msg=f"{case} {op}")


def test_transposed_dense_steps_are_its_convolutions(layer_case):
    """A ConvTranspose2d 20 -> 5 channels, 3x3, stride 2, padding 1, output padding 1 on 4x4 maps (output 8x8) is
    the adjoint of a convolution 5 -> 20 channels on 8x8 maps (output 4x4). Its forward is that convolution's input
    gradient: 2 chunks of its 20 channels times the taps of each stride phase ({0, 2} or {1} per axis), no step
    for the zeros a stride inserts; its input gradient that convolution's forward: 1 chunk x 9 taps; its weight
    gradient that convolution's: 9 offsets of 1 sample x 1 chunk of 16 positions."""
    layer, tensors, _ = layer_case(kind="conv_transpose2d", n=1, c=20, m=5, size=4, stride=2, output_padding=1)
    fwd = plan(layer, tensors, "fwd", 16)
    assert sorted(p.steps for p in fwd.problems) == [2 * 1 * 1, 2 * 1 * 2, 2 * 2 * 1, 2 * 2 * 2]
    assert sum((p.rows if fwd.scheduled == "A" else p.cols).count for p in fwd.problems) == 8 * 8  # output positions
    assert fwd.elements == {"A": 20 * 16, "W": 20 * 5 * 9, "out": 5 * 64}
    assert [p.steps for p in plan(layer, tensors, "bwd_input", 16).problems] == [9]
    dw = plan(layer, tensors, "bwd_weight", 16)
    assert len(dw.problems) == 9 and {p.steps for p in dw.problems} == {1} and dw.elements["dW"] == 20 * 5 * 9
    with pytest.raises(ValueError, match="'layer': the dnnsim dataflow forms no transposed convolution's passes"):
        plan(layer, tensors, "fwd", 16, dataflow="dnnsim")


def test_dense_steps_follow_spec(layer_case):
    """ceil(c/N)*kx*ky steps forward; sub-kernel taps for stride 2; samples x position chunks for dW."""
    layer, tensors, _ = layer_case(n=3, c=20, m=5, size=7, kernel=3, stride=2, padding=1)
    fwd = plan(layer, tensors, "fwd", 16)
    assert [p.steps for p in fwd.problems] == [2 * 9]
    bwd = plan(layer, tensors, "bwd_input", 16)
    # output 4x4, m = 5 channels -> 1 chunk; phases of a 3-tap kernel at stride 2: taps {1} or {0, 2}
    assert sorted(p.steps for p in bwd.problems) == [1, 2, 2, 4]
    assert sum(p.rows.count if bwd.scheduled == "G" else p.cols.count for p in bwd.problems) == 3 * 7 * 7
    dw = plan(layer, tensors, "bwd_weight", 16)
    assert len(dw.problems) == 9 and {p.steps for p in dw.problems} == {3 * 1}  # 16 positions per sample


def test_dilated_dense_steps_by_hand(layer_case):
    """Dilation 2, stride 2, 3x3 on 7x7 (padding 2): output 4x4; every tap is even, so stride phase 0 takes all nine
    taps and phase 1 none; the weight gradient samples taps 2 apart."""
    layer, tensors, _ = layer_case(n=3, c=20, m=5, size=7, kernel=3, stride=2, padding=2, dilation=2)
    fwd = plan(layer, tensors, "fwd", 16)
    assert [p.steps for p in fwd.problems] == [2 * 9] and fwd.problems[0].rows.count == 3 * 4 * 4
    bwd = plan(layer, tensors, "bwd_input", 16)
    assert [(p.label, p.steps) for p in bwd.problems] == [("group 0 phase (0,0)", 1 * 9)]
    assert sum(p.rows.count if bwd.scheduled == "G" else p.cols.count for p in bwd.problems) == 3 * 4 * 4
    dw = plan(layer, tensors, "bwd_weight", 16)
    assert len(dw.problems) == 9 and {p.steps for p in dw.problems} == {3 * 1}
    # Tap (1, 2) of output position (1, 3) reads input (1*2 + 1*2 - 2, 3*2 + 2*2 - 2) = (2, 8): padding, zero.
    acts = dw.problems[5].rows if dw.scheduled == "A" else dw.problems[5].cols
    sampled = acts.take(0, 1)[0, 0]  # channel 0, sample 0, the 16 output positions
    expected = [tensors.input[0, 0, 2 * y + 2 - 2, 2 * x + 4 - 2] if 2 * x + 2 < 7 else 0.0
                for y in range(4) for x in range(4)]
    assert sampled.tolist() == expected


def test_sparser_operand_is_scheduled(layer_case):
    layer, tensors, _ = layer_case(c=16, m=16)
    assert plan(layer, tensors, "fwd", 16).scheduled == "A"  # ReLU output: about half zeros
    tensors.weight[:, :, :, :] = 0.0
    tensors.weight[0, 0, 0, 0] = 1.0
    assert plan(layer, tensors, "fwd", 16).scheduled == "W"


def test_pass_batches_cover_all_pairs(layer_case):
    layer, tensors, _ = layer_case(n=2, c=5, m=7, size=4)
    batches = list(passes(layer, tensors, "fwd", rows=3, cols=2, lanes=4, max_values=200))
    assert len(batches) > 1
    row_set = np.concatenate([b.row_set for b in batches])
    col_set = np.concatenate([b.col_set for b in batches])
    assert sorted(zip(row_set, col_set)) == [(r, c) for r in range(11) for c in range(4)]  # 32 windows, 7 filters
    first = batches[0]
    assert first.scheduled.shape[1:] == (3, 9 * 2, 4) and first.partner.shape[1:] == (2, 18, 4)
    rows_used = np.concatenate([b.rows_used for b in batches])
    cols_used = np.concatenate([b.cols_used for b in batches])
    assert rows_used.max() == 3 and rows_used.min() == 2 and cols_used.min() == 1
    last = batches[-1]
    assert not last.scheduled[-1, 2:].any() and not last.partner[-1, 1:].any()  # missing streams are zero


def test_dnnsim_weight_gradient_one_pass_set_per_sample(layer_case):
    """DNNsim forms the weight gradient of each sample on its own: n times the problems, 1/n the steps."""
    layer, tensors, _ = layer_case(**CASES["stride2"])
    default, dnnsim = (plan(layer, tensors, "bwd_weight", 4, dataflow=d) for d in ("default", "dnnsim"))
    n = tensors.input.shape[0]
    assert len(dnnsim.problems) == n * len(default.problems)
    assert {int(p.label.split("sample ")[1].split()[0]) for p in dnnsim.problems} == set(range(n))
    assert default.problems[0].steps == n * dnnsim.problems[0].steps


def test_dnnsim_forward_and_input_gradient_one_sample_per_pass(layer_case):
    """DNNsim simulates a sample at a time: a Linear layer (one window per sample) gets one sample per pass, so its
    forward pass of n samples and m filters on R x C PEs costs n * ceil(m / C) passes of ceil(c / N) steps instead
    of ceil(n / R) * ceil(m / C)."""
    from dashraker.mapping.engine import map_op
    from dashraker.mapping.config import load_config

    layer, tensors, _ = layer_case(kind="linear", n=6, c=40, m=9)
    default, dnnsim = (plan(layer, tensors, op, 16, dataflow=d) for op in ("fwd",) for d in ("default", "dnnsim"))
    assert [p.label for p in default.problems] == ["group 0"]
    assert [p.label for p in dnnsim.problems] == [f"group 0 sample {s}" for s in range(6)]
    assert {p.steps for p in dnnsim.problems} == {3}
    windows = [(p.rows if dnnsim.scheduled == "A" else p.cols).count for p in dnnsim.problems]
    assert windows == [1] * 6
    config = load_config(None, "baseline")
    rows, cols = config.rows, config.cols
    for dataflow, count in (("default", -(-6 // rows) * -(-9 // cols)), ("dnnsim", 6 * -(-9 // cols))):
        tensors.input[:] = np.abs(tensors.input) + 1  # dense activations: the weights may go on the rows
        result = map_op(dataclasses.replace(config, dataflow=dataflow, tiles=1), layer, tensors, "fwd")
        assert (result["passes"], result["dense_cycles"]) == (count, count * 3), dataflow
    bwd = plan(layer, tensors, "bwd_input", 16, dataflow="dnnsim")
    assert [p.label for p in bwd.problems] == [f"group 0 sample {s} phase (0,0)" for s in range(6)]


def test_dnnsim_breaks_a_sparsity_tie_toward_the_second_operand(layer_case):
    """DNNsim schedules the activations only when they are strictly sparser than the weights
    (``in_sparsity > wgt_sparsity``): with both dense the weights go on the rows; the default preset keeps the
    activations there."""
    layer, tensors, _ = layer_case(kind="linear", n=3, c=16, m=5)
    tensors.input[:] = np.abs(tensors.input) + 1
    assert plan(layer, tensors, "fwd", 16).scheduled == "A"
    assert plan(layer, tensors, "fwd", 16, dataflow="dnnsim").scheduled == "W"
    tensors.input[0, 0] = 0.0  # strictly sparser: scheduled in both
    assert plan(layer, tensors, "fwd", 16, dataflow="dnnsim").scheduled == "A"


def test_unknown_dataflow(layer_case):
    layer, tensors, _ = layer_case()
    with pytest.raises(ValueError, match="unknown dataflow 'x'"):
        plan(layer, tensors, "fwd", 4, dataflow="x")


def test_linear_on_tokens_has_token_lanes(layer_case):
    """A Linear on [n, T, features] is a 1x1 convolution over T positions: its weight gradient fills the lanes with
    tokens (2 samples x ceil(19 / 16) = 4 steps), where 38 rows of one position each would take 38 near-empty steps."""
    layer, tensors, _ = layer_case(kind="tokens", n=2, c=20, m=7, size=19)
    assert [p.steps for p in plan(layer, tensors, "bwd_weight", 16).problems] == [4]
    fwd = plan(layer, tensors, "fwd", 16)
    windows = fwd.problems[0].rows if fwd.scheduled == "A" else fwd.problems[0].cols
    assert windows.count == 2 * 19 and windows.steps == 2  # a window per token, ceil(20 / 16) steps
    layer, tensors, _ = layer_case(kind="linear", n=38, c=20, m=7)
    assert [p.steps for p in plan(layer, tensors, "bwd_weight", 16).problems] == [38]
