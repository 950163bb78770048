"""pyverilator co-simulation of real trace passes: RTL outputs equal the golden models, RTL cycles the mapper's."""

import numpy as np
import pytest
import torch
from layer_cases import make_layer, record_upsampler

from dashraker.cli import main
from dashraker.hw.tensordash.window import chunk_layout
from dashraker.hw.tile_stream import step_layout
from dashraker.mapping.dataflow import passes as mapper_passes
from dashraker.models.numerics import bf16_bits_to_fp32
from dashraker.sim import codec
from dashraker.sim.cosim import Cosim
from dashraker.sim.cosim_check import OPS, cosimulate, trace_passes

# Small tiles, so that each design builds in about a minute; C++ at -O0 compiles fastest.
CONFIGS = {
    "baseline": {"rows": 2, "cols": 1, "lanes": 4},
    "tensordash": {"rows": 2, "cols": 1, "lanes": 8},
    "fpraker": {"rows": 2, "cols": 1, "lanes": 4},
}
OPTIMIZE = "-O0"
PASSES = 12


@pytest.fixture(scope="session")
def cosim_trace(tmp_path_factory):
    """A real trace: MobileNet learning digits, one step, two samples (depthwise, strided and pointwise convolutions)."""
    from dashraker.trace import open_trace, record

    out = tmp_path_factory.mktemp("cosim_trace") / "mobilenet"
    record("mobilenet", "digits", [1], 2, out, progress=False, threads=1)
    return open_trace(out)


