"""Layers with real tensors for the mapper tests: PyTorch computes the activations and gradients."""

import signal
import sys

import pytest
from layer_cases import make_layer, record_upsampler


@pytest.fixture
def sigint_delivered():
    """Commands the test starts take SIGINT as from a terminal, even where this run was started with it ignored.

    A shell starts background jobs with SIGINT ignored, Python keeps an ignored SIGINT,
    and children inherit it; a Python handler here instead lets them exec with the default.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def layer_case():
    return make_layer


@pytest.fixture(scope="session")
def mobilenet_trace(tmp_path_factory):
    """A real trace (trace package's recorder): MobileNet on digits, strided and depthwise convs and a Linear."""
    from dashraker.trace import record

    folder = tmp_path_factory.mktemp("trace") / "mobilenet"
    return record("mobilenet", "digits", steps=[1], samples=1, out=folder, progress=False)


@pytest.fixture(scope="session")
def small_trace(tmp_path_factory):
    """A real trace of one step of one sample of the digits MLP: the smallest the recorder makes."""
    from dashraker.trace import record

    return record("mlp", "digits", steps=[1], samples=1, out=tmp_path_factory.mktemp("small") / "mlp",
                  progress=False, threads=1)


@pytest.fixture
def map_command():
    """``dashraker map`` as a child process, without the tile synthesis its leakage needs (minutes for the default
    tiles), as the autouse fixture ``tile_areas_unmeasured`` does in this process: the tests that signal or kill
    the command, whose workers start only after it."""
    return [sys.executable, "-c", "import sys; import dashraker.mapping.silicon as silicon; "
            "silicon.resolve_all = lambda configs, *args, **kwargs: list(configs); "
            "from dashraker.cli import main; sys.exit(main(['map', *sys.argv[1:]]))"]


@pytest.fixture(scope="session")
def upsampler_trace(tmp_path_factory):
    """A recorded trace with two transposed convolutions (``layer_cases.Upsampler``)."""
    return record_upsampler(tmp_path_factory.mktemp("upsampler") / "trace")
