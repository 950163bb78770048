"""The mapper's GPU path: the same figures as the CPU path (run where PyTorch sees a CUDA GPU; skipped in CI)."""

import dataclasses

import numpy as np
import pytest
import torch

from dashraker.mapping.config import ConfigError, check_device, load_config
from dashraker.mapping.engine import map_op
from dashraker.mapping.runner import layer_ops

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_device_names_checked():
    assert check_device("cpu") == "cpu"
    with pytest.raises(ConfigError, match="not a device"):
        check_device("gpu0")
    with pytest.raises(ConfigError, match="cpu or cuda"):
        check_device("meta")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            check_device("cuda")
    else:
        with pytest.raises(ConfigError, match="CUDA GPU"):
            check_device(f"cuda:{torch.cuda.device_count()}")


@cuda
def test_reference_models_on_cuda_equal_cpu():
    from dashraker.models import fpraker, interconnect, tensordash

    rng = np.random.default_rng(7)
    values = rng.standard_normal((40, 4, 37, 16)).astype(np.float32) * (rng.random((40, 4, 37, 16)) < 0.4)
    schedule = (interconnect.parse_pattern("T<2,5>"), 2, "greedy")
    assert np.array_equal(tensordash.cycles(values, *schedule, device="cuda"), tensordash.cycles(values, *schedule))
    a = rng.integers(0, 1 << 16, (30, 2, 21, 8))
    b = rng.integers(0, 1 << 16, (30, 3, 21, 8))
    a[rng.random(a.shape) < 0.5] = 0
    on_gpu, on_cpu = fpraker.tile(a, b, 3, 1, device="cuda"), fpraker.tile(a, b, 3, 1)
    for field in dataclasses.fields(on_cpu):
        gpu, cpu = getattr(on_gpu, field.name).cpu(), getattr(on_cpu, field.name)
        assert torch.equal(gpu.view(torch.int32) if gpu.is_floating_point() else gpu,
                           cpu.view(torch.int32) if cpu.is_floating_point() else cpu), field.name


@cuda
@pytest.mark.parametrize("design", ["baseline", "tensordash", "fpraker"])
def test_mapping_on_cuda_equals_cpu(mobilenet_trace, design):
    from dashraker.trace import open_trace

    trace = open_trace(mobilenet_trace)
    on_cpu = load_config(None, design)
    on_gpu = load_config(None, design, "cuda")
    for index, layer in enumerate(trace.layers):
        tensors = trace.load(layer.name, trace.steps[0])
        for op in layer_ops(index, layer):
            assert map_op(on_gpu, layer, tensors, op) == map_op(on_cpu, layer, tensors, op), (layer.name, op)
