"""Layers with real tensors for the mapper tests: PyTorch computes the activations and gradients."""

import pytest
from layer_cases import make_layer


@pytest.fixture
def layer_case():
    return make_layer


@pytest.fixture(scope="session")
def mobilenet_trace(tmp_path_factory):
    """A real trace (trace package's recorder): MobileNet on digits, strided and depthwise convs and a Linear."""
    from dashraker.trace import record

    folder = tmp_path_factory.mktemp("trace") / "mobilenet"
    return record("mobilenet", "digits", steps=[1], samples=1, out=folder, progress=False)
