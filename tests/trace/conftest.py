"""Fixtures of the trace tests: a small recorded trace shared by the reader, check and export tests."""

import contextlib

import pytest
import torch
from torch.nn import functional as F
from trace_helpers import MixedNet, one_thread

from dashraker.trace.recorder import Recorder


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


def _record_mixed(out, net):
    """Train ``net`` 3 SGD steps on random 8x8 images, recording steps 1 and 3 (2 of 6 samples, input gradients)."""
    recorder = Recorder(net, out, samples=2, input_grad=True, meta={"model": "mixednet", "batches_per_epoch": 2})
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(1)
    with one_thread():
        for step in (1, 2, 3):
            x, y = torch.randn(6, 3, 8, 8, generator=generator), torch.randint(0, 10, (6,), generator=generator)
            with recorder.step(step) if step in (1, 3) else contextlib.nullcontext():
                optimizer.zero_grad()
                F.cross_entropy(net(x), y).backward()
            optimizer.step()
    return out


@pytest.fixture(scope="session")
def mixed_trace(tmp_path_factory):
    """A trace of MixedNet (conv4 has stride (2, 1))."""
    torch.manual_seed(0)
    return _record_mixed(tmp_path_factory.mktemp("mixed") / "trace", MixedNet())


@pytest.fixture(scope="session")
def mixed_net_trace(tmp_path_factory):
    """``get(**options)``: a trace of ``MixedNet(**options)``, recorded once per session."""
    traces = {}

    def get(**options):
        key = repr(sorted(options.items()))
        if key not in traces:
            torch.manual_seed(0)
            traces[key] = _record_mixed(tmp_path_factory.mktemp("mixednet") / "trace", MixedNet(**options))
        return traces[key]

    return get