@pytest.fixture(scope="session")
def cosims(build_cache):
    """One pyverilator model per design, built once per session: a test worker waits for the other's build of the
    same model (a lock on a file in the shared ``build_cache``, released when its holder ends) rather than building
    it too."""
    import fcntl

    built = {}

    def get(design):
        if design not in built:
            (build_cache / "cosim").mkdir(exist_ok=True)
            with open(build_cache / "cosim" / f"{design}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                built[design] = Cosim(design, CONFIGS[design], build_root=build_cache / "cosim", optimize=OPTIMIZE)
        return built[design]

    return get


# MobileNet layers: a pointwise convolution on 8x8 maps after a ReLU (sparse activations, short passes)
# for the forward and weight gradient, a strided depthwise one for the input gradient (stride phases, groups).
LAYERS = {"fwd": "features.24", "bwd_input": "features.21", "bwd_weight": "features.24"}


def _layer(trace, op):
    return next(layer for layer in trace.layers if layer.name == LAYERS[op])


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("design", list(CONFIGS))
def test_trace_passes_agree(design, op, cosims, cosim_trace):
    cosim = cosims(design)
    layer = _layer(cosim_trace, op)
    tensors = cosim_trace.load(layer.name, cosim_trace.steps[-1])
    # Passes from the middle of the operation too, where ReLU zeros and padding vary.
    report = cosimulate(cosim, layer, tensors, op, count=PASSES, chunk=5)
    report.add(cosimulate(cosim, layer, tensors, op, count=PASSES, start=40, chunk=5))
    assert report.passes == 2 * PASSES
    assert report.ok, "\n".join(report.problems)
    assert report.mapper_cycles == report.rtl_cycles > 0
    if design == "baseline":
        assert report.rtl_cycles == report.dense_steps


# Variants of the small tiles, each a further Verilator build (slow): the quick cocotb cases check each one's RTL on
# both simulators. The fused dot product (``--dot fused``), the fused multiply-add lanes (``--dot fma``, L = 1) and two
# threads (``--threads 2``: pass 2k on thread 0, 2k+1 on thread 1; chunks of 5 passes, an odd count, leave the last
# pass alone on thread 0, and the results must come as far apart as the model ends the passes, ``Cost.ends``).
VARIANTS = {
    "baseline-fused": ("baseline", {"dot": "fused"}),
    "tensordash-fused": ("tensordash", {"dot": "fused"}),
    "baseline-fma": ("baseline", {"dot": "fma", "accumulators": 1}),
    "tensordash-threads2": ("tensordash", {"threads": 2}),
}


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variant_trace_passes_agree(variant, cosim_trace, build_cache):
    """Every operation's trace passes equal the golden model, each pass's cycles the mapper's (a dense baseline's,
    its steps)."""
    design, params = VARIANTS[variant]
    cosim = Cosim(design, {**CONFIGS[design], **params}, build_root=build_cache / "cosim", optimize=OPTIMIZE)
    for op in OPS:
        layer = _layer(cosim_trace, op)
        report = cosimulate(cosim, layer, cosim_trace.load(layer.name, cosim_trace.steps[-1]), op, count=PASSES,
                            chunk=5)
        assert report.passes == PASSES and report.ok, "\n".join(report.problems)
        assert report.mapper_cycles == report.rtl_cycles > 0
        if design == "baseline":
            assert report.rtl_cycles == report.dense_steps


@pytest.mark.parametrize("op", list(OPS))
def test_dilated_layer_agrees(op, cosims):
    """A dilated, strided convolution (no bundled network has one): RTL equals golden and mapper on its passes."""
    cosim = cosims("tensordash")
    layer, tensors, _ = make_layer(n=2, c=6, m=5, size=9, kernel=3, stride=2, padding=2, dilation=2, seed=3)
    report = cosimulate(cosim, layer, tensors, op, count=PASSES, chunk=6)
    assert report.passes == PASSES and report.ok, "\n".join(report.problems)
    assert report.mapper_cycles == report.rtl_cycles > 0


@pytest.mark.parametrize("op", list(OPS))
def test_transposed_layer_agrees(op, cosims):
    """A strided, grouped transposed convolution with an output padding: its passes (its convolution's mirrored
    operations, ``mapping.dataflow.MIRRORED``) on the RTL equal the golden model and the mapper's cycles."""
    cosim = cosims("tensordash")
    layer, tensors, _ = make_layer(kind="conv_transpose2d", n=2, c=6, m=4, size=5, stride=2, output_padding=1,
                                   groups=2, seed=6)
    report = cosimulate(cosim, layer, tensors, op, count=PASSES, chunk=6)
    assert report.passes == PASSES and report.ok, "\n".join(report.problems)
    assert report.mapper_cycles == report.rtl_cycles > 0


def test_cli_cosimulates_a_recorded_transposed_layer(cosims, build_cache, tmp_path, capsys):
    cosims("tensordash")  # built once; the command reuses it
    trace = record_upsampler(tmp_path / "trace")
    tile = [f"--{key}={value}" for key, value in CONFIGS["tensordash"].items()]
    assert main(["cosim", str(trace), "--design", "tensordash", *tile, "--build", str(build_cache / "cosim"),
                 "--opt-level", OPTIMIZE[-1], "--no-progress", "--layer", "up2", "--op", "fwd", "--passes", "6"]) == 0
    out = capsys.readouterr().out
    assert "layer up2 fwd" in out and "passes 6" in out and "AGREE" in out


@pytest.mark.parametrize("case", [
    dict(kind="conv1d", n=2, c=6, m=5, size=11, kernel=3, stride=2, padding=2, dilation=2, seed=4),
    dict(kind="matmul", n=3, c=9, m=6, size=7, seed=5),  # 3 products [7, 9] @ [9, 6]: groups of a 1x1 convolution
])
@pytest.mark.parametrize("design", list(CONFIGS))
def test_conv1d_and_matmul_agree(design, case, cosims):
    """The new layer kinds on the RTL: every operation's passes equal the golden model and the mapper's cycles."""
    layer, tensors, _ = make_layer(**case)
    for op in OPS:
        report = cosimulate(cosims(design), layer, tensors, op, count=PASSES, chunk=6)
        assert report.passes == PASSES and report.ok, "\n".join(report.problems)
        assert report.mapper_cycles == report.rtl_cycles > 0


def test_passes_are_the_mappers(cosim_trace):
    """``trace_passes`` slices the mapper's own pass sequence, across its batches."""
    layer = _layer(cosim_trace, "fwd")
    tensors = cosim_trace.load(layer.name, cosim_trace.steps[-1])
    every = [batch for batch in mapper_passes(layer, tensors, "fwd", 2, 1, 4)]
    scheduled = np.concatenate([batch.scheduled for batch in every])
    got = [a for _, a, _ in trace_passes(layer, tensors, "fwd", 2, 1, 4, count=7, start=3)]
    assert np.array_equal(np.concatenate(got), scheduled[3:10])


def test_a_wrong_model_is_caught(cosims, cosim_trace):
    """Comparing against a golden model and mapper of another lookahead reports cycle mismatches."""
    cosim = cosims("tensordash")
    layer = _layer(cosim_trace, "fwd")
    tensors = cosim_trace.load(layer.name, cosim_trace.steps[-1])
    right = cosim.params["lookahead"]
    cosim.params["lookahead"], cosim.params["pattern"] = 1, "T<1,0>"
    try:
        report = cosimulate(cosim, layer, tensors, "fwd", count=PASSES)
    finally:
        cosim.params["lookahead"], cosim.params["pattern"] = right, "T<2,5>"
    assert not report.ok and report.cycle_mismatches > 0 and report.problems


def test_subnormal_cases(cosims):
    """Issue 17 on the RTL: a scheduled subnormal is a zero (DAZ) for outputs and cycles, as golden and mapper say."""
    cosim = cosims("tensordash")
    tile, design = cosim.tile, cosim.design
    values = [np.zeros((1, count, steps, tile.lanes), np.int64) for steps in (1, 8) for count in (tile.rows, tile.cols)]
    inf_a, inf_b, skip_a, skip_b = values
    inf_a[..., 0], inf_b[..., 0] = 0x807F, 0xFF80  # a subnormal against -Inf
    skip_a[:, :, 0], skip_a[0, 0, 1, 0], skip_b[...] = 0x3F80, 0x0001, 0x3F80  # step 1 holds only a subnormal
    for a, b, outputs, cycles in ((inf_a, inf_b, 0, 1), (skip_a, skip_b, 0x41000000, 3)):
        run = cosim.run(*(bf16_bits_to_fp32(torch.as_tensor(x)).numpy() for x in (a, b)))
        assert (run.outputs == outputs).all() and run.cycles.tolist() == [cycles]
        golden, golden_cycles = design.golden(cosim.params, a, b)
        assert np.array_equal(run.outputs, golden) and golden_cycles.tolist() == [cycles]
        charged = design.cost.cycles(cosim.params, bf16_bits_to_fp32(torch.as_tensor(a)).numpy(), None)
        assert charged.tolist() == [cycles]


def test_step_transfers_are_the_layouts_constants():
    """Step and TensorDash chunk transfers (full and partial) equal Amaranth's own ``Layout.const`` of their fields."""
    rng = np.random.default_rng(3)
    passes, rows, cols, steps, lanes = 3, 2, 3, 4, 5
    a = rng.integers(0, 1 << 16, (passes, rows, steps, lanes))
    b = rng.integers(0, 1 << 16, (passes, cols, steps, lanes))
    layout = step_layout(rows, cols, lanes, "bf16")
    value = layout["rows"].shape.elem_shape.elem_shape.from_bits
    fields = [{"rows": [[value(int(v)) for v in row] for row in a[p, :, s]],
               "cols": [[value(int(v)) for v in col] for col in b[p, :, s]],
               "last": int(s == steps - 1)} for p in range(passes) for s in range(steps)]
    expected = [layout.const(step).as_value().value for step in fields]
    assert codec.to_ints(codec.step_transfers(layout, a, b)) == expected

    chunks = chunk_layout(rows, cols, lanes, 2, "bf16")
    sizes = [3, 1, 2, 3, 3]  # 12 steps: partial chunks across pass boundaries
    starts = np.cumsum([0, *sizes[:-1]])
    expected = [chunks.const({"steps": fields[start : start + size], "count": size}).as_value().value
                for start, size in zip(starts, sizes)]
    words = codec.to_words(codec.step_transfers(chunks, a, b, iter(sizes)))
    assert [int.from_bytes(row.tobytes(), "little") for row in words] == expected


def test_cli(cosims, cosim_trace, build_cache, capsys):
    cosims("baseline")  # built once; the command reuses it
    layer = _layer(cosim_trace, "fwd").name
    common = [str(cosim_trace.path), "--design", "baseline", "--rows", "2", "--cols", "1", "--lanes", "4",
              "--build", str(build_cache / "cosim"), "--opt-level", OPTIMIZE[-1], "--no-progress"]
    assert main(["cosim", *common, "--layer", layer, "--op", "bwd_weight", "--passes", "6"]) == 0
    out = capsys.readouterr().out
    assert "passes 6" in out and "output mismatches 0" in out and "AGREE" in out

    assert main(["cosim", *common, "--layer", "nope", "--op", "fwd"]) == 2
    assert "no layer 'nope'" in capsys.readouterr().err
    assert main(["cosim", *common, "--layer", cosim_trace.layers[0].name, "--op", "bwd_input"]) == 2
    assert "first layer" in capsys.readouterr().err
    assert main(["cosim", *common, "--layer", layer, "--op", "fwd", "--lookahead", "1"]) == 2
    assert "--lookahead does not apply to design baseline" in capsys.readouterr().err


def test_pyverilator_signal_api_agrees(cosims, cosim_trace):
    """pyverilator's own port accessors (a wide payload word by word) see what the stream loop sees."""
    cosim = cosims("baseline")
    layer = _layer(cosim_trace, "fwd")
    _, a, b = next(trace_passes(layer, cosim_trace.load(layer.name, cosim_trace.steps[-1]), "fwd", 2, 1, 4, count=2))
    want = cosim.run(a, b).outputs
    io, got = cosim.sim.io, []

    def tick():
        if io["results__valid"]:
            got.append(int(io["results__payload"]))
        cosim.sim.clock.tick()

    io["results__ready"] = 1
    for row in codec.to_words(codec.step_transfers(cosim.in_layout, cosim.bits(a), cosim.bits(b))):
        io["steps__payload"] = int.from_bytes(row.tobytes(), "little")
        io["steps__valid"] = 1
        while not io["steps__ready"]:
            tick()
        tick()
    io["steps__valid"] = 0
    for _ in range(cosim.tile.latency + 2):
        tick()
    outputs = codec.decode(cosim.out_layout, codec.from_ints(got, cosim.out_layout.size))["outputs"]
    assert np.array_equal(outputs, want)


@pytest.fixture(scope="module")
def allocator_cosim(build_cache):
    """The TensorDash tile of ``CONFIGS`` with the separable allocator of two rounds (SPEC section 3, amended)."""
    return Cosim("tensordash", {**CONFIGS["tensordash"], "scheduler": "separable2"}, build_root=build_cache / "cosim",
                 optimize=OPTIMIZE)


@pytest.mark.slow  # a fourth Verilator build; the quick cocotb cases check the allocators' RTL against their model
@pytest.mark.parametrize("op", list(OPS))
def test_allocator_trace_passes_agree(op, allocator_cosim, cosim_trace):
    """The allocator's tile on real passes: outputs equal the golden model's, cycles the mapper's (its own
    reference), and over all passes no more than the dense steps."""
    layer = _layer(cosim_trace, op)
    tensors = cosim_trace.load(layer.name, cosim_trace.steps[-1])
    report = cosimulate(allocator_cosim, layer, tensors, op, count=PASSES, start=40, chunk=5)
    assert report.ok, "\n".join(report.problems)
    assert report.mapper_cycles == report.rtl_cycles > 0
    assert report.rtl_cycles <= report.dense_steps
